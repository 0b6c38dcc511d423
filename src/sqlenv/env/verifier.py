"""The answer verifier: parses an ANSWER string and compares it with the gold rows, by type.

Rules (documented in the README, "Answer rules"):
- integer: exact after numeric coercion ("42", "42.0", "1,234" for 1234);
- float: within `float_tolerance` relative error (1% by default; absolute 1e-9 when |gold| < 1e-9);
- string: trimmed, case-insensitive; two numeric strings also match numerically;
- list (one column): order-insensitive multiset unless the gold SQL has ORDER BY;
- table (several columns): a multiset of rows, each cell compared by its gold type; ordered only
  when the gold SQL has ORDER BY; the columns may come in any order (as in Spider's execution
  match: a question rarely fixes it), but one order must fit every row;
- empty gold: only an explicit "no rows" answer matches ("[]", "none", "no results", "empty", "").
Wrapping is stripped first: code fences, "Answer:" prefixes, surrounding quotes. A list or table
answer may be a JSON array (of values, or of rows), newline-separated, comma/semicolon-separated,
or `a | b` rows (markdown tables too). NULL cells match "null"/"none"/"".
`format_answer` writes the canonical form the oracle uses: scalars as text, lists and tables as
JSON arrays.

SQL-answer mode (`EnvConfig.answer_mode == "sql"`) compares the result of the agent's query with
the gold rows by `execution_match`: Spider's execution-accuracy rule (the same bag of rows, cells
equal as SQLite returns them, columns in any order, rows in order only when the gold SQL has
ORDER BY).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlenv.data.records import AnswerType, Cell

_FENCE = re.compile(r"^```[\w+-]*\s*\n?(.*?)\n?```$", re.DOTALL)
_PREFIX = re.compile(r"^(?:final\s+answer|the\s+answer\s+is|answer)\s*[:=\-]?\s*", re.IGNORECASE)
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_BULLET = re.compile(r"^(?:[-*•]\s+|\d+[.)]\s+)")
_MD_SEPARATOR = re.compile(r"^\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?$")
_NULL_WORDS = frozenset({"null", "none", "", "nan"})
_EMPTY_WORDS = frozenset(
    {"", "[]", "none", "null", "no results", "no result", "empty", "nothing", "no rows", "0 rows", "[[]]"}
)
# Above this many rows an order-insensitive float comparison is not attempted pairwise.
_MAX_PAIRWISE_ROWS = 3_000
# Column orders tried for one table answer. Orders are drawn only from columns whose values could
# be the gold column's, so this bound is reached only by tables of many interchangeable columns.
_MAX_COLUMN_ORDERS = 5_040


@dataclass(frozen=True)
class Verdict:
    correct: bool
    reason: str


def strip_wrapping(text: str) -> str:
    """Remove code fences, an "Answer:" prefix and quotes around the whole answer."""
    text = text.strip()
    for _ in range(3):  # wrappings can nest: ```\nAnswer: "x"\n```
        before = text
        fence = _FENCE.match(text)
        if fence:
            text = fence.group(1).strip()
        text = _PREFIX.sub("", text, count=1).strip()
        if _is_quoted(text):
            text = text[1:-1].strip()
        if text == before:
            break
    return text


def _is_quoted(text: str) -> bool:
    """Quotes around the whole text: not the backticks of a code fence, and not the first and last
    quote of a quoted list ('a', 'b')."""
    if len(text) < 2 or text[0] != text[-1] or text[0] not in "\"'`" or text.startswith("```"):
        return False
    quote = re.escape(text[0])
    return re.search(quote + r"\s*(?:[,;|]|\n)\s*" + quote, text[1:-1]) is None


def parse_number(token: Cell) -> float | int | None:
    """A number from a JSON value or text, or None if it is not one."""
    if isinstance(token, bool) or token is None:
        return None
    if isinstance(token, int | float):
        return token if not (isinstance(token, float) and not math.isfinite(token)) else None
    text = token.strip()
    if text.endswith(".") and text[:-1].lstrip("+-").isdigit():
        text = text[:-1]  # "42." as a sentence end
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def cell_matches(token: Cell, gold: Cell, float_tolerance: float) -> bool:
    """One answer cell against one gold cell, by the gold cell's type."""
    if gold is None:
        return token is None or (isinstance(token, str) and token.strip().lower() in _NULL_WORDS)
    if isinstance(gold, bool | int):
        number = parse_number(token)
        return number is not None and number == gold
    if isinstance(gold, float):
        number = parse_number(token)
        if number is None:
            return False
        if abs(gold) < 1e-9:  # zero, or a rounding residue of zero such as 5.5e-17
            return abs(number) <= 1e-9
        return abs(number - gold) <= float_tolerance * abs(gold)
    if token is None:
        return False
    text = token if isinstance(token, str) else _json_scalar_text(token)
    if text.strip().casefold() == gold.strip().casefold():
        return True
    answer_number, gold_number = parse_number(text), parse_number(gold)
    return answer_number is not None and gold_number is not None and answer_number == gold_number


