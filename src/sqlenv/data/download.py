"""Fetching and installing public text-to-SQL datasets (currently Spider 1.0).

This module owns one job: turn a release-archive URL into a finished dataset
directory on disk, safely. It

* accepts only ``https://`` URLs (plain ``http://`` is allowed to loopback
  hosts only, which the tests use), also for every redirect it follows;
* streams the archive to a temporary file next to the destination, hashing it
  with SHA-256 as it goes, and refuses it unless the digest matches a pinned
  or caller-supplied checksum;
* extracts the zip into a temporary directory next to the destination,
  refusing absolute paths, drive letters, ``..`` components, symlinks, and
  archives over a member-count or total-size cap (zip bombs);
* finds the Spider root (the directory holding ``database/`` and ``dev.json``)
  and moves it into place with a single ``os.replace``, so a failed run never
  leaves a half-written destination, and cleans up every temporary file.

Every failure raises :class:`DownloadError` with a specific message. Only the
standard library is used.
"""

from __future__ import annotations

import hashlib
import http.client
import ipaddress
import os
import re
import shutil
import stat
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = [
    "DEFAULT_MAX_MEMBERS",
    "DEFAULT_MAX_TOTAL_BYTES",
    "SOURCES",
    "ArchiveSource",
    "DownloadError",
    "download_dataset",
]

#: Cap on the sum of the uncompressed member sizes (and on the download itself).
DEFAULT_MAX_TOTAL_BYTES = 5 * 1024**3
#: Cap on the number of members in the archive (the Spider archive has ~2,600).
DEFAULT_MAX_MEMBERS = 100_000

_CHUNK_SIZE = 256 * 1024
_USER_AGENT = "sqlenv-dataset-downloader/1"
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_DRIVE_RE = re.compile(r"^[A-Za-z]:")
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})
# macOS resource-fork metadata that some archivers add; never part of a dataset.
_SKIPPED_TOP_LEVEL = "__MACOSX"


class DownloadError(Exception):
    """Any failure while downloading, verifying, extracting or installing a dataset."""


@dataclass(frozen=True)
class ArchiveSource:
    """Where a dataset's release archive lives and what it must hash to."""

    name: str
    url: str
    sha256: str | None
    size_hint: int | None


# Spider 1.0 (Yu et al., EMNLP 2018), CC BY-SA 4.0, from https://yale-lily.github.io/spider.
#
# URL: the Spider page's "Spider Dataset" button points at the Google Drive file
# 1403EGqzIDoHMdQF4c9Bkyl7dZLZ5Wt6J (spider_data.zip, file dated 2024-09-12; the page
# earlier linked the older archives 1_AckYkinAnhqmRQtGsQgUKAnTHxxX5J0 and
# 1iRDVHLr4mX2wQKSgA9J8Pire73Jahh0m). drive.usercontent.google.com with confirm=t is
# that same file's direct-download endpoint, which skips Drive's "can't scan this file
# for viruses" interstitial that drive.google.com/uc serves for files this large.
#
# Checksum: the Spider authors publish no checksum. The value below is the SHA-256 of
# that archive (205,800,266 bytes) as independently recorded by many unrelated public
# projects that downloaded it (both from the Drive file above and from the Hugging Face
# re-host HAL-9001/spider-databases, which carries the byte-identical archive). If the
# authors ever re-upload the archive, this pin fails loudly; pass --sha256 (and/or
# --url to a mirror) after checking the new archive yourself.
SOURCES: dict[str, ArchiveSource] = {
    "spider": ArchiveSource(
        name="spider",
        url=(
            "https://drive.usercontent.google.com/download"
            "?id=1403EGqzIDoHMdQF4c9Bkyl7dZLZ5Wt6J&export=download&confirm=t"
        ),
        sha256="00636695dabed6b5f4b8328a16b13e069a2f16591d5efcce57660669c85b121b",
        size_hint=205_800_266,
    ),
}


# --------------------------------------------------------------------------- URLs


