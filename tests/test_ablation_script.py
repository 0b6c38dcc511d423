"""`scripts/reward_ablation.sh`, the reward ablation docs/lab-notebook.md reports: each stage is skipped
when its result exists and continues a stopped run where one was left, both arms train from the same
SFT model on the same pass-rate table with the overrides the docs name, and the last stage draws both
curves."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "reward_ablation.sh"


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "SQLENV_SPIDER_DIR": "/spider", "SQLENV_PYTHON": sys.executable}
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _planned(output: str) -> list[list[str]]:
    """The commands a dry run prints, split as the shell would split them."""
    prefix = "   would run: "
    return [shlex.split(line.removeprefix(prefix)) for line in output.splitlines() if line.startswith(prefix)]


def _sqlenv_command(words: list[str]) -> list[str]:
    """The `sqlenv` arguments of a planned command (after `python -m sqlenv.cli`), or [] for others."""
    if "sqlenv.cli" not in words:
        return []
    return words[words.index("sqlenv.cli") + 1 :]


def _options(args: list[str], name: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args) if arg == name]


def _sft_model_and_pass_rates_done(cwd: Path) -> Path:
    """Stages 1 and 2 as their results leave them (what the script looks for); the table's path."""
    sft = cwd / "runs" / "cpu-qwen0.5b" / "sft"
    (sft / "final").mkdir(parents=True)
    (sft / "log_history.json").write_text("[]")  # written last, after the final model
    table = cwd / "docs" / "results" / "qwen05-sft-pass-rates.json"
    table.parent.mkdir(parents=True)
    table.write_text("{}")
    return table