def _json_scalar_text(value: Cell) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _try_json(text: str) -> object:
    if not text or text[0] not in '[{"-0123456789tfn':
        return _NO_JSON
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NO_JSON


_NO_JSON = object()


def _as_cell(value: object) -> Cell | object:
    if value is None or isinstance(value, str | int | float):
        return value
    return _NO_JSON


def _unwrap_single(values: list[object]) -> list[object]:
    """[[a], [b]] -> [a, b]; dict rows with one value -> that value."""
    out: list[object] = []
    for v in values:
        if isinstance(v, list) and len(v) == 1:
            v = v[0]
        elif isinstance(v, dict) and len(v) == 1:
            v = next(iter(v.values()))
        out.append(v)
    return out


def _clean_item(item: str) -> str:
    item = _BULLET.sub("", item.strip()).strip()
    if len(item) >= 2 and item[0] == item[-1] and item[0] in "\"'`":
        item = item[1:-1]
    return item.strip()


def _list_candidates(text: str) -> Iterable[list[Cell]]:
    parsed = _try_json(text)
    if isinstance(parsed, list):
        items = [_as_cell(v) for v in _unwrap_single(parsed)]
        if all(i is not _NO_JSON for i in items):
            yield items  # type: ignore[misc]
    elif parsed is not _NO_JSON and _as_cell(parsed) is not _NO_JSON:
        yield [parsed]  # type: ignore[list-item]
    if "\n" in text:
        yield [_clean_item(line) for line in text.splitlines() if line.strip()]
    for sep in (",", ";", "|"):
        if sep in text:
            yield [_clean_item(part) for part in text.split(sep)]
    yield [_clean_item(text)]


def _split_row(line: str, width: int) -> list[list[str]]:
    tabbed = line.strip(" \r\n")  # a tab at either end separates an empty (NULL) cell
    line = line.strip()
    options: list[list[str]] = []
    if "|" in line:
        cells = [c.strip() for c in line.split("|")]
        # The outer pipes of a markdown row are borders, but "a | " is a row whose last cell is empty.
        if len(cells) > width and cells[0] == "":
            cells = cells[1:]
        if len(cells) > width and cells[-1] == "":
            cells = cells[:-1]
        options.append(cells)
    if "\t" in tabbed:
        options.append([c.strip() for c in tabbed.split("\t")])
    for sep in (",", ";"):
        if sep in line:
            options.append([_clean_item(c) for c in line.split(sep)])
    if not options:
        options.append([line])
    return options


def _table_candidates(text: str, width: int, n_rows: int) -> Iterable[list[list[Cell]]]:
    parsed = _try_json(text)
    if isinstance(parsed, list):
        rows: list[list[Cell]] = []
        flat = parsed and not any(isinstance(r, list | dict) for r in parsed)
        source = [parsed] if flat else parsed
        for r in source:
            if isinstance(r, dict):
                r = list(r.values())
            if not isinstance(r, list) or any(_as_cell(c) is _NO_JSON for c in r):
                rows = []
                break
            rows.append(r)
        if rows:
            yield rows
    lines = [ln for ln in text.splitlines() if ln.strip() and not _MD_SEPARATOR.match(ln.strip())]
    if len(lines) == 1 and n_rows > 1:
        # One line holding several rows: "a, 1; b, 2" or "(a, 1), (b, 2)".
        for row_sep in (";", "),"):
            if row_sep in lines[0]:
                lines = [part.strip().strip("()") for part in lines[0].split(row_sep)]
                break
    split_lines = [_split_row(ln, width) for ln in lines]
    for choice in range(3):
        table = [opts[min(choice, len(opts) - 1)] for opts in split_lines]
        if all(len(r) == width for r in table):
            yield table  # type: ignore[misc]
            if len(table) == n_rows + 1:
                yield table[1:]  # a header line
    if n_rows == 1 and width > 1:
        for opts in _split_row(text.replace("\n", " "), width):
            yield [opts]  # type: ignore[list-item]


