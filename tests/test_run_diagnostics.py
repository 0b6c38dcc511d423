"""A GRPO run's per-step diagnostics read back and summed up by blocks of steps
(`sqlenv.training.diagnostics.block_means`, `sqlenv train diagnostics`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sqlenv.training.diagnostics import BLOCK_COLUMNS, block_means, diagnostic_points

REPO = Path(__file__).resolve().parents[1]


def _point(step: int, reward: float, **extra: float) -> dict[str, float]:
    return {"step": step, "reward": reward, "answer_rate": 1.0 - step / 10, "kl": 0.001 * step, **extra}


def test_block_means_average_each_block_and_mark_what_a_block_did_not_record(tmp_path: Path) -> None:
    points = [_point(step, reward=step / 10, step_time=100.0 + step) for step in (3, 1, 2, 4)]
    points.append(_point(5, reward=0.9))  # written without its step time
    (tmp_path / "live").mkdir()
    (tmp_path / "live" / "diagnostics.json").write_text(json.dumps(points))
    read = diagnostic_points(tmp_path)
    assert [p["step"] for p in read] == [1, 2, 3, 4, 5]  # in step order, from a run directory
    assert diagnostic_points(tmp_path / "live" / "diagnostics.json") == read  # or the file itself
    rows = block_means(read, 2)
    assert [(r["first"], r["last"], r["steps"]) for r in rows] == [(1, 2, 2), (3, 4, 2), (5, 5, 1)]
    assert rows[0]["reward"] == pytest.approx(0.15) and rows[1]["reward"] == pytest.approx(0.35)
    assert rows[1]["answer_rate"] == pytest.approx(0.65) and rows[1]["kl"] == pytest.approx(0.0035)
    assert rows[1]["step_time"] == pytest.approx(103.5) and rows[2]["step_time"] is None
    assert rows[0]["grad_norm"] is None  # no step recorded it
    assert {key for key, _, _ in BLOCK_COLUMNS} <= set(rows[0])
    assert [(r["first"], r["last"]) for r in block_means(read, 10)] == [(1, 5)]
    assert [(r["first"], r["last"]) for r in block_means(read[2:], 2)] == [(3, 4), (5, 5)]  # blocks from step 1
    with pytest.raises(ValueError, match="at least 1 step"):
        block_means(read, 0)
    with pytest.raises(FileNotFoundError, match=r"no diagnostics\.json"):
        diagnostic_points(tmp_path / "nothing")


def test_sqlenv_train_diagnostics_prints_the_blocks_of_a_kept_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fourth Qwen run's committed points give docs/lab-notebook.md's table, row for row."""
    from typer.testing import CliRunner

    from sqlenv.cli import app

    kept = REPO / "docs" / "results" / "qwen05-grpo-try4" / "diagnostics.json"
    result = CliRunner().invoke(app, ["train", "diagnostics", str(kept), "--every", "10", "--markdown"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("| steps | training reward | correctness | rollouts that answered |")
    assert lines[2].startswith("| 1–10 | 0.158 | 0.113 | 0.68 | 4.03 | 1.09 | 0.200 | 0.70 | 134 |")
    assert lines[5].startswith("| 31–36 | 0.059 | 0.000 | 0.67 | 4.67 | 1.60 | 0.055 | 1.00 | 189 |")
    assert len(lines) == 6
    monkeypatch.setenv("COLUMNS", "300")  # the table's cells unwrapped
    table = CliRunner().invoke(app, ["train", "diagnostics", str(kept), "--every", "12"])
    assert table.exit_code == 0, table.output
    assert "means over blocks of 12 steps" in table.output and "25–36" in table.output
    empty = tmp_path / "diagnostics.json"
    empty.write_text("[]")
    for args, message in (
        ([str(empty)], "records no step yet"),
        ([str(tmp_path / "none")], "no diagnostics.json"),
        ([str(kept), "--every", "0"], "--every"),
    ):
        refused = CliRunner().invoke(app, ["train", "diagnostics", *args])
        assert refused.exit_code != 0 and message in refused.output, refused.output
