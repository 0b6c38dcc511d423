"""Faults of the on-disk dataset cache: damaged entries, concurrent builders, a full or read-only disk.

What must hold: a corrupt, truncated or other-version entry is rebuilt with a warning naming the
file and what was wrong, and the dataset equals one built from scratch (never a wrong gold
answer); two processes that want the same entry build and write it once and both get the right
dataset; a builder killed mid-write leaves no entry, no stuck lock and (after the next build) no
temp file; when the cache cannot be written the dataset is built in memory with a warning and
nothing half-written is left. Every case runs real files, real processes and real SQLite.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from sqlenv.data import QuestionRecord, load_dataset
from sqlenv.data import cache as cache_module
from sqlenv.data import presets as presets_module
from sqlenv.data.demo_databases import build_demo_databases

QUESTIONS = [
    {"db_id": "shop", "question": "How many items?", "query": "SELECT count(*) FROM item"},
    {
        "db_id": "shop",
        "question": "Dearest item?",
        "query": "SELECT name FROM item ORDER BY price DESC LIMIT 1",
    },
    {"db_id": "shop", "question": "Average price?", "query": "SELECT avg(price) FROM item"},
    {"db_id": "shop", "question": "Names by price", "query": "SELECT name, price FROM item ORDER BY price"},
    {"db_id": "shop", "question": "Over 100?", "query": "SELECT name FROM item WHERE price > 100"},
    {
        "db_id": "shop",
        "question": "Dearest over 100?",
        "query": "SELECT max(price) FROM item WHERE price > 100",
    },
]
PROCESS_WAIT_S = 300  # a generous bound on a child process, so a bug fails instead of hanging


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """A bring-your-own dataset folder: one SQLite database and its questions."""
    root = tmp_path / "byo"
    root.mkdir()
    conn = sqlite3.connect(root / "shop.sqlite")
    conn.executescript(
        "CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, price REAL);"
        "INSERT INTO item VALUES (1,'pen',1.5),(2,'ink',3.25),(3,'pad',2.0);"
    )
    conn.commit()
    conn.close()
    (root / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in QUESTIONS))
    return root


def _use_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point sqlenv (and child processes) at `cache`, with an empty in-process memo."""
    monkeypatch.setenv("SQLENV_CACHE_DIR", str(cache))
    monkeypatch.setattr(presets_module, "_LOADED", {})


def _content(dataset: Any) -> dict[str, Any]:
    return {"records": [r.to_json() for r in dataset.records], "dropped": dataset.dropped}


@pytest.fixture()
def from_scratch(folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The folder's dataset built in a cache of its own: what every faulty case must equal."""
    _use_cache(tmp_path / "scratch-cache", monkeypatch)
    return _content(load_dataset(str(folder)))


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, from_scratch: dict[str, Any]) -> Path:
    """The cache the test works on (the reference was built elsewhere first)."""
    root = tmp_path / "cache"
    _use_cache(root, monkeypatch)
    return root


def _entries(cache: Path) -> list[Path]:
    return sorted((cache / "datasets").glob("*.json"))


def _temps(cache: Path) -> list[Path]:
    return sorted((cache / "datasets").glob("*.tmp"))