def _rows_match(
    answer: Sequence[Sequence[Cell]],
    gold: Sequence[Sequence[Cell]],
    ordered: bool,
    float_tolerance: float,
) -> bool:
    if len(answer) != len(gold):
        return False
    if any(len(a) != len(g) for a, g in zip(answer, gold, strict=True)) and ordered:
        return False
    if ordered:
        return all(
            all(cell_matches(a, g, float_tolerance) for a, g in zip(ar, gr, strict=True))
            for ar, gr in zip(answer, gold, strict=True)
        )
    width = len(gold[0]) if gold else 0
    if any(len(a) != width for a in answer):
        return False
    kinds = _column_kinds(gold, width)
    keyed_answer = Counter(tuple(_canonical(c, k) for c, k in zip(r, kinds, strict=True)) for r in answer)
    keyed_gold = Counter(tuple(_canonical(c, k) for c, k in zip(r, kinds, strict=True)) for r in gold)
    if keyed_answer == keyed_gold:
        return True
    if all(k not in ("mixed", "float") for k in kinds):
        return False
    if len(gold) > _MAX_PAIRWISE_ROWS:
        return False
    return _perfect_matching(answer, gold, float_tolerance)


def _rows_match_in_some_column_order(
    answer: Sequence[Sequence[Cell]],
    gold: Sequence[Sequence[Cell]],
    ordered: bool,
    float_tolerance: float,
) -> bool:
    """`_rows_match` for the answer's columns in their own order, else in any order that fits."""
    if _rows_match(answer, gold, ordered, float_tolerance):
        return True
    width = len(gold[0]) if gold else 0
    if width < 2 or len(answer) != len(gold) or any(len(row) != width for row in answer):
        return False
    identity = tuple(range(width))
    for order in _column_orders(answer, gold, ordered, float_tolerance):
        if order != identity:
            permuted = [[row[i] for i in order] for row in answer]
            if _rows_match(permuted, gold, ordered, float_tolerance):
                return True
    return False


def _column_orders(
    answer: Sequence[Sequence[Cell]],
    gold: Sequence[Sequence[Cell]],
    ordered: bool,
    float_tolerance: float,
) -> Iterable[tuple[int, ...]]:
    """Orders of the answer's columns (order[j] = the answer column put in gold column j's place)
    in which each answer column could hold its gold column's values, at most _MAX_COLUMN_ORDERS.
    A filter only: the caller still compares whole rows, so columns that match one by one but
    pair their values into other rows are rejected there."""
    width = len(gold[0])
    candidates = [
        [i for i in range(width) if _column_fits(answer, i, gold, j, ordered, float_tolerance)]
        for j in range(width)
    ]
    chosen: list[int] = []
    used: set[int] = set()
    yielded = 0

    def extend(j: int) -> Iterable[tuple[int, ...]]:
        nonlocal yielded
        if j == width:
            yielded += 1
            yield tuple(chosen)
            return
        for i in candidates[j]:
            if i in used or yielded >= _MAX_COLUMN_ORDERS:
                continue
            chosen.append(i)
            used.add(i)
            yield from extend(j + 1)
            chosen.pop()
            used.discard(i)

    return extend(0)


def _column_fits(
    answer: Sequence[Sequence[Cell]],
    i: int,
    gold: Sequence[Sequence[Cell]],
    j: int,
    ordered: bool,
    float_tolerance: float,
) -> bool:
    """Whether answer column i could be gold column j: the same values (as a sequence when
    ordered, else as a multiset) under the gold column's type. Float and mixed columns, whose
    values match within a tolerance, are only checked for their count of NULLs (cheap, and never
    rules out a column that fits)."""
    kind = _column_kinds([[row[j]] for row in gold], 1)[0]
    answer_keys = [_canonical(row[i], kind) for row in answer]
    gold_keys = [_canonical(row[j], kind) for row in gold]
    if kind in ("float", "mixed"):
        return sum(k is None for k in answer_keys) == sum(k is None for k in gold_keys)
    if ordered:
        return answer_keys == gold_keys
    return Counter(answer_keys) == Counter(gold_keys)


