"""`scripts/evaluate_model.sh`, the evaluations docs/lab-notebook.md reports for one model: each set is
played in its answer mode with a journal, and the same command again reads the finished ones back
instead of playing them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "evaluate_model.sh"


def _run(cwd: Path, spider_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "SQLENV_SPIDER_DIR": str(spider_dir), "SQLENV_PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_each_set_plays_in_its_answer_mode_and_a_second_run_reads_the_journals(
    spider_dir: Path, tmp_path: Path
) -> None:
    first = _run(tmp_path, spider_dir, "gold", "oracle", "spider10-sql", "spider10-value")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    for name, mode in (("spider10-sql", "sql"), ("spider10-value", "value")):
        result = json.loads((tmp_path / "runs" / "reports" / f"gold-{name}.json").read_text())
        assert (result["dataset"], result["n_episodes"], result["answer_mode"]) == ("spider10", 203, mode)
        assert result["success_rate"] == 1.0 and result["journal_episodes"] == 0
        assert (tmp_path / "runs" / "reports" / f"gold-{name}" / "summary.md").is_file()
    again = _run(tmp_path, spider_dir, "gold", "oracle", "spider10-sql")
    assert again.returncode == 0, again.stderr[-2000:]
    result = json.loads((tmp_path / "runs" / "reports" / "gold-spider10-sql.json").read_text())
    assert result["journal_episodes"] == 203  # nothing played twice


def test_an_unknown_set_or_missing_arguments_are_refused(spider_dir: Path, tmp_path: Path) -> None:
    wrong = _run(tmp_path, spider_dir, "gold", "oracle", "spider10-sql", "spider10-values")
    assert wrong.returncode == 2
    assert (
        "unknown set 'spider10-values': use spider10-value, spider10-sql, dev-value, dev-sql, val-value or "
        "val-sql, each optionally ending in -shown"
    ) in wrong.stderr
    assert not (tmp_path / "runs").exists()  # the good set before it did not play either
    bare = _run(tmp_path, spider_dir)
    assert bare.returncode == 2 and "bash scripts/evaluate_model.sh LABEL POLICY [SET ...]" in bare.stderr


def test_a_shown_set_plays_with_the_schema_shown_and_val_plays_the_validation_split(
    spider_dir: Path, tmp_path: Path
) -> None:
    done = _run(tmp_path, spider_dir, "gold", "oracle", "spider10-sql-shown", "val-sql")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    shown = json.loads((tmp_path / "runs" / "reports" / "gold-spider10-sql-shown.json").read_text())
    assert (shown["dataset"], shown["n_episodes"], shown["answer_mode"]) == ("spider10", 203, "sql")
    assert shown["show_schema"] is True and shown["success_rate"] == 1.0
    val = json.loads((tmp_path / "runs" / "reports" / "gold-val-sql.json").read_text())
    assert (val["dataset"], val["show_schema"]) == ("spider", False)
    assert val["n_episodes"] == 552  # the spider preset's validation split: ten withheld train databases
    assert (tmp_path / "runs" / "journal-gold-val-sql").exists()