@pytest.fixture()
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts gold-answer builds in this process (each appends the number of records built)."""
    counted: list[int] = []
    real = presets_module.build_records

    def counting(*args: Any, **kwargs: Any) -> Any:
        records, dropped = real(*args, **kwargs)
        counted.append(len(records))
        return records, dropped

    monkeypatch.setattr(presets_module, "build_records", counting)
    return counted


def _load_warned(folder: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[str]]:
    """Load the folder's dataset afresh (memo cleared); return it and its RuntimeWarnings."""
    monkeypatch.setattr(presets_module, "_LOADED", {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = load_dataset(str(folder))
    return dataset, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


# --- 1. damaged entries ------------------------------------------------------------------------


def _raw(transform: Callable[[bytes], bytes]) -> Callable[[Path, bytes, dict], None]:
    return lambda path, good, payload: path.write_bytes(transform(good))


def _payload(transform: Callable[[dict], Any]) -> Callable[[Path, bytes, dict], None]:
    """A damage behind a valid header (right format, size and checksum): only the shape is wrong."""
    return lambda path, good, payload: cache_module.write_entry(path, transform(payload))


def _header(**changes: Any) -> Callable[[bytes], bytes]:
    def rewrite(good: bytes) -> bytes:
        header, _, body = good.partition(b"\n")
        return json.dumps({**json.loads(header), **changes}).encode() + b"\n" + body

    return rewrite


def _record(i: int, **changes: Any) -> Callable[[dict], dict]:
    def rewrite(payload: dict) -> dict:
        records = [dict(r) for r in payload["records"]]
        records[i].update(changes)
        return {**payload, "records": records}

    return rewrite


def _renamed_field(payload: dict) -> dict:
    records = [dict(r) for r in payload["records"]]
    records[0]["answer"] = records[0].pop("gold_answer")
    return {**payload, "records": records}


def _flipped_gold_value(good: bytes) -> bytes:
    header, _, body = good.partition(b"\n")
    assert body.count(b"3.25") == 1  # ink's price, in the gold answer of "Names by price"
    return header + b"\n" + body.replace(b"3.25", b"3.75")


DAMAGE: dict[str, tuple[Callable[[Path, bytes, dict], None], str]] = {
    # what the file holds: (how to make it, what the warning must say)
    "garbage bytes": (_raw(lambda good: bytes(range(256)) * 16), "not a sqlenv cache entry"),
    "invalid JSON": (
        _raw(lambda good: b'{"format": "4", "size": 12,,}\n{"records": ['),
        "not a sqlenv cache entry",
    ),
    "an empty file": (_raw(lambda good: b""), "not a sqlenv cache entry"),
    "cut inside the header": (_raw(lambda good: good[:20]), "not a sqlenv cache entry"),
    "cut right after the header": (_raw(lambda good: good.partition(b"\n")[0]), "truncated (0 of"),
    "cut halfway": (_raw(lambda good: good[: len(good) // 2]), "truncated"),
    "extra bytes at the end": (_raw(lambda good: good + b" "), "its header says"),
    "a flipped gold value": (_raw(_flipped_gold_value), "do not match their sha256 checksum"),
    "another format version": (_raw(_header(format="3")), "cache format '3'"),
    "the pre-header format": (
        _raw(lambda good: good.partition(b"\n")[2]),  # sqlenv before format 4 wrote the bare payload
        "no format header",
    ),
    "a payload that is not an object": (_payload(lambda p: p["records"]), "does not hold a dataset"),
    "a payload with another key set": (_payload(lambda p: {**p, "version": 9}), "does not hold a dataset"),
    "inputs of another fingerprint": (_payload(lambda p: {**p, "fingerprint": "0" * 20}), "other inputs"),
    "records that are not a list": (_payload(lambda p: {**p, "records": {}}), "records of type dict"),
    "drop counts as text": (_payload(lambda p: {**p, "dropped": {"x": "1"}}), "drop counts"),
    "a record of another shape": (_payload(_renamed_field), "does not have the fields"),
    "a record with an extra field": (_payload(_record(0, hint="x")), "does not have the fields"),
    "columns as a string": (_payload(_record(3, gold_columns="name")), "gold_columns that is not a list"),
    "a number as text": (_payload(_record(0, question_id=7)), "question_id that is not a string"),
    "order as 1": (_payload(_record(3, order_sensitive=1)), "order_sensitive that is not true or false"),
    "a cell that is an object": (_payload(_record(0, gold_answer=[[{"n": 3}]])), "gold_answer"),
    "a boolean cell": (_payload(_record(0, gold_answer=[[True]])), "gold_answer"),
    "an unknown answer type": (_payload(_record(0, answer_type="date")), "answer_type that is not one of"),
    "ragged rows": (_payload(_record(3, gold_answer=[["pen"]])), "width is not its number of columns"),
    "an unknown database": (_payload(_record(0, db_id="ghost")), "names database 'ghost'"),
    "a repeated question": (
        _payload(lambda p: {**p, "records": p["records"] + p["records"][:1]}),
        "repeats question id",
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_entry_is_rebuilt_with_a_warning_and_never_read(
    damage: str,
    folder: Path,
    cache: Path,
    from_scratch: dict[str, Any],
    builds: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    load_dataset(str(folder))
    (entry,) = _entries(cache)
    good = entry.read_bytes()
    make, reason = DAMAGE[damage]
    make(entry, good, json.loads(good.partition(b"\n")[2]))
    assert entry.read_bytes() != good

    dataset, warned = _load_warned(folder, monkeypatch)
    assert _content(dataset) == from_scratch
    assert len(warned) == 1, warned
    assert str(entry) in warned[0] and reason in warned[0], warned[0]
    assert len(builds) == 2, "the damaged entry was not rebuilt"
    assert entry.read_bytes() == good, "the rebuilt entry is not what a fresh build writes"

    again, warned = _load_warned(folder, monkeypatch)  # the rebuilt entry is read, quietly
    assert _content(again) == from_scratch and warned == [] and len(builds) == 2


def test_record_checks_name_exactly_the_fields_of_a_record() -> None:
    # A field added to QuestionRecord must get a check, or every stored entry would be refused.
    assert set(presets_module._RECORD_FIELD_CHECKS) == {f.name for f in fields(QuestionRecord)}


# --- 2. two processes at once ------------------------------------------------------------------

# Loads the dataset in a child process, hooked so the parent can see what it does: every build and
# every write of the entry is appended to a file in the signals folder, and a build is held until
# every child has looked for the entry (and found none), so the children contend for the lock
# while one of them builds.
CONCURRENT_CHILD = r"""
import json, sys, time
from pathlib import Path
from sqlenv.data import load_dataset, presets

folder, signals, me, children, out = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
real_read, real_build, real_write = presets._read_cached, presets.build_records, presets.write_entry

def note(what):
    with open(signals / what, "a") as fh:
        fh.write(me + "\n")

def read(*args):
    found = real_read(*args)
    (signals / ("looked-" + me)).touch()
    return found

def build(*args):
    note("builds")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not all(
        (signals / ("looked-" + child)).exists() for child in children.split(",")
    ):
        time.sleep(0.01)
    return real_build(*args)

def write(*args):
    note("writes")
    return real_write(*args)

presets._read_cached, presets.build_records, presets.write_entry = read, build, write
dataset = load_dataset(folder)
Path(out).write_text(json.dumps({"records": [r.to_json() for r in dataset.records], "dropped": dataset.dropped}))
"""


def _finish(process: subprocess.Popen) -> None:
    output, _ = process.communicate(timeout=PROCESS_WAIT_S)
    assert process.returncode == 0, output


def test_an_entry_gets_the_mode_the_umask_gives_any_new_file(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Written through a temp file and a rename: the entry must not keep an owner-only temp mode.
    _use_cache(tmp_path / "cache", monkeypatch)
    load_dataset(folder)
    (entry,) = [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    plain = tmp_path / "plain"
    plain.write_text("")
    assert entry.stat().st_mode == plain.stat().st_mode
    for umask in (0o022, 0o077):
        previous = os.umask(umask)
        try:
            cache_module.write_bytes_atomic(tmp_path / f"umask-{umask:o}", b"data")
        finally:
            os.umask(previous)
        assert (tmp_path / f"umask-{umask:o}").stat().st_mode & 0o777 == 0o666 & ~umask
    assert not list(tmp_path.glob(".umask-*.tmp"))


def test_two_processes_build_the_same_entry_once(
    folder: Path, cache: Path, from_scratch: dict[str, Any], tmp_path: Path
) -> None:
    signals = tmp_path / "signals"
    signals.mkdir()
    children = ("a", "b")
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                CONCURRENT_CHILD,
                str(folder),
                str(signals),
                me,
                ",".join(children),
                str(tmp_path / me),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for me in children
    ]
    try:
        for process in processes:
            _finish(process)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()

    assert all((signals / f"looked-{me}").exists() for me in children)
    builders = (signals / "builds").read_text().split()
    assert len(builders) == 1, f"the entry was built by {builders}"
    assert (signals / "writes").read_text().split() == builders, "the entry was written more than once"
    expected = json.loads(json.dumps(from_scratch))  # as JSON: tuples become lists
    for me in children:
        assert json.loads((tmp_path / me).read_text()) == expected, me
    (entry,) = _entries(cache)
    assert {k: v for k, v in cache_module.read_entry(entry).items() if k != "fingerprint"} == expected
    assert _temps(cache) == []


# Loads the dataset and stalls halfway through writing the entry's temp file, telling the parent.
STALLED_WRITER = r"""
import os, sys, time
from pathlib import Path
from sqlenv.data import load_dataset

folder, signals = sys.argv[1], Path(sys.argv[2])
real_write = os.write

def stalls(fd, data):
    target = os.readlink(f"/proc/self/fd/{fd}")
    if "/datasets/." in target and target.endswith(".tmp"):
        real_write(fd, bytes(data[: len(data) // 2]))
        (signals / "half-written").touch()
        time.sleep(3600)
    return real_write(fd, data)

os.write = stalls
load_dataset(folder)
"""


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="finds the temp file through /proc/self/fd")
def test_a_builder_killed_mid_write_leaves_no_entry_and_no_stuck_lock(
    folder: Path,
    cache: Path,
    from_scratch: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    signals = tmp_path / "signals"
    signals.mkdir()
    writer = subprocess.Popen(
        [sys.executable, "-c", STALLED_WRITER, str(folder), str(signals)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + PROCESS_WAIT_S
        while (
            not (signals / "half-written").exists() and writer.poll() is None and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert (signals / "half-written").exists(), (
            writer.communicate()[0] if writer.poll() is not None else "stalled"
        )
        (lock,) = (cache / "datasets").glob("*.lock")
        with lock.open("a") as handle, pytest.raises(BlockingIOError):  # the builder holds it
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.communicate(timeout=PROCESS_WAIT_S)

    assert _entries(cache) == [], "a half-written entry is visible under its final name"
    (half,) = _temps(cache)
    assert half.stat().st_size > 0
    with lock.open("a") as handle:  # the kernel released the dead builder's flock
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    dataset, warned = _load_warned(folder, monkeypatch)
    assert _content(dataset) == from_scratch and warned == []
    assert len(_entries(cache)) == 1
    assert _temps(cache) == [], "the dead builder's temp file was left behind"


# --- 3. a cache that cannot be written ---------------------------------------------------------


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="finds the temp file through /proc/self/fd")
def test_a_full_disk_builds_in_memory_and_leaves_nothing_half_written(
    folder: Path,
    cache: Path,
    from_scratch: dict[str, Any],
    builds: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The disk fills partway through the entry's temp file: the kernel's short write, then ENOSPC.
    real_write = os.write
    partial: list[str] = []

    def fills_up(fd: int, data: Any) -> int:
        target = os.readlink(f"/proc/self/fd/{fd}")
        if not (target.startswith(str(cache / "datasets")) and target.endswith(".tmp")):
            return real_write(fd, data)
        if not partial:
            partial.append(target)
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", fills_up)
    dataset, warned = _load_warned(folder, monkeypatch)
    monkeypatch.setattr(os, "write", real_write)

    assert partial, "the write never reached the disk"
    assert _content(dataset) == from_scratch
    assert len(warned) == 1 and "could not write the dataset cache" in warned[0], warned
    assert "No space left on device" in warned[0] and str(cache / "datasets") in warned[0]
    assert _entries(cache) == [] and _temps(cache) == [], "a half-written file was left behind"

    # With space again, the next load writes the entry.
    again, warned = _load_warned(folder, monkeypatch)
    assert _content(again) == from_scratch and warned == [] and len(_entries(cache)) == 1
    assert len(builds) == 2


@pytest.fixture()
def read_only_subfolders(cache: Path) -> Iterator[Path]:
    """The cache root writable (it passes the probe), its datasets and demo-db folders read-only."""
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders, so chmod cannot make them read-only here")
    folders = [cache / "datasets", cache / "demo-db"]
    for path in folders:
        path.mkdir(parents=True)
        path.chmod(0o500)
    yield cache
    for path in folders:
        path.chmod(0o700)


def test_read_only_cache_folders_build_in_memory(
    read_only_subfolders: Path,
    folder: Path,
    from_scratch: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = read_only_subfolders
    dataset, warned = _load_warned(folder, monkeypatch)
    assert _content(dataset) == from_scratch
    assert len(warned) == 1 and "could not write the dataset cache" in warned[0], warned
    assert "Permission denied" in warned[0]
    assert list((cache / "datasets").iterdir()) == []


def test_read_only_demo_folder_builds_the_demo_elsewhere(
    read_only_subfolders: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    with pytest.warns(RuntimeWarning, match="could not write the demo databases") as caught:
        paths = build_demo_databases()
    assert "Permission denied" in str(caught[0].message)
    assert all(str(p).startswith(str(tmp_path / "tmp")) for p in paths.values())
    assert list((read_only_subfolders / "demo-db").iterdir()) == []


def _digests(paths: dict[str, Path]) -> dict[str, str]:
    return {db: hashlib.sha256(p.read_bytes()).hexdigest() for db, p in paths.items()}


def test_a_full_disk_builds_the_demo_databases_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SQLENV_CACHE_DIR", str(tmp_path / "reference"))
    reference = _digests(build_demo_databases())
    cache = tmp_path / "cache"
    monkeypatch.setenv("SQLENV_CACHE_DIR", str(cache))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()

    # SQLite's own disk-full error (SQLITE_FULL) for files under the cache: a page limit of 1.
    real_connect = sqlite3.connect

    def fills_up(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real_connect(database, *args, **kwargs)
        if str(database).startswith(str(cache)):
            conn.execute("PRAGMA max_page_count = 1")
        return conn

    monkeypatch.setattr(sqlite3, "connect", fills_up)
    with pytest.warns(RuntimeWarning, match="could not write the demo databases") as caught:
        paths = build_demo_databases()
    monkeypatch.setattr(sqlite3, "connect", real_connect)

    assert "database or disk is full" in str(caught[0].message)
    assert all(str(p).startswith(str(tmp_path / "tmp")) for p in paths.values())
    assert _digests(paths) == reference
    assert list(cache.glob("demo-db/*/*/*.tmp")) == [] and list(cache.glob("demo-db/*/*/*.sqlite")) == []


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_demo_database_is_rebuilt_with_a_warning(
    damage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SQLENV_CACHE_DIR", str(tmp_path / "cache"))
    paths = build_demo_databases()
    reference = _digests(paths)
    victim = sorted(paths.values())[0]
    data = victim.read_bytes()
    victim.write_bytes(bytes(range(256)) * 16 if damage == "garbage" else data[: len(data) // 2])

    with pytest.warns(RuntimeWarning, match="does not match the sha256") as caught:
        rebuilt = build_demo_databases()
    assert len(caught) == 1 and str(victim) in str(caught[0].message)
    assert rebuilt == paths and _digests(rebuilt) == reference
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build_demo_databases()  # the rebuilt file passes quietly
