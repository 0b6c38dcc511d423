"""What identifies a model's weights: a fingerprint of a local model directory's weight files.

A local model is named by its path, and a path is not an identity: training again into the same
output folder (`runs/x/grpo/final`) gives new weights under the same name. An episode journal
(`sqlenv.evaluation.journal`) records the fingerprint, so a run with other weights is refused instead of
continuing the old model's episodes. Presets and hub ids return None: their name stands for
fixed weights.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
_CHUNK = 1 << 20

# (path, [(file name, size, mtime_ns)]) -> fingerprint: a second call on unchanged files is free.
_MEMO: dict[tuple[str, tuple[tuple[str, int, int], ...]], str] = {}


def weights_fingerprint(model: str | Path) -> str | None:
    """`sha256:<16 hex>` over the names and contents of the weight files of a local model
    directory; None when `model` is not a directory (a preset or a hub id)."""
    folder = Path(model).expanduser()
    if not folder.is_dir():
        return None
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))
    stats = tuple((p.name, st.st_size, st.st_mtime_ns) for p in files for st in (p.stat(),))
    key = (str(folder.resolve()), stats)
    if key not in _MEMO:
        digest = hashlib.sha256()
        for path in files:
            digest.update(path.name.encode() + b"\0")
            with path.open("rb") as handle:
                while chunk := handle.read(_CHUNK):
                    digest.update(chunk)
        _MEMO[key] = "sha256:" + digest.hexdigest()[:16]
    return _MEMO[key]
