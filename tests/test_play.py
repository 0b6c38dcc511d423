"""`sqlenv play`: a person types actions in the terminal and sees results, rewards and budget."""

from __future__ import annotations

import subprocess
import sys

from sqlenv.cli.play import parse_command


def test_parse_command() -> None:
    assert parse_command("query SELECT 1") == ("QUERY", "SELECT 1")
    assert parse_command("  Describe   books ") == ("DESCRIBE", "books")
    assert parse_command("answer") == ("ANSWER", "")
    assert parse_command("   ") is None


def run_play(lines: list[str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "sqlenv.cli", "play", *args],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "120", "PATH": "/usr/bin:/bin", "TERM": "dumb", "HOME": "/tmp", **_cache_env()},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _cache_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k.startswith("SQLENV_") or k == "XDG_CACHE_HOME"}


def test_a_person_plays_an_episode_in_the_terminal(demo_dataset) -> None:
    record = demo_dataset.get("demo-0000")
    out = run_play(
        [
            "describe BOOKS",
            "sample books",
            "fly away",
            f"query {record.gold_sql}",
            f"answer {record.gold_answer[0][0]}",
            "quit",
        ],
        "--question-id",
        "demo-0000",
    )
    assert record.question in out
    assert "Tables: authors, books, loans, members" in out
    assert "table books" in out and "columns:" in out
    assert "unknown command 'fly'" in out
    assert "reward +0.020" in out
    assert "Episode over: correct" in out
    assert "15 steps left" in out and "12 steps left" in out


def test_errors_are_shown_and_play_goes_on(demo_dataset) -> None:
    out = run_play(["query DELETE FROM books", "describe nowhere", "answer 1", "quit"], "--seed", "4")
    assert "error:" in out and "not allowed" in out
    assert "unknown table 'nowhere'" in out
    assert "Episode over: not correct" in out
