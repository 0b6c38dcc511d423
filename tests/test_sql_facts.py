"""Tests for sqlenv.data.sql_facts: spec examples plus agreement with Spider."""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from sqlenv.data.sql_facts import SQLFacts, analyze_sql

REPO_ROOT = Path(__file__).resolve().parents[1]


def _spider_dir() -> Path:
    env = os.environ.get("SQLENV_SPIDER_DIR")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "spider"


@cache
def _load_split(name: str) -> list[dict[str, Any]]:
    path = _spider_dir() / name
    if not path.is_file():
        reason = f"Spider data not found at {path} (set SQLENV_SPIDER_DIR to the Spider directory)"
        if os.environ.get("SQLENV_REQUIRE_SPIDER"):
            pytest.fail(reason + " — SQLENV_REQUIRE_SPIDER is set, so Spider tests may not skip")
        pytest.skip(reason)
    with path.open(encoding="utf-8") as f:
        return json.load(f)


# --- reference: Spider's eval_hardness ------------------------------------------
# Port of count_component1 / count_component2 / count_others / Evaluator.eval_hardness
# from evaluation.py of Spider (https://github.com/taoyds/spider; Yu et al., EMNLP 2018;
# code under Apache-2.0). It works on Spider's parsed `sql` dict, quirks included:
# `has_agg` reads the first field of a unit, so for WHERE cond_units it tests `not_op`
# and for the raw HAVING list it also counts every 'and'/'or' string.

_WHERE_OP_LIKE = 9  # WHERE_OPS.index("like")


def _ref_has_agg(unit: Any) -> bool:
    return unit[0] != 0  # AGG_OPS.index("none") == 0


def _ref_count_agg(units: list[Any]) -> int:
    return len([unit for unit in units if _ref_has_agg(unit)])


def _ref_count_component1(sql: dict[str, Any]) -> int:
    count = 0
    if len(sql["where"]) > 0:
        count += 1
    if len(sql["groupBy"]) > 0:
        count += 1
    if len(sql["orderBy"]) > 0:
        count += 1
    if sql["limit"] is not None:
        count += 1
    if len(sql["from"]["table_units"]) > 0:  # JOIN
        count += len(sql["from"]["table_units"]) - 1
    ao = sql["from"]["conds"][1::2] + sql["where"][1::2] + sql["having"][1::2]
    count += len([token for token in ao if token == "or"])
    cond_units = sql["from"]["conds"][::2] + sql["where"][::2] + sql["having"][::2]
    count += len([c for c in cond_units if c[1] == _WHERE_OP_LIKE])
    return count


def _ref_count_component2(sql: dict[str, Any]) -> int:
    nested = []
    for cond_unit in sql["from"]["conds"][::2] + sql["where"][::2] + sql["having"][::2]:
        if type(cond_unit[3]) is dict:
            nested.append(cond_unit[3])
        if type(cond_unit[4]) is dict:
            nested.append(cond_unit[4])
    for op in ("intersect", "except", "union"):
        if sql[op] is not None:
            nested.append(sql[op])
    return len(nested)


def _ref_count_others(sql: dict[str, Any]) -> int:
    count = 0
    agg_count = _ref_count_agg(sql["select"][1])
    agg_count += _ref_count_agg(sql["where"][::2])
    agg_count += _ref_count_agg(sql["groupBy"])
    if len(sql["orderBy"]) > 0:
        agg_count += _ref_count_agg(
            [unit[1] for unit in sql["orderBy"][1] if unit[1]]
            + [unit[2] for unit in sql["orderBy"][1] if unit[2]]
        )
    agg_count += _ref_count_agg(sql["having"])
    if agg_count > 1:
        count += 1
    if len(sql["select"][1]) > 1:
        count += 1
    if len(sql["where"]) > 1:
        count += 1
    if len(sql["groupBy"]) > 1:
        count += 1
    return count


def _spider_eval_hardness(sql: dict[str, Any]) -> str:
    comp1 = _ref_count_component1(sql)
    comp2 = _ref_count_component2(sql)
    others = _ref_count_others(sql)
    if comp1 <= 1 and others == 0 and comp2 == 0:
        return "easy"
    elif (others <= 2 and comp1 <= 1 and comp2 == 0) or (comp1 <= 2 and others < 2 and comp2 == 0):
        return "medium"
    elif (
        (others > 2 and comp1 <= 2 and comp2 == 0)
        or (2 < comp1 <= 3 and others <= 2 and comp2 == 0)
        or (comp1 <= 1 and others == 0 and comp2 <= 1)
    ):
        return "hard"
    else:
        return "extra"


