"""OpenEnv packaging: the manifest validates statically, and a live server passes `openenv validate --url`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO_ROOT, RunningServer

OPENENV = str(Path(sys.executable).with_name("openenv"))


def run_validate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [OPENENV, "validate", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )


def test_manifest_passes_static_validation() -> None:
    result = run_validate("--level", "static", "--skip-build")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Verdict: PASS" in result.stdout


def test_live_server_passes_openenv_validate(demo_server: RunningServer) -> None:
    result = run_validate("--url", demo_server.url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Verdict: PASS" in result.stdout
    assert "FAIL" not in result.stdout
