"""Tests for sqlenv.data.download against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import http.server
import itertools
import json
import os
import sqlite3
import stat
import threading
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from sqlenv.data import download
from sqlenv.data.download import ArchiveSource, DownloadError, download_dataset

# --------------------------------------------------------------------------- server


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Static files from the served directory, plus two special paths."""

    def do_GET(self) -> None:
        if self.path.startswith("/redirect-insecure"):
            self.send_response(302)
            self.send_header("Location", "http://example.invalid/spider.zip")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.startswith("/drive-page"):
            body = b"<!DOCTYPE html><html><body>Google Drive can't scan this file</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


@dataclass
class Server:
    root: Path
    base_url: str

    def publish(self, archive: Path) -> tuple[str, str]:
        """Copy ``archive`` into the served directory; return (url, sha256)."""
        data = archive.read_bytes()
        (self.root / archive.name).write_bytes(data)
        return f"{self.base_url}/{archive.name}", hashlib.sha256(data).hexdigest()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    root = tmp_path / "served"
    root.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_Handler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        host, port = httpd.server_address[:2]
        yield Server(root=root, base_url=f"http://{host}:{port}")
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """The parent directory the dataset is installed into (must end up with only dest)."""
    path = tmp_path / "data"
    path.mkdir()
    return path


# -------------------------------------------------------------------------- archives