def test_a_fresh_checkout_plans_every_stage_and_both_arms_differ_only_in_their_reward(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    from sqlenv.cli.train import _train_config

    result = _run(tmp_path, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "runs").exists()  # a dry run writes nothing
    commands = [_sqlenv_command(words) for words in _planned(result.stdout)]
    assert [c[:2] for c in commands if c] == [
        ["models", "fetch"], ["train", "sft"], ["eval", "--policy"], ["train", "pass-rates"],
        ["train", "grpo"], ["train", "grpo"], ["train", "curves"],
    ]  # fmt: skip
    sft, play, table = commands[1], commands[2], commands[4]
    assert "--resume" not in sft and _options(sft, "--config") == [str(REPO / "configs" / "cpu-qwen0.5b.yaml")]
    assert "--samples 4" in " ".join(play) and "--temperature 1.0" in " ".join(play)
    assert _options(play, "--journal") == ["runs/journal-qwen05-sft-train-T1x4"]
    assert table[2:] == ["runs/reports/qwen05-sft-train-T1x4", "--out", "docs/results/qwen05-sft-pass-rates.json"]

    arms = {}
    for command in (c for c in commands if c[:2] == ["train", "grpo"]):
        assert "--resume" not in command
        config = _train_config(Path(_options(command, "--config")[0]), Path("/spider"), _options(command, "--set"))
        arms[config.output_dir] = config
    correctness, dense = arms["runs/cpu-qwen0.5b-correctness"], arms["runs/cpu-qwen0.5b-dense"]
    for arm in (correctness, dense):
        assert arm.grpo.init_from == "runs/cpu-qwen0.5b/sft/final"
        assert arm.grpo.pass_rates_from == "docs/results/qwen05-sft-pass-rates.json"
    # each arm's points kept where docs/lab-notebook.md cites them from
    assert correctness.live.keep_points_in == "docs/results/qwen05-ablation-correctness"
    assert dense.live.keep_points_in == "docs/results/qwen05-ablation-dense"
    assert correctness.grpo.reward_weights == {"correctness": 1.0, "progress": 0.0, "operational": 0.0}
    assert dense.grpo.reward_weights == {"correctness": 1.0, "progress": 1.0, "operational": 1.0}
    assert (correctness.grpo.max_steps, correctness.grpo.learning_rate) == (dense.grpo.max_steps, dense.grpo.learning_rate)
    assert commands[-1][2:4] == ["dense=runs/cpu-qwen0.5b-dense/grpo", "correctness only=runs/cpu-qwen0.5b-correctness/grpo"]


def test_finished_stages_are_skipped_and_a_stopped_arm_continues_from_its_checkpoint(tmp_path: Path) -> None:
    table = _sft_model_and_pass_rates_done(tmp_path)
    stopped = tmp_path / "runs" / "cpu-qwen0.5b-dense" / "grpo"
    (stopped / "checkpoint-42").mkdir(parents=True)
    (stopped / "checkpoint-42" / "trainer_state.json").write_text("{}")  # the Trainer writes it last
    (stopped / "checkpoint-44").mkdir()  # stopped while saving it: the run continues from 42
    (stopped / "final").mkdir()  # stopped while saving its final model: not done

    result = _run(tmp_path, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "1 sft: done (runs/cpu-qwen0.5b/sft/final)" in result.stdout
    assert "2 pass-rates: done (docs/results/qwen05-sft-pass-rates.json)" in result.stdout
    assert "3 dense: training runs/cpu-qwen0.5b-dense/grpo (continuing from its last checkpoint)" in result.stdout
    grpo = [c for c in map(_sqlenv_command, _planned(result.stdout)) if c[:2] == ["train", "grpo"]]
    assert len(grpo) == 2 and grpo[0][-1] == "--resume" and "--resume" not in grpo[1]

    # Stopped while saving its first checkpoint: nothing to continue from, so the arm starts again
    # (`--resume` would refuse: tests/test_checkpoints.py).
    (stopped / "checkpoint-42" / "trainer_state.json").unlink()
    result = _run(tmp_path, "--dry-run")
    assert re.search(r"3 dense: training runs/cpu-qwen0.5b-dense/grpo \(\d\d:\d\d:\d\d\)", result.stdout)
    grpo = [c for c in map(_sqlenv_command, _planned(result.stdout)) if c[:2] == ["train", "grpo"]]
    assert len(grpo) == 2 and not any("--resume" in command for command in grpo)

    # Without a table, the play continues its journal: the dry run says how far it got.
    table.unlink()
    journal = tmp_path / "runs" / "journal-qwen05-sft-train-T1x4"
    journal.mkdir()
    (journal / "episodes.jsonl").write_text(
        json.dumps({"format": "sqlenv-episode-journal/1"}) + "\n"
        + "".join(json.dumps({"index": i, "episode": {}}) + "\n" for i in range(3))
    )
    result = _run(tmp_path, "--dry-run")
    assert "2 pass-rates: playing the train questions (3 episodes in runs/journal-qwen05-sft-train-T1x4)" in result.stdout


def test_with_both_arms_trained_it_draws_their_curves_and_compares_their_questions(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    _sft_model_and_pass_rates_done(tmp_path)
    for arm, success in (("dense", 0.3), ("correctness", 0.2)):
        grpo = tmp_path / "runs" / f"cpu-qwen0.5b-{arm}" / "grpo"
        (grpo / "live").mkdir(parents=True)
        (grpo / "log_history.json").write_text("[]")
        (grpo / "live" / "heldout.json").write_text(json.dumps([
            {"step": s, "n": 100, "success": v, "success_twin": v, "success_new_sql": v, "mean_reward": v,
             "format_error_rate": 0.0}
            for s, v in ((0, 0.2), (10, success))
        ]))  # fmt: skip
        (grpo / "live" / "diagnostics.json").write_text(
            json.dumps([{"step": s, "kl": 0.0, "questions": [f"train-{s}", f"train-{s + 50}"]} for s in (1, 2)])
        )

    result = _run(tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "3 dense: done" in result.stdout and "4 correctness: done" in result.stdout
    assert (tmp_path / "runs" / "reports" / "reward-ablation.png").stat().st_size > 10_000
    said = " ".join(result.stdout.split())  # rich wraps long lines
    assert "played the same questions as dense, in the same order, at each of the 2 steps both recorded" in said


def test_named_arms_train_alone_in_their_order_and_the_curves_wait_for_both(tmp_path: Path) -> None:
    _sft_model_and_pass_rates_done(tmp_path)
    result = _run(tmp_path, "--dry-run", "correctness")
    assert result.returncode == 0, result.stderr
    grpo = [c for c in map(_sqlenv_command, _planned(result.stdout)) if c[:2] == ["train", "grpo"]]
    assert len(grpo) == 1 and _options(grpo[0], "--set")[0] == "output_dir=runs/cpu-qwen0.5b-correctness"
    assert "3 dense" not in result.stdout
    assert "5 curves: waiting for the dense arm (runs/cpu-qwen0.5b-dense/grpo)" in result.stdout
    assert not any(c[:2] == ["train", "curves"] for c in map(_sqlenv_command, _planned(result.stdout)))

    result = _run(tmp_path, "--dry-run", "correctness", "dense", "correctness")  # a repeat trains once
    stages = [line.split(" (")[0] for line in result.stdout.splitlines() if line.startswith("== ")]
    assert stages[2:] == [
        "== 4 correctness: training runs/cpu-qwen0.5b-correctness/grpo",
        "== 3 dense: training runs/cpu-qwen0.5b-dense/grpo",
        "== 5 curves: runs/reports/reward-ablation.png",
    ]


def test_an_unknown_argument_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    for args in (["--dryrun"], ["--dry-run", "extra"], ["dense", "sparse"], ["--answer-mode"], ["--answer-mode", "SQL"]):
        result = _run(tmp_path, *args)
        assert result.returncode == 2 and "usage:" in result.stderr, args
        assert "bash scripts/reward_ablation.sh [--dry-run] [--answer-mode value|sql] [ARM ...]" in result.stderr
    assert not any(tmp_path.iterdir())


def test_in_sql_answer_mode_every_stage_trains_plays_and_measures_in_sql_mode(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    from sqlenv.cli.train import _train_config

    result = _run(tmp_path, "--dry-run", "--answer-mode", "sql")
    assert result.returncode == 0, result.stderr
    commands = [c for c in map(_sqlenv_command, _planned(result.stdout)) if c]
    sft = next(c for c in commands if c[:2] == ["train", "sft"])
    warm_up = _train_config(Path(_options(sft, "--config")[0]), Path("/spider"), _options(sft, "--set"))
    assert warm_up.sft.answer_modes == ["value", "sql"] and warm_up.output_dir == "runs/cpu-qwen0.5b-both-modes"

    play = next(c for c in commands if c[:2] == ["eval", "--policy"])
    assert play[2] == "runs/cpu-qwen0.5b-both-modes/sft/final" and _options(play, "--answer-mode") == ["sql"]
    assert _options(play, "--journal") == ["runs/journal-qwen05-sft-both-train-sql-T1x4"]
    table = next(c for c in commands if c[:2] == ["train", "pass-rates"])
    assert table[2:] == ["runs/reports/qwen05-sft-both-train-sql-T1x4", "--out", "docs/results/qwen05-sft-both-sql-pass-rates.json"]

    arms = {}
    for command in (c for c in commands if c[:2] == ["train", "grpo"]):
        config = _train_config(Path(_options(command, "--config")[0]), Path("/spider"), _options(command, "--set"))
        arms[config.output_dir] = config
    assert sorted(arms) == ["runs/cpu-qwen0.5b-sql-correctness", "runs/cpu-qwen0.5b-sql-dense"]
    for arm in arms.values():
        assert arm.answer_mode == "sql"
        assert arm.grpo.init_from == "runs/cpu-qwen0.5b-both-modes/sft/final"
        assert arm.grpo.pass_rates_from == "docs/results/qwen05-sft-both-sql-pass-rates.json"
    assert arms["runs/cpu-qwen0.5b-sql-correctness"].grpo.reward_weights == {"correctness": 1.0, "progress": 0.0, "operational": 0.0}
    for name in ("dense", "correctness"):
        assert arms[f"runs/cpu-qwen0.5b-sql-{name}"].live.keep_points_in == f"docs/results/qwen05-sql-{name}"
    assert commands[-1][2:] == [
        "dense=runs/cpu-qwen0.5b-sql-dense/grpo", "correctness only=runs/cpu-qwen0.5b-sql-correctness/grpo",
        "--out", "runs/reports/reward-ablation-sql.png",
    ]  # fmt: skip

    # The value-mode run's results are not the SQL-mode run's: its finished warm-up is trained again.
    _sft_model_and_pass_rates_done(tmp_path)
    result = _run(tmp_path, "--dry-run", "--answer-mode", "sql")
    assert "1 sft: training runs/cpu-qwen0.5b-both-modes/sft/final" in result.stdout
    assert "2 pass-rates: playing the train questions" in result.stdout