def _check_url(url: str) -> None:
    """Refuse anything but https, or http to a loopback host."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
    except ValueError as exc:
        raise DownloadError(f"refusing malformed URL {url!r}: {exc}") from exc
    scheme = parts.scheme.lower()
    if not host:
        raise DownloadError(f"refusing URL without a host: {url!r}")
    if scheme == "https":
        return
    if scheme == "http" and _is_loopback(host):
        return
    raise DownloadError(
        f"refusing to download from {url!r}: only https:// URLs are allowed "
        "(plain http:// only to a loopback host such as 127.0.0.1)"
    )


def _is_loopback(host: str) -> bool:
    host = host.lower().rstrip(".")
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _CheckedRedirectHandler(urllib.request.HTTPRedirectHandler):
    """Apply the same URL policy to every redirect target (no https -> http downgrade)."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        _check_url(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _build_opener() -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(_CheckedRedirectHandler())


# ---------------------------------------------------------------------- checksums


def _normalise_sha256(value: str, what: str) -> str:
    digest = value.strip().lower()
    if not _SHA256_RE.fullmatch(digest):
        raise DownloadError(f"{what} {value!r} is not a SHA-256 hex digest (64 hex characters)")
    return digest


# ---------------------------------------------------------------------- download


def _looks_like_html(first_chunk: bytes) -> bool:
    head = first_chunk[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html"))


def _html_error(url: str) -> DownloadError:
    return DownloadError(
        f"the host returned a web page instead of the archive for {url!r} "
        "(Google Drive does this for quota limits, sign-in or virus-scan confirmation pages); "
        "download the archive by hand or pass --url pointing to a direct mirror of the archive"
    )


def _fetch(
    url: str,
    out_path: Path,
    *,
    timeout_s: float,
    progress: Callable[[int, int | None], None] | None,
    max_bytes: int,
) -> str:
    """Stream ``url`` into ``out_path``; return the hex SHA-256 of what was written."""
    request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
    hasher = hashlib.sha256()
    try:
        with _build_opener().open(request, timeout=timeout_s) as response:
            content_type = (response.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if content_type == "text/html":
                raise _html_error(url)
            length_header = response.headers.get("Content-Length")
            total: int | None = None
            if length_header is not None and length_header.strip().isdigit():
                total = int(length_header.strip())
            if total is not None and total > max_bytes:
                raise DownloadError(f"{url!r} announces {total} bytes, over the {max_bytes}-byte limit")
            received = 0
            with open(out_path, "wb") as out:
                while True:
                    chunk = response.read(_CHUNK_SIZE)
                    if not chunk:
                        break
                    if received == 0 and _looks_like_html(chunk):
                        raise _html_error(url)
                    received += len(chunk)
                    if received > max_bytes:
                        raise DownloadError(f"download from {url!r} exceeded the {max_bytes}-byte limit")
                    hasher.update(chunk)
                    out.write(chunk)
                    if progress is not None:
                        progress(received, total)
            if total is not None and received != total:
                raise DownloadError(f"download from {url!r} was truncated: got {received} of {total} bytes")
    except DownloadError:
        raise
    except urllib.error.HTTPError as exc:
        exc.close()
        raise DownloadError(f"HTTP {exc.code} {exc.reason} while downloading {url!r}") from exc
    except urllib.error.URLError as exc:
        raise DownloadError(f"could not download {url!r}: {exc.reason}") from exc
    except TimeoutError as exc:
        raise DownloadError(f"timed out after {timeout_s:g} s while downloading {url!r}") from exc
    except (OSError, http.client.HTTPException) as exc:
        raise DownloadError(f"download from {url!r} failed: {exc!r}") from exc
    return hasher.hexdigest()


# ---------------------------------------------------------------------- extraction


def _member_parts(name: str) -> tuple[str, ...]:
    """Split a zip member name into safe path components, or raise DownloadError."""
    if "\x00" in name:
        raise DownloadError(f"refusing archive member with a NUL byte in its name: {name!r}")
    normalised = name.replace("\\", "/")
    if normalised.startswith("/"):
        raise DownloadError(f"refusing archive member with an absolute path: {name!r}")
    if _DRIVE_RE.match(normalised):
        raise DownloadError(f"refusing archive member with a drive letter: {name!r}")
    parts = tuple(part for part in normalised.split("/") if part not in ("", "."))
    if ".." in parts:
        raise DownloadError(f"refusing archive member with a '..' component: {name!r}")
    return parts


def _is_symlink(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def _extract(archive: Path, target: Path, *, max_total_bytes: int, max_members: int) -> None:
    """Validate every member of ``archive`` first, then extract it into ``target``."""
    target_resolved = target.resolve()
    try:
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
            if len(infos) > max_members:
                raise DownloadError(f"archive has {len(infos)} members, over the limit of {max_members}")
            plan: list[tuple[zipfile.ZipInfo, tuple[str, ...]]] = []
            declared = 0
            for info in infos:
                parts = _member_parts(info.filename)
                if _is_symlink(info):
                    raise DownloadError(f"refusing symlink archive member: {info.filename!r}")
                if info.flag_bits & 0x1:
                    raise DownloadError(f"refusing encrypted archive member: {info.filename!r}")
                declared += info.file_size
                if declared > max_total_bytes:
                    raise DownloadError(
                        f"archive expands to more than {max_total_bytes} bytes (zip bomb guard)"
                    )
                if parts and parts[0] != _SKIPPED_TOP_LEVEL:
                    plan.append((info, parts))

            written = 0
            for info, parts in plan:
                path = target.joinpath(*parts)
                if not path.resolve().is_relative_to(target_resolved):
                    raise DownloadError(
                        f"refusing archive member that escapes the extraction directory: {info.filename!r}"
                    )
                if info.is_dir():
                    path.mkdir(parents=True, exist_ok=True)
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(path, "wb") as dst:
                    while True:
                        chunk = src.read(_CHUNK_SIZE)
                        if not chunk:
                            break
                        written += len(chunk)
                        if written > max_total_bytes:
                            raise DownloadError(
                                f"archive expands to more than {max_total_bytes} bytes (zip bomb guard)"
                            )
                        dst.write(chunk)
    except DownloadError:
        raise
    except zipfile.BadZipFile as exc:
        raise DownloadError(f"the downloaded file is not a valid zip archive: {exc}") from exc
    except (OSError, EOFError, RuntimeError, NotImplementedError, zlib.error) as exc:
        raise DownloadError(f"could not extract the archive: {exc!r}") from exc


def _find_spider_root(base: Path) -> Path:
    """Return the shallowest directory under ``base`` holding ``database/`` and ``dev.json``."""
    candidates: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != _SKIPPED_TOP_LEVEL)
        if "dev.json" in filenames and "database" in dirnames:
            candidates.append(Path(dirpath))
    if not candidates:
        found = _describe_tree(base)
        raise DownloadError(
            "the archive does not contain a Spider dataset (no directory holding both "
            f"'database/' and 'dev.json'); found: {found}"
        )
    depth = min(len(c.relative_to(base).parts) for c in candidates)
    shallowest = [c for c in candidates if len(c.relative_to(base).parts) == depth]
    if len(shallowest) > 1:
        names = ", ".join(repr(c.relative_to(base).as_posix()) for c in shallowest)
        raise DownloadError(f"the archive holds several Spider roots, cannot choose: {names}")
    return shallowest[0]


def _describe_tree(base: Path, *, limit: int = 20) -> str:
    entries: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base):
        rel = Path(dirpath).relative_to(base)
        if len(rel.parts) >= 2:
            dirnames[:] = []
        dirnames.sort()
        entries.extend((rel / d).as_posix() + "/" for d in dirnames)
        entries.extend((rel / f).as_posix() for f in sorted(filenames))
        if len(entries) > limit:
            break
    if not entries:
        return "(nothing)"
    shown = ", ".join(entries[:limit])
    return shown + (", ..." if len(entries) > limit else "")


# ---------------------------------------------------------------------- install


def _dest_state(dest: Path) -> str:
    """'absent', 'empty' (an empty directory) or 'occupied'."""
    if dest.is_symlink():
        return "occupied"
    if not dest.exists():
        return "absent"
    if dest.is_dir() and not any(dest.iterdir()):
        return "empty"
    return "occupied"


def _occupied_error(dest: Path) -> DownloadError:
    return DownloadError(f"destination {str(dest)!r} already exists and is not empty; pass overwrite=True")


def _install(root: Path, dest: Path, *, overwrite: bool) -> None:
    """Move ``root`` to ``dest`` with os.replace (both lie on the same filesystem)."""
    state = _dest_state(dest)
    if state == "occupied" and not overwrite:
        raise _occupied_error(dest)
    if state == "empty":
        try:
            dest.rmdir()
        except OSError as exc:
            raise DownloadError(f"could not replace the empty directory {str(dest)!r}: {exc}") from exc
        try:
            os.replace(root, dest)
        except OSError as exc:
            dest.mkdir(exist_ok=True)
            raise DownloadError(f"could not move the dataset into {str(dest)!r}: {exc}") from exc
        return
    if state == "absent":
        try:
            os.replace(root, dest)
        except OSError as exc:
            raise DownloadError(f"could not move the dataset into {str(dest)!r}: {exc}") from exc
        return

    # Occupied and overwrite=True: move the old tree aside (same filesystem), swap the new
    # one in, and only then delete the old one; on failure put the old one back.
    try:
        aside_dir = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".old", dir=dest.parent))
    except OSError as exc:
        raise DownloadError(f"cannot create a temporary directory next to {str(dest)!r}: {exc}") from exc
    aside = aside_dir / "previous"
    try:
        os.replace(dest, aside)
    except OSError as exc:
        shutil.rmtree(aside_dir, ignore_errors=True)
        raise DownloadError(f"could not move the existing {str(dest)!r} aside: {exc}") from exc
    try:
        os.replace(root, dest)
    except OSError as exc:
        try:
            os.replace(aside, dest)
        except OSError as restore_exc:
            raise DownloadError(
                f"could not move the dataset into {str(dest)!r} ({exc}) nor restore its previous "
                f"contents ({restore_exc}); they are kept at {str(aside)!r}"
            ) from exc
        shutil.rmtree(aside_dir, ignore_errors=True)
        raise DownloadError(f"could not move the dataset into {str(dest)!r}: {exc}") from exc
    shutil.rmtree(aside_dir, ignore_errors=True)


