"""A short run of benchmarks/soak.py: sessions playing, disconnecting and reconnecting against a
real server for half a minute end with no error, no leaked session and no RSS growth over 10 %."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import REPO_ROOT


@pytest.mark.slow
def test_a_short_soak_has_no_errors_no_leaks_and_flat_memory() -> None:
    completed = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "benchmarks" / "soak.py"),
            "--sessions",
            "32",
            "--minutes",
            "0.5",
            "--report-every",
            "10",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    output = completed.stdout + completed.stderr
    print(output)
    assert completed.returncode == 0, output
    assert re.search(r"^errors: 0$", output, re.MULTILINE), output
    assert re.search(r"^leaked sessions: 0$", output, re.MULTILINE), output
    steps = int(re.search(r"min: ([\d,]+) steps", output).group(1).replace(",", ""))
    reconnects = int(
        re.search(r"episodes, ([\d,]+) reconnects$", output, re.MULTILINE).group(1).replace(",", "")
    )
    assert steps > 1_000 and reconnects > 10
    assert "verdict: PASS" in output
