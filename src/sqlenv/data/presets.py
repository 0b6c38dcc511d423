"""Named datasets and `load_dataset`: `demo` (embedded), `spider10` (the ten classic databases,
473 train / 203 eval), `spider` (Spider train -> train, dev -> eval), or a bring-your-own folder.

A dataset is built once (gold answers computed through the sandbox) and cached on disk under a
key of its inputs; later loads read the cache. Within a process, loads are memoised.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from sqlenv.data.build import build_records
from sqlenv.data.cache import input_fingerprint, read_json, writable_cache_dir, write_json_atomic
from sqlenv.data.dataset import Dataset
from sqlenv.data.demo_databases import build_demo_databases, demo_questions_path
from sqlenv.data.loaders import (
    DataError,
    RawQuestion,
    byo_databases,
    byo_question_file,
    read_question_file,
    resolve_spider_dir,
    spider_databases,
)
from sqlenv.data.records import QuestionRecord
from sqlenv.data.splits import stratified_eval_ids

PRESETS: tuple[str, ...] = ("demo", "spider10", "spider")
SPIDER10_DATABASES: tuple[str, ...] = (
    "student_assessment",
    "concert_singer",
    "world_1",
    "car_1",
    "employee_hire_evaluation",
    "pets_1",
    "cre_Doc_Template_Mgt",
    "dog_kennels",
    "flight_2",
    "poker_player",
)
SPIDER10_EVAL_SIZE = 203
DEFAULT_EVAL_FRACTION = 0.3

_LOADED: dict[tuple[str, str | None], Dataset] = {}
_LOAD_LOCK = threading.Lock()


def _stratified(n_eval: int):
    def assign(records: Sequence[QuestionRecord]) -> dict[str, str | None]:
        eval_ids = stratified_eval_ids(
            records,
            n_eval if n_eval >= 0 else round(DEFAULT_EVAL_FRACTION * len(records)),
            item_id=lambda r: r.question_id,
            stratum=lambda r: (r.db_id, r.difficulty),
            force_eval=lambda r: r.empty_gold,
        )
        return {r.question_id: ("eval" if r.question_id in eval_ids else "train") for r in records}

    return assign


def _by_source_split(records: Sequence[QuestionRecord], raw: Sequence[RawQuestion]) -> dict[str, str | None]:
    """Keep the input's own split; empty-gold questions are left out of train."""
    source = {q.question_id: q.source_split for q in raw}
    out: dict[str, str | None] = {}
    for r in records:
        split = source[r.question_id]
        out[r.question_id] = None if (split == "train" and r.empty_gold) else split
    return out


def load_dataset(name: str, spider_dir: str | Path | None = None, *, rebuild: bool = False) -> Dataset:
    """A preset (`demo`, `spider10`, `spider`) or a bring-your-own folder path, built or cached."""
    key = (name, str(spider_dir) if spider_dir else None)
    with _LOAD_LOCK:
        if not rebuild and key in _LOADED:
            return _LOADED[key]
        dataset = _load_uncached(name, spider_dir, rebuild)
        _LOADED[key] = dataset
        return dataset


def _load_uncached(name: str, spider_dir: str | Path | None, rebuild: bool) -> Dataset:
    if name == "demo":
        databases = build_demo_databases()
        qfile = demo_questions_path()
        raw = read_question_file(qfile, id_prefix="demo")
        return _cached_build(name, databases, [qfile], raw, _stratified(-1), rebuild)
    if name in ("spider10", "spider"):
        root = resolve_spider_dir(spider_dir)
        databases = spider_databases(root)
        train_file, dev_file = root / "train_spider.json", root / "dev.json"
        raw = [replace_split(q, "train") for q in read_question_file(train_file, id_prefix="train")]
        raw += [replace_split(q, "eval") for q in read_question_file(dev_file, id_prefix="dev")]
        if name == "spider10":
            databases = {k: v for k, v in databases.items() if k in SPIDER10_DATABASES}
            missing = sorted(set(SPIDER10_DATABASES) - set(databases))
            if missing:
                raise DataError(f"spider10 needs databases missing from {root}: {', '.join(missing)}")
            raw = [q for q in raw if q.db_id in SPIDER10_DATABASES]
            return _cached_build(
                name, databases, [train_file, dev_file], raw, _stratified(SPIDER10_EVAL_SIZE), rebuild
            )
        return _cached_build(
            name, databases, [train_file, dev_file], raw, lambda recs: _by_source_split(recs, raw), rebuild
        )
    folder = Path(name).expanduser()
    if folder.is_dir():
        databases = byo_databases(folder)
        if not databases:
            raise DataError(f"{folder}: no .sqlite/.db files found")
        qfile = byo_question_file(folder)
        raw = read_question_file(qfile)
        if all(q.source_split for q in raw):
            assigner = lambda recs: _by_source_split(recs, raw)  # noqa: E731
        else:
            assigner = _stratified(-1)
        return _cached_build(f"byo:{folder.resolve()}", databases, [qfile], raw, assigner, rebuild)
    raise DataError(f"unknown dataset {name!r}: use one of {', '.join(PRESETS)} or a folder of .sqlite files")


def replace_split(q: RawQuestion, split: str) -> RawQuestion:
    return RawQuestion(q.question_id, q.db_id, q.question, q.sql, split)


def _cached_build(
    name: str,
    databases: dict[str, Path],
    question_files: list[Path],
    raw: list[RawQuestion],
    assign,
    rebuild: bool,
) -> Dataset:
    fingerprint = input_fingerprint(name, sorted(databases), files=[*question_files, *databases.values()])
    root = writable_cache_dir()
    safe_name = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[-60:]
    cache_file = root / "datasets" / f"{safe_name}-{fingerprint}.json" if root is not None else None
    if cache_file is not None and not rebuild:
        cached = read_json(cache_file)
        if isinstance(cached, dict) and cached.get("fingerprint") == fingerprint:
            records = tuple(QuestionRecord.from_json(r) for r in cached["records"])
            return Dataset(name, databases, records, dict(cached.get("dropped", {})))
    records, dropped = build_records(raw, databases, assign)
    if cache_file is not None:
        write_json_atomic(
            cache_file,
            {"fingerprint": fingerprint, "records": [r.to_json() for r in records], "dropped": dropped},
        )
    return Dataset(name, databases, tuple(records), dropped)