def _perfect_matching(
    answer: Sequence[Sequence[Cell]], gold: Sequence[Sequence[Cell]], float_tolerance: float
) -> bool:
    """Whether every gold row can be paired with its own answer row. Each gold row first takes the
    first free answer row that fits; when none is left, an augmenting path re-pairs earlier rows
    (with a tolerance, first fit alone can miss a pairing that exists)."""

    def fits(i: int, j: int) -> bool:
        return all(cell_matches(a, g, float_tolerance) for a, g in zip(answer[i], gold[j], strict=True))

    gold_of: list[int | None] = [None] * len(answer)  # answer row -> the gold row it is paired with
    answer_of: list[int | None] = [None] * len(gold)
    free_rows = list(range(len(answer)))
    for root in range(len(gold)):
        direct = next((k for k, i in enumerate(free_rows) if fits(i, root)), None)
        if direct is not None:
            i = free_rows.pop(direct)
            gold_of[i], answer_of[root] = root, i
            continue
        reached_from: dict[int, int] = {}  # answer row -> the gold row the search reached it from
        queue, head, free = [root], 0, None
        while head < len(queue) and free is None and len(reached_from) < len(answer):
            j = queue[head]
            head += 1
            for i in range(len(answer)):
                if i not in reached_from and fits(i, j):
                    reached_from[i] = j
                    if gold_of[i] is None:
                        free = i
                        break
                    queue.append(gold_of[i])  # type: ignore[arg-type]
        if free is None:
            return False
        free_rows.remove(free)
        path: int | None = free
        while path is not None:  # flip the pairings along the path back to the root
            j = reached_from[path]
            gold_of[path], answer_of[j], path = j, path, answer_of[j]
    return True


def _column_kinds(gold: Sequence[Sequence[Cell]], width: int) -> list[str]:
    kinds: list[str] = []
    for j in range(width):
        seen = {_kind(row[j]) for row in gold if row[j] is not None}
        kinds.append(seen.pop() if len(seen) == 1 else ("null" if not seen else "mixed"))
    return kinds


def _kind(value: Cell) -> str:
    if isinstance(value, float):
        return "float"
    if isinstance(value, int):
        return "int"
    return "str"


def _canonical(value: Cell, kind: str) -> object:
    if value is None or (isinstance(value, str) and value.strip().lower() in _NULL_WORDS):
        return None
    if kind in ("int", "float", "str"):  # a string column too: numeric strings match numerically
        number = parse_number(value)
        if number is not None:
            return number
        if kind != "str":
            return ("text", str(value))
    if isinstance(value, str):
        return value.strip().casefold()
    return _json_scalar_text(value).casefold()


def is_empty_answer(text: str) -> bool:
    return strip_wrapping(text).strip().lower().rstrip(".") in _EMPTY_WORDS


def verify_answer(
    answer: str,
    gold_rows: Sequence[Sequence[Cell]],
    answer_type: AnswerType,
    order_sensitive: bool,
    float_tolerance: float = 0.01,
) -> Verdict:
    """Compare an ANSWER string with the gold rows under the rules above."""
    if not isinstance(answer, str):
        return Verdict(False, "the answer must be text")
    if len(gold_rows) == 0:
        if is_empty_answer(answer):
            return Verdict(True, "correct: the result is empty")
        return Verdict(False, "wrong: the expected result is empty")
    # The unwrapped text first; the raw text too, for values that only look wrapped ("'x'", "Answer…").
    texts = dict.fromkeys((strip_wrapping(answer), answer.strip()))
    if answer_type in ("integer", "float", "string"):
        gold = gold_rows[0][0]
        for candidate in (c for text in texts for c in _scalar_candidates(text)):
            if cell_matches(candidate, gold, float_tolerance):
                return Verdict(True, "correct")
        return Verdict(False, _wrong_scalar(list(texts), answer_type))
    if answer_type == "list":
        gold_items = [[row[0]] for row in gold_rows]
        for items in (i for text in texts for i in _list_candidates(text)):
            if _rows_match([[i] for i in items], gold_items, order_sensitive, float_tolerance):
                return Verdict(True, "correct")
        order = "in order" if order_sensitive else "in any order"
        return Verdict(False, f"wrong: expected a list of {_count(len(gold_rows), 'value')} {order}")
    width = len(gold_rows[0])
    for table in (t for text in texts for t in _table_candidates(text, width, len(gold_rows))):
        if _rows_match_in_some_column_order(table, gold_rows, order_sensitive, float_tolerance):
            return Verdict(True, "correct")
    return Verdict(False, f"wrong: expected {_count(len(gold_rows), 'row')} of {width} columns")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _wrong_scalar(texts: Sequence[str], answer_type: AnswerType) -> str:
    """Why a scalar answer is wrong, without giving the gold away: a value of the expected kind that
    is another value, or not a single value of that kind at all."""
    if answer_type in ("integer", "float"):
        right_shape = any(parse_number(c) is not None for text in texts for c in _scalar_candidates(text))
    else:  # any text is a string, but not a JSON list or object of several values
        right_shape = any(_is_single_value(text) for text in texts)
    if right_shape:
        return f"wrong: not the expected {answer_type} value"
    return f"wrong: expected a single {answer_type} value"


