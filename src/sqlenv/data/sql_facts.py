"""Facts derived from a gold SQL query: Spider hardness, tables touched, ordering.

This module owns the static analysis of gold SQL strings (parsed with sqlglot,
dialect ``sqlite``). It does not touch databases.

``difficulty`` follows Spider's official hardness classification
(``Evaluator.eval_hardness`` in ``evaluation.py`` of taoyds/spider, Yu et al.,
Apache-2.0), re-implemented over sqlglot's tree instead of Spider's own parse.
Spider's counting quirks are kept on purpose so the levels match the
published ones, e.g.:

* only the first SELECT of a set operation is inspected, plus one for the
  INTERSECT/UNION/EXCEPT itself; ORDER BY/LIMIT after a set operation belong
  to its last branch in Spider's parse, so they are not counted;
* a subquery in FROM is a table unit (it only adds to the join count), while
  a subquery used as a value in ON/WHERE/HAVING counts as nesting;
* Spider's "aggregation" count also counts negated WHERE conditions
  (``NOT IN``, ``NOT LIKE``, ...) and every AND/OR connector plus negated
  condition in HAVING, because its ``has_agg`` reads the first field of those
  tuples;
* a comparison with a column as its value swallows the OR-joined conditions
  after it (a bug of Spider's parser that shaped the official labels).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

__all__ = ["Difficulty", "SQLFacts", "analyze_sql"]

Difficulty = Literal["easy", "medium", "hard", "extra"]

# Spider's AGG_OPS (besides 'none').
_AGG_TYPES: tuple[type[exp.Expression], ...] = (exp.Max, exp.Min, exp.Count, exp.Sum, exp.Avg)
# Spelled out rather than exp.SetOperation, which older sqlglot lacks.
_SET_OPS: tuple[type[exp.Expression], ...] = (exp.Union, exp.Intersect, exp.Except)
# Spider's UNIT_OPS (besides 'none').
_ARITH_TYPES: tuple[type[exp.Expression], ...] = (exp.Sub, exp.Add, exp.Mul, exp.Div)


@dataclass(frozen=True)
class SQLFacts:
    """Static facts about one gold SQL query."""

    difficulty: Difficulty
    """Spider's hardness level."""
    tables_involved: tuple[str, ...]
    """Real tables referenced anywhere, lowercase, sorted, deduplicated."""
    order_sensitive: bool
    """Whether the outermost query's result order is fixed by an ORDER BY."""


def analyze_sql(sql: str) -> SQLFacts:
    """Parse ``sql`` (SQLite dialect) and derive its :class:`SQLFacts`.

    Raises:
        ValueError: if the text does not parse or is not exactly one
            SELECT-like statement (SELECT, set operation, optional WITH).
    """
    root = _parse_single_query(sql)
    return SQLFacts(
        difficulty=_spider_hardness(root),
        tables_involved=_tables_involved(root),
        order_sensitive=_outer_order(root),
    )


# --- parsing -----------------------------------------------------------------


def _parse_single_query(sql: str) -> exp.Query:
    try:
        statements = [s for s in sqlglot.parse(sql, read="sqlite") if s is not None]
    except SqlglotError as err:
        raise ValueError(f"cannot parse SQL: {err}") from err
    if len(statements) != 1:
        raise ValueError(f"expected exactly one SQL statement, got {len(statements)}")
    root = statements[0]
    if not isinstance(_unwrap_query(root), (exp.Select, *_SET_OPS)):
        raise ValueError(f"expected a SELECT-like statement, got {type(root).__name__}")
    assert isinstance(root, exp.Query)
    return root


def _arg(node: exp.Expression, name: str) -> exp.Expression | None:
    # sqlglot >= 30 renamed some args ("from" -> "from_", "with" -> "with_").
    value = node.args.get(name)
    if value is None:
        value = node.args.get(f"{name}_")
    return value


