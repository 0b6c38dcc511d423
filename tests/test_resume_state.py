"""A checkpoint's resume state published as JSON and written back, with the real generators' states.

The states are the ones the transformers Trainer saves (`Trainer._save_rng_state`: Python's, NumPy's
and torch's random generators; a LambdaLR schedule's state dict), written with `torch.save` as the
Trainer writes them. What comes back from the JSON must re-seed each generator so that it draws
what the original would have drawn.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the llm extra is not installed (pip install -e '.[llm]')")
np = pytest.importorskip("numpy")

from sqlenv.agents.resume_state import (  # noqa: E402
    ResumeStateError,
    checkpoint_name,
    from_json,
    publish_resume_state,
    published_name,
    restore_resume_state,
    to_json,
)


def _checkpoint(folder: Path) -> Path:
    """A checkpoint folder with the Trainer's resume files, saved as the Trainer saves them."""
    folder.mkdir()
    parameter = torch.nn.Parameter(torch.zeros(1))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        torch.optim.AdamW([parameter], lr=1e-4), lambda s: 1 - s / 200
    )
    for _ in range(26):
        schedule.step()
    torch.save(schedule.state_dict(), folder / "scheduler.pt")
    random.seed(7), np.random.seed(7), torch.manual_seed(7)
    random.random(), np.random.normal(), torch.rand(3)  # states part-way through, a cached Gaussian
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.random.get_rng_state()}
    torch.save(state, folder / "rng_state.pth")
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 26, "log_history": []}))
    (folder / "optimizer.pt").write_bytes(b"not resume state")
    return folder


def test_published_as_json_and_written_back_reseeds_every_generator(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path / "checkpoint-26")
    names = publish_resume_state(checkpoint, tmp_path / "resume")
    assert names == ["rng_state.json", "scheduler.json", "trainer_state.json"]
    assert sorted(p.name for p in (tmp_path / "resume").iterdir()) == names
    for name in names:  # plain JSON, readable without torch
        json.loads((tmp_path / "resume" / name).read_text())
    restored = tmp_path / "restored"
    restored.mkdir()
    restore_resume_state(tmp_path / "resume", names, restored)
    assert sorted(p.name for p in restored.iterdir()) == [
        "rng_state.pth",
        "scheduler.pt",
        "trainer_state.json",
    ]
    assert torch.load(restored / "scheduler.pt", weights_only=True) == torch.load(checkpoint / "scheduler.pt")
    # The Trainer reads the random state so (transformers' Trainer._load_rng_state).
    from transformers.trainer_pt_utils import safe_globals

    with safe_globals():
        original = torch.load(checkpoint / "rng_state.pth", weights_only=True)
        back = torch.load(restored / "rng_state.pth", weights_only=True)
    draws = []
    for state in (original, back):
        random.setstate(state["python"])
        np.random.set_state(state["numpy"])
        torch.random.set_rng_state(state["cpu"])
        draws.append((random.random(), np.random.normal(), torch.rand(4).tolist()))
    assert draws[0] == draws[1]


def test_a_checkpoint_without_its_schedule_is_refused(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path / "checkpoint-3")
    (checkpoint / "scheduler.pt").unlink()
    with pytest.raises(ResumeStateError, match=r"has no scheduler\.pt: not a whole checkpoint"):
        publish_resume_state(checkpoint, tmp_path / "resume")
    assert not (tmp_path / "resume").exists()


def test_values_json_cannot_carry_are_refused_by_name() -> None:
    with pytest.raises(ResumeStateError, match=r"state\.extra is a pathlib.PosixPath"):
        to_json({"extra": Path("/x")})
    with pytest.raises(ResumeStateError, match="key that is not a string"):
        to_json({1: 2})
    with pytest.raises(ResumeStateError, match=r"keys \['tuple'\] are those of a tagged value"):
        to_json({"tuple": [1]})  # would read back as a tuple
    with pytest.raises(ResumeStateError, match="are those of a tagged value"):
        to_json({"state": {"tensor": "int64", "shape": [1], "data": [3]}})  # would read back as a tensor
    assert to_json({"tensor": 1, "shape": 2}) == {"tensor": 1, "shape": 2}  # not a tag's key set: kept


def test_tagged_values_read_back_with_their_types() -> None:
    value = {"t": (1, (2.5, None)), "x": torch.arange(6, dtype=torch.int64).reshape(2, 3),
             "a": np.arange(4, dtype=np.uint32), "l": [True, "s"]}  # fmt: skip
    back = from_json(json.loads(json.dumps(to_json(value))))
    assert back["t"] == (1, (2.5, None)) and isinstance(back["t"][1], tuple)
    assert back["x"].dtype == torch.int64 and torch.equal(back["x"], value["x"])
    assert back["a"].dtype == np.uint32 and np.array_equal(back["a"], value["a"])
    assert back["l"] == [True, "s"]
    with pytest.raises(ResumeStateError, match="unknown tensor dtype 'os'"):
        from_json({"tensor": "os", "shape": [1], "data": [1]})
    with pytest.raises(ResumeStateError, match="tensor of shape"):
        from_json({"tensor": "uint8", "shape": [3], "data": [1, 2]})


def test_names_map_between_the_trainer_and_the_published_folder(tmp_path: Path) -> None:
    for trainer, published in [("scheduler.pt", "scheduler.json"), ("rng_state.pth", "rng_state.json"),
                               ("rng_state_3.pth", "rng_state_3.json"), ("trainer_state.json", "trainer_state.json")]:  # fmt: skip
        assert published_name(trainer) == published and checkpoint_name(published) == trainer
    with pytest.raises(ResumeStateError, match=r"'optimizer\.json' is not a published resume file"):
        restore_resume_state(tmp_path, ["optimizer.json"], tmp_path)