# --- Spider agreement -------------------------------------------------------------


def test_reference_port_level_counts_on_dev() -> None:
    # Published Spider dev distribution: 248 easy, 446 medium, 174 hard, 166 extra.
    levels = [_spider_eval_hardness(ex["sql"]) for ex in _load_split("dev.json")]
    counts = {level: levels.count(level) for level in ("easy", "medium", "hard", "extra")}
    assert counts == {"easy": 248, "medium": 446, "hard": 174, "extra": 166}


def test_difficulty_agrees_with_spider_on_dev() -> None:
    dev = _load_split("dev.json")
    disagreements = [
        (ex["query"], analyze_sql(ex["query"]).difficulty, _spider_eval_hardness(ex["sql"]))
        for ex in dev
        if analyze_sql(ex["query"]).difficulty != _spider_eval_hardness(ex["sql"])
    ]
    agreement = 1 - len(disagreements) / len(dev)
    # Measured (sqlglot 30.x): 1034/1034 agree (100%); the three component counts
    # also match Spider's on every dev query.
    assert agreement >= 0.999, f"{len(disagreements)}/{len(dev)} disagree: {disagreements[:5]}"


def _ref_tables(sql: dict[str, Any], names: list[str], out: set[str]) -> set[str]:
    """Tables in Spider's parsed `sql`, including FROM subqueries, nested and set-op SQL."""
    for kind, unit in sql["from"]["table_units"]:
        if kind == "table_unit":
            out.add(names[unit].lower())
        else:
            _ref_tables(unit, names, out)
    for cond_unit in sql["from"]["conds"][::2] + sql["where"][::2] + sql["having"][::2]:
        for val in cond_unit[3:5]:
            if isinstance(val, dict):
                _ref_tables(val, names, out)
    for op in ("intersect", "union", "except"):
        if sql[op] is not None:
            _ref_tables(sql[op], names, out)
    return out


def test_tables_and_order_agree_with_spider_parse_on_dev() -> None:
    dev = _load_split("dev.json")
    schemas = {db["db_id"]: db for db in _load_split("tables.json")}
    table_mismatches, order_mismatches = [], []
    for ex in dev:
        facts = analyze_sql(ex["query"])
        names = schemas[ex["db_id"]]["table_names_original"]
        if facts.tables_involved != tuple(sorted(_ref_tables(ex["sql"], names, set()))):
            table_mismatches.append(ex["query"])
        # Spider hangs a set operation's ORDER BY on its last branch.
        last = ex["sql"]
        while nxt := last["intersect"] or last["union"] or last["except"]:
            last = nxt
        if facts.order_sensitive != bool(last["orderBy"]):
            order_mismatches.append(ex["query"])
    # Measured: no mismatches on either fact.
    assert not table_mismatches, f"{len(table_mismatches)} table mismatches: {table_mismatches[:5]}"
    assert not order_mismatches, f"{len(order_mismatches)} order mismatches: {order_mismatches[:5]}"


def _parse_failures(split: list[dict[str, Any]]) -> list[str]:
    failures = []
    for ex in split:
        try:
            analyze_sql(ex["query"])
        except ValueError:
            failures.append(ex["query"])
    return failures


def test_parses_all_dev_queries() -> None:
    # Measured: 1034/1034 parse.
    failures = _parse_failures(_load_split("dev.json"))
    assert not failures, f"{len(failures)} dev queries failed to parse: {failures[:5]}"


def test_parses_train_queries() -> None:
    train = _load_split("train_spider.json")
    failures = _parse_failures(train)
    # Measured (sqlglot 30.x): 7000/7000 parse.
    assert len(failures) / len(train) <= 0.001, f"{len(failures)}/{len(train)} failed: {failures[:5]}"


# --- tables_involved ----------------------------------------------------------------


def test_tables_join_with_aliases() -> None:
    facts = analyze_sql(
        "SELECT T1.name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id"
    )
    assert facts.tables_involved == ("singer", "singer_in_concert")