def _unwrapped_json(text: str) -> object:
    """The text's JSON value with single-item lists unwrapped ([["x"]] -> "x"), or _NO_JSON."""
    parsed = _try_json(text)
    while isinstance(parsed, list) and len(parsed) == 1:
        parsed = parsed[0]
    return parsed


def _is_single_value(text: str) -> bool:
    parsed = _unwrapped_json(text)
    return parsed is _NO_JSON or _as_cell(parsed) is not _NO_JSON


def _scalar_candidates(text: str) -> Iterable[Cell]:
    parsed = _unwrapped_json(text)
    if parsed is not _NO_JSON and _as_cell(parsed) is not _NO_JSON:
        yield parsed  # type: ignore[misc]
    yield text
    if text.endswith("."):
        yield text[:-1]


def format_answer(rows: Sequence[Sequence[Cell]], answer_type: AnswerType) -> str:
    """The canonical answer text for gold rows (what the oracle sends)."""
    if not rows:
        return "[]"
    if answer_type in ("integer", "float", "string"):
        value = rows[0][0]
        return "NULL" if value is None else str(value)
    if answer_type == "list":
        return json.dumps([row[0] for row in rows], ensure_ascii=False)
    return json.dumps([list(row) for row in rows], ensure_ascii=False)


def execution_match(
    rows: Sequence[Sequence[Cell]], gold_rows: Sequence[Sequence[Cell]], ordered: bool
) -> bool:
    """Spider's execution-match rule: whether a query's result rows equal the gold result rows.

    Cells are compared exactly, as SQLite returned them (after `normalize_cell`; 1 equals 1.0),
    the rows as a bag (duplicates count), in order only when `ordered`; the columns may be in any
    order, but one order must fit every row. Two empty results match.

    Args:
        rows: the result of the query being graded.
        gold_rows: the gold query's result.
        ordered: whether the gold SQL orders its rows (ORDER BY at its top level).

    Returns:
        True when some order of the result's columns makes its rows the gold rows.
    """
    if len(rows) != len(gold_rows):
        return False
    if not gold_rows:
        return True
    width = len(gold_rows[0])
    if any(len(row) != width for row in rows):
        return False

    def same(a: Sequence[object], b: Sequence[object]) -> bool:
        return list(a) == list(b) if ordered else Counter(a) == Counter(b)

    if same([tuple(r) for r in rows], [tuple(g) for g in gold_rows]):
        return True
    answer_columns = [tuple(row[i] for row in rows) for i in range(width)]
    gold_columns = [tuple(row[j] for row in gold_rows) for j in range(width)]
    candidates = [[i for i in range(width) if same(answer_columns[i], gold_columns[j])] for j in range(width)]
    gold_bag = [tuple(g) for g in gold_rows]
    tried = 0
    order: list[int] = []

    def search(j: int) -> bool:
        nonlocal tried
        if j == width:
            tried += 1
            return same([tuple(row[i] for i in order) for row in rows], gold_bag)
        for i in candidates[j]:
            if i in order or tried >= _MAX_COLUMN_ORDERS:
                continue
            order.append(i)
            if search(j + 1):
                return True
            order.pop()
        return False

    return search(0)


def rows_equal_unordered(
    rows: Sequence[Sequence[Cell]], gold_rows: Sequence[Sequence[Cell]], float_tolerance: float = 0.01
) -> bool:
    """Whether a query result equals the gold rows as a multiset (used by progress rewards)."""
    return _rows_match(rows, gold_rows, False, float_tolerance)