def _toy_sqlite_bytes(tmp_path: Path) -> bytes:
    db = tmp_path / "toy-build.sqlite"
    db.unlink(missing_ok=True)
    con = sqlite3.connect(db)
    try:
        con.execute("CREATE TABLE singer (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
        con.executemany("INSERT INTO singer (name) VALUES (?)", [("Ann",), ("Bo",)])
        con.commit()
    finally:
        con.close()
    data = db.read_bytes()
    db.unlink()
    return data


def _spider_members(tmp_path: Path, top: str = "spider_data/") -> dict[str, bytes]:
    dev = [{"db_id": "toy", "question": "How many singers?", "query": "SELECT count(*) FROM singer"}]
    tables = [{"db_id": "toy", "table_names_original": ["singer"]}]
    return {
        f"{top}database/toy/toy.sqlite": _toy_sqlite_bytes(tmp_path),
        f"{top}dev.json": json.dumps(dev).encode(),
        f"{top}train_spider.json": json.dumps([]).encode(),
        f"{top}tables.json": json.dumps(tables).encode(),
    }


def _make_zip(
    path: Path,
    members: dict[str, bytes],
    *,
    symlinks: dict[str, str] | None = None,
) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.create_system = 3  # Unix, so external_attr carries st_mode
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return path


def _assert_only(parent: Path, *names: str) -> None:
    assert sorted(p.name for p in parent.iterdir()) == sorted(names)


# ----------------------------------------------------------------------------- cases


def test_success_installs_spider_layout(tmp_path: Path, server: Server, data_dir: Path) -> None:
    url, digest = server.publish(_make_zip(tmp_path / "spider.zip", _spider_members(tmp_path)))
    dest = data_dir / "spider"

    result = download_dataset("spider", dest, url=url, sha256=digest)

    assert result == dest
    assert (dest / "database" / "toy" / "toy.sqlite").is_file()
    assert json.loads((dest / "dev.json").read_text())[0]["db_id"] == "toy"
    assert (dest / "train_spider.json").is_file()
    assert (dest / "tables.json").is_file()
    con = sqlite3.connect(f"file:{dest / 'database' / 'toy' / 'toy.sqlite'}?mode=ro", uri=True)
    try:
        assert con.execute("SELECT count(*) FROM singer").fetchone() == (2,)
    finally:
        con.close()
    _assert_only(data_dir, "spider")


def test_archive_with_root_at_top_level(tmp_path: Path, server: Server, data_dir: Path) -> None:
    url, digest = server.publish(_make_zip(tmp_path / "flat.zip", _spider_members(tmp_path, top="")))
    dest = data_dir / "spider"
    download_dataset("spider", dest, url=url, sha256=digest)
    assert (dest / "database" / "toy" / "toy.sqlite").is_file()
    _assert_only(data_dir, "spider")


def test_macosx_metadata_is_not_extracted(tmp_path: Path, server: Server, data_dir: Path) -> None:
    members = _spider_members(tmp_path)
    members["__MACOSX/spider_data/._dev.json"] = b"\x00\x05\x16\x07"
    url, digest = server.publish(_make_zip(tmp_path / "mac.zip", members))
    dest = data_dir / "spider"
    download_dataset("spider", dest, url=url, sha256=digest)
    _assert_only(data_dir, "spider")
    assert not (dest / "__MACOSX").exists()


def test_checksum_mismatch(tmp_path: Path, server: Server, data_dir: Path) -> None:
    url, actual = server.publish(_make_zip(tmp_path / "spider.zip", _spider_members(tmp_path)))
    expected = "0" * 64
    dest = data_dir / "spider"

    with pytest.raises(DownloadError) as err:
        download_dataset("spider", dest, url=url, sha256=expected)

    assert expected in str(err.value)
    assert actual in str(err.value)
    assert not dest.exists()
    _assert_only(data_dir)


def test_pinned_checksum_applies_to_a_mirror_url(tmp_path: Path, server: Server, data_dir: Path) -> None:
    url, actual = server.publish(_make_zip(tmp_path / "spider.zip", _spider_members(tmp_path)))
    with pytest.raises(DownloadError) as err:
        download_dataset("spider", data_dir / "spider", url=url)
    assert download.SOURCES["spider"].sha256 in str(err.value)
    assert actual in str(err.value)
    _assert_only(data_dir)


def test_no_checksum_known(
    tmp_path: Path, server: Server, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = server.publish(_make_zip(tmp_path / "spider.zip", _spider_members(tmp_path)))
    monkeypatch.setitem(download.SOURCES, "nosum", ArchiveSource("nosum", url, None, None))
    with pytest.raises(DownloadError, match="--sha256"):
        download_dataset("nosum", data_dir / "spider")
    _assert_only(data_dir)


def test_malformed_checksum_argument(data_dir: Path) -> None:
    with pytest.raises(DownloadError, match="SHA-256"):
        download_dataset("spider", data_dir / "spider", url="http://127.0.0.1:9/x.zip", sha256="abc")


@pytest.mark.parametrize(
    "bad_member",
    ["../evil.txt", "/abs.txt", "spider_data/../../evil.txt", "C:/evil.txt", "spider_data\\..\\..\\evil.txt"],
)
def test_unsafe_member_paths(tmp_path: Path, server: Server, data_dir: Path, bad_member: str) -> None:
    abs_existed = Path("/abs.txt").exists()
    members = _spider_members(tmp_path)
    members[bad_member] = b"pwned"
    archive = _make_zip(tmp_path / "unsafe.zip", members)
    with zipfile.ZipFile(archive) as zf:  # zipfile keeps these names verbatim
        assert bad_member in zf.namelist()
    url, digest = server.publish(archive)
    dest = data_dir / "spider"

    with pytest.raises(DownloadError, match="refusing archive member"):
        download_dataset("spider", dest, url=url, sha256=digest)

    assert not dest.exists()
    _assert_only(data_dir)
    assert not (tmp_path / "evil.txt").exists()
    assert not (data_dir.parent.parent / "evil.txt").exists()
    assert Path("/abs.txt").exists() == abs_existed


def test_symlink_member_refused(tmp_path: Path, server: Server, data_dir: Path) -> None:
    archive = _make_zip(
        tmp_path / "link.zip",
        _spider_members(tmp_path),
        symlinks={"spider_data/database/escape": "/etc"},
    )
    url, digest = server.publish(archive)
    dest = data_dir / "spider"

    with pytest.raises(DownloadError, match="symlink"):
        download_dataset("spider", dest, url=url, sha256=digest)

    assert not dest.exists()
    _assert_only(data_dir)


def test_zip_bomb_guards(tmp_path: Path, server: Server, data_dir: Path) -> None:
    members = _spider_members(tmp_path)
    members["spider_data/zeros.bin"] = b"\x00" * 2_000_000  # compresses to a few KB
    url, digest = server.publish(_make_zip(tmp_path / "bomb.zip", members))
    dest = data_dir / "spider"

    with pytest.raises(DownloadError, match="zip bomb"):
        download_dataset("spider", dest, url=url, sha256=digest, max_total_bytes=1_000_000)
    _assert_only(data_dir)

    with pytest.raises(DownloadError, match="members"):
        download_dataset("spider", dest, url=url, sha256=digest, max_members=3)
    _assert_only(data_dir)


def test_archive_without_spider_root(tmp_path: Path, server: Server, data_dir: Path) -> None:
    members = {"stuff/readme.txt": b"hello", "stuff/dev.json": b"[]", "other/database/x.sqlite": b""}
    url, digest = server.publish(_make_zip(tmp_path / "nospider.zip", members))
    dest = data_dir / "spider"

    with pytest.raises(DownloadError, match="Spider") as err:
        download_dataset("spider", dest, url=url, sha256=digest)

    assert "stuff/" in str(err.value)
    assert "other/" in str(err.value)
    assert not dest.exists()
    _assert_only(data_dir)


def test_not_a_zip(tmp_path: Path, server: Server, data_dir: Path) -> None:
    bogus = tmp_path / "bogus.zip"
    bogus.write_bytes(b"this is not a zip archive")
    url, digest = server.publish(bogus)
    with pytest.raises(DownloadError, match="zip"):
        download_dataset("spider", data_dir / "spider", url=url, sha256=digest)
    _assert_only(data_dir)


@pytest.mark.parametrize(
    "bad_url",
    [
        "http://example.com/x.zip",
        "ftp://example.com/x.zip",
        "file:///etc/passwd",
        "http://10.0.0.1/x.zip",
        "HTTP://example.com/x.zip",
        "https:///no-host.zip",
        "data:application/zip;base64,UEsFBgAAAAAAAAAAAAAAAAAAAAAAAA==",
    ],
)
def test_insecure_urls_refused_without_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad_url: str
) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(urllib.request.OpenerDirector, "open", no_network)
    monkeypatch.setattr("socket.create_connection", no_network)
    dest = tmp_path / "not-created" / "spider"

    with pytest.raises(DownloadError) as err:
        download_dataset("spider", dest, url=bad_url, sha256="0" * 64)

    assert bad_url in str(err.value)
    assert not dest.parent.exists()


def test_redirect_to_insecure_url_refused(server: Server, data_dir: Path) -> None:
    with pytest.raises(DownloadError, match=r"example\.invalid"):
        download_dataset(
            "spider", data_dir / "spider", url=f"{server.base_url}/redirect-insecure", sha256="0" * 64
        )
    _assert_only(data_dir)


def test_html_page_instead_of_archive(server: Server, data_dir: Path) -> None:
    with pytest.raises(DownloadError, match="web page") as err:
        download_dataset("spider", data_dir / "spider", url=f"{server.base_url}/drive-page", sha256="0" * 64)
    assert "--url" in str(err.value)
    _assert_only(data_dir)


def test_existing_destination(tmp_path: Path, server: Server, data_dir: Path) -> None:
    url, digest = server.publish(_make_zip(tmp_path / "spider.zip", _spider_members(tmp_path)))
    dest = data_dir / "spider"
    dest.mkdir()
    (dest / "old.txt").write_text("keep me")

    with pytest.raises(DownloadError, match="overwrite"):
        download_dataset("spider", dest, url=url, sha256=digest)
    assert (dest / "old.txt").read_text() == "keep me"
    _assert_only(data_dir, "spider")

    # A failing overwrite leaves the old tree alone.
    with pytest.raises(DownloadError, match="checksum"):
        download_dataset("spider", dest, url=url, sha256="f" * 64, overwrite=True)
    assert (dest / "old.txt").read_text() == "keep me"
    _assert_only(data_dir, "spider")

    download_dataset("spider", dest, url=url, sha256=digest, overwrite=True)
    assert not (dest / "old.txt").exists()
    assert (dest / "database" / "toy" / "toy.sqlite").is_file()
    _assert_only(data_dir, "spider")


def test_existing_file_destination_needs_overwrite(tmp_path: Path, server: Server, data_dir: Path) -> None:
    url, digest = server.publish(_make_zip(tmp_path / "spider.zip", _spider_members(tmp_path)))
    dest = data_dir / "spider"
    dest.write_text("a file")
    with pytest.raises(DownloadError, match="overwrite"):
        download_dataset("spider", dest, url=url, sha256=digest)
    download_dataset("spider", dest, url=url, sha256=digest, overwrite=True)
    assert (dest / "dev.json").is_file()
    _assert_only(data_dir, "spider")


def test_empty_destination_directory_is_fine(tmp_path: Path, server: Server, data_dir: Path) -> None:
    url, digest = server.publish(_make_zip(tmp_path / "spider.zip", _spider_members(tmp_path)))
    dest = data_dir / "spider"
    dest.mkdir()
    download_dataset("spider", dest, url=url, sha256=digest)
    assert (dest / "dev.json").is_file()
    _assert_only(data_dir, "spider")


def test_http_404(server: Server, data_dir: Path) -> None:
    with pytest.raises(DownloadError, match="404"):
        download_dataset("spider", data_dir / "spider", url=f"{server.base_url}/missing.zip", sha256="0" * 64)
    _assert_only(data_dir)


def test_progress_reports_increasing_counts(tmp_path: Path, server: Server, data_dir: Path) -> None:
    members = _spider_members(tmp_path)
    members["spider_data/noise.bin"] = os.urandom(1_200_000)  # incompressible: several chunks
    archive = _make_zip(tmp_path / "spider.zip", members)
    url, digest = server.publish(archive)
    calls: list[tuple[int, int | None]] = []

    download_dataset(
        "spider", data_dir / "spider", url=url, sha256=digest, progress=lambda n, t: calls.append((n, t))
    )

    size = archive.stat().st_size
    counts = [n for n, _ in calls]
    assert len(counts) > 1
    assert all(a < b for a, b in itertools.pairwise(counts))
    assert counts[-1] == size
    assert {t for _, t in calls} == {size}


def test_unknown_dataset_name(data_dir: Path) -> None:
    with pytest.raises(DownloadError, match="spider"):
        download_dataset("nope", data_dir / "x")


def test_pinned_spider_source_is_well_formed() -> None:
    source = download.SOURCES["spider"]
    assert source.name == "spider"
    assert source.url.startswith("https://")
    assert source.sha256 is None or len(source.sha256) == 64
    assert source.size_hint is None or source.size_hint > 0


def test_cli_download_then_use_the_dataset(
    tmp_path: Path, server: Server, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sqlenv data download` installs an archive that `--spider-dir` then serves end to end."""
    from typer.testing import CliRunner

    from sqlenv.cli import app
    from sqlenv.data import presets

    monkeypatch.setenv("SQLENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(presets, "_LOADED", {})
    url, digest = server.publish(_make_zip(tmp_path / "spider.zip", _spider_members(tmp_path)))
    dest = data_dir / "spider"
    runner = CliRunner()
    result = runner.invoke(
        app, ["data", "download", "spider", "--dest", str(dest), "--url", url, "--sha256", digest]
    )
    assert result.exit_code == 0, result.output
    assert "installed spider" in result.output
    info = runner.invoke(app, ["data", "info", "--dataset", "spider", "--spider-dir", str(dest), "--json"])
    assert info.exit_code == 0, info.output
    assert json.loads(info.output)["splits"] == {"eval": 1}
    bad = runner.invoke(
        app, ["data", "download", "spider", "--dest", str(dest), "--url", url, "--sha256", "0" * 64]
    )
    assert bad.exit_code == 2 and "error" in bad.output
