"""Named datasets and `load_dataset`: `demo` (embedded), `spider10` (the ten classic databases,
473 train / 203 eval), `spider` (Spider train -> train and validation, dev -> eval), or a
bring-your-own folder.

The `spider` preset follows Spider's own protocol: models train on Spider's train databases and
are measured on its dev databases, which share none. A recipe is tuned on `validation`: every
train question of ten train databases (`SPIDER_VALIDATION_DATABASES`) that training never sees,
so that dev is played only by checkpoints chosen before it.

A dataset is built once (gold answers computed through the sandbox) and cached on disk under a
key of its inputs; later loads read the cache. Within a process, loads are memoised.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from sqlenv.data.build import build_records
from sqlenv.data.cache import (
    CacheEntryError,
    entry_lock,
    input_fingerprint,
    read_entry,
    writable_cache_dir,
    write_entry,
)
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
from sqlenv.data.records import ANSWER_TYPES, QuestionRecord
from sqlenv.data.splits import stratified_eval_ids

# Each preset and what it serves, in one phrase (a Hugging Face Space's card names it).
PRESET_DESCRIPTIONS: dict[str, str] = {
    "demo": "the demo set embedded in the package",
    "spider10": "spider10, a subset of Spider 1.0",
    "spider": "Spider 1.0 (its train databases for train and validation, its dev databases for eval)",
}
PRESETS: tuple[str, ...] = tuple(PRESET_DESCRIPTIONS)
# The presets built from Spider 1.0, which is downloaded (`sqlenv data download spider`), never shipped.
SPIDER_PRESETS: frozenset[str] = frozenset({"spider10", "spider"})
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
# Spider train databases withheld from the `spider` preset's train split as its `validation` split:
# the first ten of the 140 in the order of the SHA-256 of their names (a choice no one tuned), 552
# of Spider's 7,000 train questions, every difficulty among them.
SPIDER_VALIDATION_DATABASES: tuple[str, ...] = (
    "ship_1",
    "match_season",
    "icfp_1",
    "csu_1",
    "machine_repair",
    "customers_card_transactions",
    "election_representative",
    "student_assessment",
    "store_1",
    "customers_campaigns_ecommerce",
)
VALIDATION_SPLIT = "validation"
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


def _by_source_split(
    records: Sequence[QuestionRecord], raw: Sequence[RawQuestion], validation_databases: Sequence[str] = ()
) -> dict[str, str | None]:
    """Keep the input's own split; empty-gold questions are left out of train; train questions on
    `validation_databases` form the validation split (empty-gold ones kept there, flagged, as in
    eval)."""
    source = {q.question_id: q.source_split for q in raw}
    withheld = set(validation_databases)
    out: dict[str, str | None] = {}
    for r in records:
        split = source[r.question_id]
        if split == "train" and r.db_id in withheld:
            split = VALIDATION_SPLIT
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
            name,
            databases,
            [train_file, dev_file],
            raw,
            lambda recs: _by_source_split(recs, raw, SPIDER_VALIDATION_DATABASES),
            rebuild,
            # The splits are stored in the cache entry: the withheld databases are part of its key.
            key_parts=(VALIDATION_SPLIT, SPIDER_VALIDATION_DATABASES),
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
    key_parts: tuple[object, ...] = (),
) -> Dataset:
    """The dataset from its cache entry, or built (gold answers computed) and stored there.

    A cache entry that cannot be trusted (corrupt, truncated, another version, wrong shape) is
    rebuilt with a warning naming it. Processes that want the same entry at once build it once:
    the others wait on its lock and read what the first wrote. When the entry cannot be written
    (disk full, read-only), the dataset is returned from memory with a warning.
    """
    fingerprint = input_fingerprint(
        name, sorted(databases), *key_parts, files=[*question_files, *databases.values()]
    )
    root = writable_cache_dir()
    if root is None:
        records, dropped = build_records(raw, databases, assign)
        return Dataset(name, databases, tuple(records), dropped)
    safe_name = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[-60:]
    cache_file = root / "datasets" / f"{safe_name}-{fingerprint}.json"
    if not rebuild:
        # No lock for the common case, an entry that is already there: writes are atomic, so an
        # unlocked read sees a whole file or none. A bad entry is reported by whoever rebuilds it.
        cached, _ = _read_cached(cache_file, name, fingerprint, databases)
        if cached is not None:
            return cached
    with entry_lock(cache_file):
        dataset = None
        if not rebuild:
            # Another process may have built the entry while this one waited for the lock.
            dataset, problem = _read_cached(cache_file, name, fingerprint, databases)
            if problem is not None:
                warnings.warn(
                    f"sqlenv dataset cache {cache_file} {problem}; rebuilding it from the source files",
                    RuntimeWarning,
                    stacklevel=4,
                )
        if dataset is None:
            dataset = _build_and_store(cache_file, name, fingerprint, databases, raw, assign)
    return dataset


def _build_and_store(
    cache_file: Path,
    name: str,
    fingerprint: str,
    databases: dict[str, Path],
    raw: list[RawQuestion],
    assign,
) -> Dataset:
    """Build the dataset and write its cache entry; a failed write only costs a warning."""
    records, dropped = build_records(raw, databases, assign)
    payload = {"fingerprint": fingerprint, "records": [r.to_json() for r in records], "dropped": dropped}
    try:
        write_entry(cache_file, payload)
    except OSError as exc:
        warnings.warn(
            f"sqlenv could not write the dataset cache {cache_file} ({exc}); the dataset is kept in "
            "memory and will be built again next time. Free space in, or fix the permissions of, "
            "that folder, or set SQLENV_CACHE_DIR.",
            RuntimeWarning,
            stacklevel=5,
        )
    return Dataset(name, databases, tuple(records), dropped)


def _read_cached(
    cache_file: Path, name: str, fingerprint: str, databases: dict[str, Path]
) -> tuple[Dataset | None, str | None]:
    """(the dataset stored in the entry, None), (None, None) without an entry, or (None, what is
    wrong with it)."""
    try:
        payload = read_entry(cache_file)
        if payload is None:
            return None, None
        records, dropped = _validated_payload(payload, fingerprint, databases)
    except CacheEntryError as exc:
        return None, str(exc)
    return Dataset(name, databases, records, dropped), None


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _is_str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


# Exact types, as `json.loads` makes them: a bool (a subclass of int) is not a cell.
_CELL_TYPES = frozenset({int, float, str, type(None)})


def _is_rows(value: object) -> bool:
    return type(value) is list and all(
        type(row) is list and _CELL_TYPES.issuperset(map(type, row)) for row in value
    )


# What each field of a stored `QuestionRecord.to_json()` must be; the keys are exactly the record's
# fields (a test keeps them in step). `from_json` converts without checking, so a stored value of
# the wrong type would otherwise become a wrong record (a string of columns becomes its letters).
_RECORD_FIELD_CHECKS: dict[str, tuple[Callable[[object], bool], str]] = {
    "question_id": (_is_str, "a string"),
    "question": (_is_str, "a string"),
    "db_id": (_is_str, "a string"),
    "gold_sql": (_is_str, "a string"),
    "gold_answer": (_is_rows, "a list of rows of numbers, strings or nulls"),
    "gold_columns": (_is_str_list, "a list of strings"),
    "answer_type": (lambda v: isinstance(v, str) and v in ANSWER_TYPES, f"one of {', '.join(ANSWER_TYPES)}"),
    "difficulty": (_is_str, "a string"),
    "tables_involved": (_is_str_list, "a list of strings"),
    "order_sensitive": (lambda v: isinstance(v, bool), "true or false"),
    "split": (_is_str, "a string"),
}


def _validated_payload(
    payload: object, fingerprint: str, databases: dict[str, Path]
) -> tuple[tuple[QuestionRecord, ...], dict[str, int]]:
    """The records and drop counts of a dataset entry, or CacheEntryError naming the first thing
    that does not match what `_build_and_store` writes."""
    if not isinstance(payload, dict) or set(payload) != {"fingerprint", "records", "dropped"}:
        keys = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        raise CacheEntryError(f"does not hold a dataset of this sqlenv version (found {keys})")
    if payload["fingerprint"] != fingerprint:
        raise CacheEntryError(
            f"belongs to other inputs (fingerprint {payload['fingerprint']!r}, expected {fingerprint!r})"
        )
    stored, dropped = payload["records"], payload["dropped"]
    if not isinstance(stored, list):
        raise CacheEntryError(f"has records of type {type(stored).__name__}, expected a list")
    if not (
        isinstance(dropped, dict)
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in dropped.values())
    ):
        raise CacheEntryError("has drop counts that are not a mapping of reasons to counts")
    records: list[QuestionRecord] = []
    seen: set[str] = set()
    for i, data in enumerate(stored):
        if not isinstance(data, dict) or data.keys() != _RECORD_FIELD_CHECKS.keys():
            found = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise CacheEntryError(
                f"record {i} does not have the fields of this sqlenv's records (found {found})"
            )
        for field, (check, expected) in _RECORD_FIELD_CHECKS.items():
            if not check(data[field]):
                raise CacheEntryError(f"record {i} has a {field} that is not {expected}: {data[field]!r:.80}")
        if not {len(row) for row in data["gold_answer"]} <= {len(data["gold_columns"])}:
            raise CacheEntryError(f"record {i} has gold rows whose width is not its number of columns")
        if data["db_id"] not in databases:
            raise CacheEntryError(f"record {i} names database {data['db_id']!r}, which this dataset lacks")
        if data["question_id"] in seen:
            raise CacheEntryError(f"record {i} repeats question id {data['question_id']!r}")
        seen.add(data["question_id"])
        records.append(QuestionRecord.from_json(data))
    return tuple(records), dict(dropped)