def _strip_parens(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _unwrap_query(node: exp.Expression) -> exp.Expression:
    """Unwrap unaliased ``(query)`` wrappers."""
    while isinstance(node, exp.Subquery) and not node.alias:
        node = node.this
    return node


def _outer_order(root: exp.Expression) -> bool:
    """Whether the outermost query (or a ``(...)`` wrapper of it) has ORDER BY."""
    node: exp.Expression = root
    while True:
        order = node.args.get("order")
        if order is not None and order.expressions:
            return True
        if not (isinstance(node, exp.Subquery) and not node.alias):
            return False
        node = node.this


# --- tables ------------------------------------------------------------------


def _tables_involved(root: exp.Expression) -> tuple[str, ...]:
    names: set[str] = set()
    for table in root.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            continue  # table-valued function such as json_each(...)
        name = table.name.lower()
        if not table.args.get("db") and _is_cte_reference(table, name):
            continue
        names.add(name)
    return tuple(sorted(names))


def _is_cte_reference(table: exp.Table, name: str) -> bool:
    """True if a WITH clause enclosing ``table`` defines a CTE called ``name``."""
    node: exp.Expression | None = table.parent
    while node is not None:
        with_ = _arg(node, "with")
        if isinstance(with_, exp.With) and any(
            cte.alias_or_name.lower() == name for cte in with_.expressions
        ):
            return True
        node = node.parent
    return False


# --- Spider hardness ---------------------------------------------------------


def _spider_hardness(root: exp.Expression) -> Difficulty:
    query = _unwrap_query(root)
    comp2 = 0
    if isinstance(query, _SET_OPS):
        # Spider nests set operations to the right of the first SELECT and
        # only sees the top-level one.
        comp2 += 1
        while isinstance(query, _SET_OPS):
            query = _unwrap_query(query.this)
    if not isinstance(query, exp.Select):
        # e.g. VALUES as a set-operation branch: nothing further to count
        return _classify(0, comp2, 0)

    # Spider's cond_units and OR counts for ON (all joins), WHERE and HAVING
    from_conds: list[exp.Expression] = []
    ors = 0
    for join in query.args.get("joins") or []:
        units, n_or = _spider_condition(_arg(join, "on"))
        from_conds += units
        ors += n_or
    where = _condition(query, "where")
    having = _condition(query, "having")
    where_leaves, n_or = _spider_condition(where)
    ors += n_or
    having_leaves, n_or = _spider_condition(having)
    ors += n_or
    group = query.args.get("group")
    group_items = list(group.expressions) if group is not None else []
    order = query.args.get("order")
    order_items = [o.this for o in order.expressions] if order is not None else []

    # count_component1
    comp1 = sum(x is not None for x in (where, group, order, query.args.get("limit")))
    n_tables = (1 if _arg(query, "from") is not None else 0) + len(query.args.get("joins") or [])
    comp1 += max(n_tables - 1, 0)
    comp1 += ors
    cond_leaves = from_conds + where_leaves + having_leaves
    comp1 += sum(isinstance(_unnegate(leaf), exp.Like) for leaf in cond_leaves)

    # count_component2: subqueries used as values in ON/WHERE/HAVING
    comp2 += sum(len(list(_top_queries(leaf))) for leaf in cond_leaves)

    # count_others
    agg = sum(_is_agg(_leftmost(_strip_alias(e))) for e in query.expressions)
    agg += sum(_is_negated(leaf) for leaf in where_leaves)  # Spider quirk
    agg += sum(_is_agg(e) for e in group_items)
    for item in order_items:
        item = _strip_parens(item)
        if isinstance(item, _ARITH_TYPES):
            agg += _is_agg(item.this) + _is_agg(item.expression)
        else:
            agg += _is_agg(item)
    if having_leaves:  # Spider quirk: connectors and negated conditions
        agg += len(having_leaves) - 1 + sum(_is_negated(leaf) for leaf in having_leaves)
    others = sum((agg > 1, len(query.expressions) > 1, len(where_leaves) > 1, len(group_items) > 1))
    return _classify(comp1, comp2, others)


def _classify(comp1: int, comp2: int, others: int) -> Difficulty:
    # Thresholds copied from Spider's Evaluator.eval_hardness.
    if comp1 <= 1 and others == 0 and comp2 == 0:
        return "easy"
    if (others <= 2 and comp1 <= 1 and comp2 == 0) or (comp1 <= 2 and others < 2 and comp2 == 0):
        return "medium"
    if (
        (others > 2 and comp1 <= 2 and comp2 == 0)
        or (2 < comp1 <= 3 and others <= 2 and comp2 == 0)
        or (comp1 <= 1 and others == 0 and comp2 <= 1)
    ):
        return "hard"
    return "extra"


def _condition(query: exp.Select, name: str) -> exp.Expression | None:
    clause = query.args.get(name)
    return clause.this if clause is not None else None


def _spider_condition(cond: exp.Expression | None) -> tuple[list[exp.Expression], int]:
    """Spider's view of a condition: its cond_units and number of OR connectors.

    Mirrors a quirk of Spider's parser: a comparison whose (last) value is a
    column swallows the OR-connected conditions that follow it, up to the next
    AND, so those neither count as conditions nor as ORs.
    """
    if cond is None:
        return [], 0
    flat = _flatten(cond)
    units: list[exp.Expression] = []
    ors = 0
    i = 0
    while i < len(flat):
        leaf = flat[i]
        assert isinstance(leaf, exp.Expression)
        units.append(leaf)
        i += 1
        if _value_is_column(leaf):
            while i < len(flat) and flat[i] == "or":
                i += 2
        if i < len(flat):
            ors += flat[i] == "or"
            i += 1
    return units, ors


def _flatten(cond: exp.Expression) -> list[exp.Expression | str]:
    """Predicates of an AND/OR tree in textual order, with 'and'/'or' between them."""
    cond = _strip_parens(cond)
    if isinstance(cond, exp.And | exp.Or):
        connector = "or" if isinstance(cond, exp.Or) else "and"
        return [*_flatten(cond.this), connector, *_flatten(cond.expression)]
    return [cond]


def _value_is_column(leaf: exp.Expression) -> bool:
    """Whether Spider would parse the last value of ``leaf`` as a column."""
    pred = _unnegate(leaf)
    if isinstance(pred, exp.Between):
        value = pred.args.get("high")
    elif isinstance(pred, exp.Binary):
        value = pred.expression
    else:
        return False
    value = _strip_parens(value) if value is not None else None
    # Double-quoted names are string values to Spider, column names to sqlglot.
    return isinstance(value, exp.Column) and not value.this.args.get("quoted")


def _unnegate(leaf: exp.Expression) -> exp.Expression:
    return _strip_parens(leaf.this) if isinstance(leaf, exp.Not) else leaf


def _is_negated(leaf: exp.Expression) -> bool:
    # NOT IN / NOT BETWEEN come as Not(...); NOT LIKE may come as Like(negate=True).
    return isinstance(leaf, exp.Not) or bool(leaf.args.get("negate"))


def _top_queries(node: exp.Expression) -> Iterator[exp.Expression]:
    """Outermost subqueries inside ``node`` (not descending into them)."""
    for child in node.iter_expressions():
        if isinstance(child, exp.Query):
            yield child
        else:
            yield from _top_queries(child)


def _strip_alias(node: exp.Expression) -> exp.Expression:
    return _strip_parens(node.this) if isinstance(node, exp.Alias) else _strip_parens(node)


def _leftmost(node: exp.Expression) -> exp.Expression:
    # Spider reads an aggregate keyword only at the start of a select item.
    while isinstance(node, _ARITH_TYPES):
        node = _strip_parens(node.this)
    return node


def _is_agg(node: exp.Expression | None) -> bool:
    return node is not None and isinstance(_strip_parens(node), _AGG_TYPES)