# ---------------------------------------------------------------------- public API


def download_dataset(
    name: str,
    dest: Path,
    *,
    url: str | None = None,
    sha256: str | None = None,
    timeout_s: float = 60.0,
    progress: Callable[[int, int | None], None] | None = None,
    overwrite: bool = False,
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
    max_members: int = DEFAULT_MAX_MEMBERS,
) -> Path:
    """Download dataset ``name``'s release archive and install it at ``dest``.

    ``url`` overrides the source's pinned URL (e.g. a mirror); ``sha256`` overrides its
    pinned checksum. One of the two checksums must be known. ``progress`` is called as
    ``progress(bytes_so_far, total_or_None)`` after each chunk. ``dest`` must be absent
    or an empty directory unless ``overwrite`` is true; the old contents are replaced only
    once the new dataset is fully extracted. Returns ``dest``.
    """
    source = SOURCES.get(name)
    if source is None:
        known = ", ".join(sorted(SOURCES))
        raise DownloadError(f"unknown dataset {name!r}; known datasets: {known}")

    archive_url = url if url is not None else source.url
    _check_url(archive_url)

    if sha256 is not None:
        expected = _normalise_sha256(sha256, "the given sha256")
    elif source.sha256 is not None:
        expected = _normalise_sha256(source.sha256, f"the pinned sha256 of {name!r}")
    else:
        raise DownloadError(
            f"no checksum is known for the {name!r} archive; verify the archive yourself and "
            "pass its SHA-256 with --sha256"
        )
    if max_total_bytes <= 0 or max_members <= 0:
        raise DownloadError("max_total_bytes and max_members must be positive")

    dest = Path(os.path.abspath(Path(dest).expanduser()))
    if not overwrite and _dest_state(dest) == "occupied":
        raise _occupied_error(dest)
    parent = dest.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DownloadError(f"cannot create the directory {str(parent)!r}: {exc}") from exc

    prefix = f".{dest.name}."
    archive_path: Path | None = None
    workdir: Path | None = None
    try:
        try:
            fd, archive_name = tempfile.mkstemp(prefix=prefix, suffix=".zip.part", dir=parent)
            os.close(fd)
            archive_path = Path(archive_name)
            workdir = Path(tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=parent))
        except OSError as exc:
            raise DownloadError(f"cannot create temporary files in {str(parent)!r}: {exc}") from exc

        actual = _fetch(
            archive_url,
            archive_path,
            timeout_s=timeout_s,
            progress=progress,
            max_bytes=max_total_bytes,
        )
        if actual != expected:
            raise DownloadError(
                f"checksum mismatch for {archive_url!r}: expected sha256 {expected}, got {actual}"
            )

        extract_dir = workdir / "extract"
        extract_dir.mkdir()
        _extract(archive_path, extract_dir, max_total_bytes=max_total_bytes, max_members=max_members)
        archive_path.unlink()
        archive_path = None

        root = _find_spider_root(extract_dir)
        _install(root, dest, overwrite=overwrite)
        return dest
    finally:
        if archive_path is not None:
            archive_path.unlink(missing_ok=True)
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
