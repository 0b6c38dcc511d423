"""Datasets: records, presets, splits, loaders, cache."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from sqlenv.data import DataError, load_dataset
from sqlenv.data import presets as presets_module
from sqlenv.data.demo_databases import build_demo_databases
from sqlenv.data.records import ANSWER_TYPES, DIFFICULTIES
from sqlenv.sandbox.schema import catalog_for


@pytest.fixture()
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache directory and an empty in-process memo, so the test builds from scratch."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("SQLENV_CACHE_DIR", str(cache))
    monkeypatch.setattr(presets_module, "_LOADED", {})
    return cache


def test_demo_dataset_is_embedded_and_covers_every_type_and_level(demo_dataset) -> None:
    assert len(demo_dataset.databases) >= 3
    assert len(demo_dataset.records) >= 60
    assert {r.answer_type for r in demo_dataset.records} == set(ANSWER_TYPES)
    assert {r.difficulty for r in demo_dataset.records} == set(DIFFICULTIES)
    assert set(demo_dataset.split_names) == {"train", "eval"}
    for record in demo_dataset.records:
        tables = {t.casefold() for t in catalog_for(demo_dataset.db_path(record.db_id)).tables}
        assert set(record.tables_involved) <= tables, record.question_id


def test_demo_databases_are_built_deterministically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    digests = []
    for name in ("a", "b"):
        monkeypatch.setenv("SQLENV_CACHE_DIR", str(tmp_path / name))
        paths = build_demo_databases()
        digests.append({db: hashlib.sha256(p.read_bytes()).hexdigest() for db, p in paths.items()})
        assert all(str(p).startswith(str(tmp_path / name)) for p in paths.values())
    assert digests[0] == digests[1]


def test_records_carry_everything_the_spec_names(demo_dataset) -> None:
    record = demo_dataset.records[0]
    for field in (
        "question_id",
        "question",
        "db_id",
        "gold_sql",
        "gold_answer",
        "answer_type",
        "difficulty",
        "tables_involved",
        "order_sensitive",
        "split",
        "empty_gold",
    ):
        assert hasattr(record, field)
    conn = sqlite3.connect(demo_dataset.db_path(record.db_id))
    try:
        assert conn.execute(record.gold_sql).fetchall() == [tuple(r) for r in record.gold_answer]
    finally:
        conn.close()


def test_spider10_split_is_473_203_stratified_and_deterministic(spider10, spider_dir, private_cache) -> None:
    train, evaluation = spider10.split("train"), spider10.split("eval")
    assert (len(train), len(evaluation)) == (473, 203)
    assert len(spider10.databases) == 10
    assert not any(r.empty_gold for r in train), "empty-gold questions are excluded from train"
    # Stratified: every (database, difficulty) stratum of the non-empty questions is split ~30/70.
    strata = Counter((r.db_id, r.difficulty) for r in spider10.records if not r.empty_gold)
    eval_strata = Counter((r.db_id, r.difficulty) for r in evaluation if not r.empty_gold)
    share = (203 - sum(r.empty_gold for r in evaluation)) / sum(strata.values())
    for stratum, n in strata.items():
        assert abs(eval_strata[stratum] - n * share) <= 1, stratum
    rebuilt = load_dataset("spider10", spider_dir)  # private cache: built again from scratch
    assert [r.question_id for r in rebuilt.split("eval")] == [r.question_id for r in evaluation]


@pytest.mark.slow
def test_spider_preset_uses_spider_splits_and_counts_what_it_drops(spider_dir) -> None:
    spider = load_dataset("spider", spider_dir)
    summary = spider.summary()
    assert summary["splits"]["eval"] == 972  # dev questions on the 19 databases present
    assert not any(r.empty_gold for r in spider.split("train"))
    assert all(r.question_id.startswith("dev-") for r in spider.split("eval"))
    assert summary["dropped"]["database file missing"] == 62 + 82 + 14
    assert summary["dropped"]["gold SQL failed"] == 3
    n_train = (
        summary["splits"]["train"]
        + summary["splits"]["validation"]
        + summary["dropped"]["excluded from train (empty gold result)"]
    )
    assert n_train == 7000 - 82 - 14 - 3


@pytest.mark.slow
def test_spiders_validation_split_is_ten_train_databases_training_never_sees(spider_dir) -> None:
    from sqlenv.data.presets import SPIDER_VALIDATION_DATABASES

    spider = load_dataset("spider", spider_dir)
    databases = {split: {r.db_id for r in spider.split(split)} for split in ("train", "validation", "eval")}
    assert databases["validation"] == set(SPIDER_VALIDATION_DATABASES)
    assert not databases["validation"] & databases["train"]  # withheld whole, not question by question
    assert not databases["eval"] & (databases["train"] | databases["validation"])  # Spider's dev is apart
    validation = spider.split("validation")
    assert len(validation) == 552 and all(r.question_id.startswith("train-") for r in validation)
    assert {r.difficulty for r in validation} == {"easy", "medium", "hard", "extra"}
    # Its empty-gold questions stay, flagged (as in eval): a held-out set leaves them out itself.
    assert sum(r.empty_gold for r in validation) == 18
    # The choice is the first ten train databases by the SHA-256 of their names.
    import hashlib
    import json

    train_databases = {q["db_id"] for q in json.loads((spider_dir / "train_spider.json").read_text())}
    present = sorted((d for d in train_databases if d in spider.databases), key=lambda d: hashlib.sha256(d.encode()).hexdigest())
    assert tuple(present[:10]) == SPIDER_VALIDATION_DATABASES


def test_missing_spider_dir_names_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SQLENV_SPIDER_DIR", raising=False)
    monkeypatch.setattr(presets_module, "_LOADED", {})
    with pytest.raises(DataError) as info:
        load_dataset("spider10")
    assert "--spider-dir" in str(info.value) and "SQLENV_SPIDER_DIR" in str(info.value)


def _byo_folder(root: Path, questions: list[dict], jsonl: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(root / "shop.sqlite")
    conn.executescript(
        "CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, price REAL);"
        "INSERT INTO item VALUES (1,'pen',1.5),(2,'ink',3.25),(3,'pad',2.0);"
    )
    conn.commit()
    conn.close()
    if jsonl:
        (root / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in questions))
    else:
        (root / "questions.json").write_text(json.dumps(questions))
    return root


BYO_QUESTIONS = [
    {"db_id": "shop", "question": "How many items?", "query": "SELECT count(*) FROM item"},
    {
        "db_id": "shop",
        "question": "Most expensive item?",
        "query": "SELECT name FROM item ORDER BY price DESC LIMIT 1",
    },
    {"db_id": "shop", "question": "Average price?", "query": "SELECT avg(price) FROM item"},
    {"db_id": "shop", "question": "Names by price", "query": "SELECT name, price FROM item ORDER BY price"},
    {"db_id": "shop", "question": "Broken", "query": "SELECT nope FROM item"},
    {"db_id": "ghost", "question": "No database", "query": "SELECT 1"},
]


@pytest.mark.parametrize("jsonl", [True, False])
def test_bring_your_own_folder(tmp_path: Path, private_cache: Path, jsonl: bool) -> None:
    folder = _byo_folder(tmp_path / "byo", BYO_QUESTIONS, jsonl=jsonl)
    dataset = load_dataset(str(folder))
    assert len(dataset.records) == 4
    assert dataset.dropped == {"gold SQL failed": 1, "database file missing": 1}
    types = {r.question: r.answer_type for r in dataset.records}
    assert types == {
        "How many items?": "integer",
        "Most expensive item?": "string",
        "Average price?": "float",
        "Names by price": "table",
    }
    assert sum(len(dataset.split(s)) for s in dataset.split_names) == 4


def test_byo_question_file_errors_are_specific(tmp_path: Path, private_cache: Path) -> None:
    folder = _byo_folder(tmp_path / "bad", [{"db_id": "shop", "question": "q"}])
    with pytest.raises(DataError, match="lacks query"):
        load_dataset(str(folder))
    with pytest.raises(DataError, match="unknown dataset"):
        load_dataset(str(tmp_path / "does-not-exist"))


def test_gold_answers_are_cached_and_a_changed_input_rebuilds(
    tmp_path: Path, private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _byo_folder(tmp_path / "byo", BYO_QUESTIONS[:2])
    first = load_dataset(str(folder))
    cached_files = list((private_cache / "datasets").glob("*.json"))
    assert len(cached_files) == 1

    def no_building(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("gold answers were recomputed instead of read from the cache")

    monkeypatch.setattr(presets_module, "build_records", no_building)
    monkeypatch.setattr(presets_module, "_LOADED", {})
    again = load_dataset(str(folder))
    assert [r.to_json() for r in again.records] == [r.to_json() for r in first.records]

    monkeypatch.undo()
    monkeypatch.setenv("SQLENV_CACHE_DIR", str(private_cache))
    monkeypatch.setattr(presets_module, "_LOADED", {})
    (folder / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in BYO_QUESTIONS[:3]))
    os.utime(folder / "questions.jsonl", ns=(1, 1))
    changed = load_dataset(str(folder))
    assert len(changed.records) == 3
    assert len(list((private_cache / "datasets").glob("*.json"))) == 2


def test_unwritable_cache_falls_back_to_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    monkeypatch.setenv("SQLENV_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(presets_module, "_LOADED", {})
    with pytest.warns(RuntimeWarning, match="not writable"):
        dataset = load_dataset("demo")
    assert len(dataset.records) >= 60