def test_tables_in_subqueries() -> None:
    facts = analyze_sql(
        "SELECT name FROM stadium WHERE stadium_id NOT IN (SELECT stadium_id FROM concert) "
        "AND capacity > (SELECT avg(capacity) FROM (SELECT capacity FROM arena) AS a)"
    )
    assert facts.tables_involved == ("arena", "concert", "stadium")


def test_tables_cte_name_excluded() -> None:
    facts = analyze_sql(
        "WITH big AS (SELECT * FROM Orders WHERE total > 100), "
        "top AS (SELECT customer_id FROM big) "
        "SELECT c.name FROM customers AS c JOIN top ON top.customer_id = c.id"
    )
    assert facts.tables_involved == ("customers", "orders")


def test_tables_set_operations_and_case() -> None:
    facts = analyze_sql(
        "SELECT name FROM Singer INTERSECT SELECT name FROM SINGER_IN_CONCERT "
        'UNION select Name from singer EXCEPT SELECT name FROM "Concert"'
    )
    assert facts.tables_involved == ("concert", "singer", "singer_in_concert")


# --- order_sensitive --------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT name FROM singer ORDER BY age DESC", True),
        ("SELECT name FROM singer ORDER BY age LIMIT 3", True),
        ("SELECT name FROM singer", False),
        ("SELECT name FROM (SELECT name FROM singer ORDER BY age)", False),
        ("SELECT name FROM singer WHERE age > (SELECT age FROM singer ORDER BY age LIMIT 1)", False),
        ("WITH s AS (SELECT name FROM singer ORDER BY age) SELECT name FROM s", False),
        ("SELECT name FROM singer UNION SELECT name FROM actor ORDER BY name", True),
        ("SELECT name FROM singer UNION SELECT name FROM actor", False),
    ],
)
def test_order_sensitive(sql: str, expected: bool) -> None:
    assert analyze_sql(sql).order_sensitive is expected


# --- difficulty -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT count(*) FROM singer", "easy"),
        ("SELECT name FROM singer WHERE age > 30", "easy"),
        ("SELECT name, country FROM singer WHERE age > 30", "medium"),
        ("SELECT country, count(*) FROM singer GROUP BY country", "medium"),
        (
            "SELECT T2.name, count(*) FROM concert AS T1 JOIN stadium AS T2 "
            "ON T1.stadium_id = T2.stadium_id GROUP BY T1.stadium_id",
            "medium",
        ),
        # one set operation on otherwise easy parts: hard
        ("SELECT name FROM singer INTERSECT SELECT name FROM actor", "hard"),
        # nesting plus any extra component: extra
        ("SELECT name FROM singer WHERE age > 30 INTERSECT SELECT name FROM actor", "hard"),
        ("SELECT name, age FROM singer INTERSECT SELECT name, age FROM actor", "extra"),
        ("SELECT name FROM stadium WHERE stadium_id NOT IN (SELECT stadium_id FROM concert)", "hard"),
        (
            "SELECT name FROM stadium WHERE capacity > 5000 "
            "AND stadium_id NOT IN (SELECT stadium_id FROM concert)",
            "extra",
        ),
        # WHERE + ORDER BY + LIKE: three component-1 items
        ("SELECT name FROM singer WHERE country LIKE '%a%' ORDER BY age DESC", "hard"),
        # ... and a fourth (LIMIT) plus a second WHERE condition
        (
            "SELECT name FROM singer WHERE age > 20 AND country LIKE '%a%' ORDER BY age DESC LIMIT 3",
            "extra",
        ),
    ],
)
def test_difficulty_examples(sql: str, expected: str) -> None:
    assert analyze_sql(sql).difficulty == expected


# --- errors and result type -------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT FROM WHERE (",
        "this is not sql at all",
        "",
        "DROP TABLE x",
        "INSERT INTO t VALUES (1)",
        "SELECT 1; SELECT 2",
        "SELECT * FROM t; DROP TABLE t",
    ],
)
def test_rejects_invalid_or_non_select(sql: str) -> None:
    with pytest.raises(ValueError):
        analyze_sql(sql)


def test_trailing_semicolon_ok_and_frozen() -> None:
    facts = analyze_sql("SELECT count(*) FROM singer;")
    assert facts == SQLFacts(difficulty="easy", tables_involved=("singer",), order_sensitive=False)
    with pytest.raises(AttributeError):
        facts.difficulty = "hard"  # type: ignore[misc]
