"""How a query result looks to the agent: compact pipe-separated text, capped in rows, per cell
and in total (`SandboxLimits.max_rows_shown`, `max_cell_chars`, `max_result_chars`), with a
visible marker wherever something was cut."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain

from sqlenv.config import SandboxLimits
from sqlenv.sandbox.executor import QueryResult

TRUNCATION_MARKER = "…"
NULL_TEXT = "NULL"


def render_cell(value: object, max_chars: int) -> str:
    """One cell as the agent sees it: NULL for None, floats compact, long text cut with a marker."""
    if value is None:
        text = NULL_TEXT
    elif isinstance(value, float):
        text = repr(value)
    elif isinstance(value, bytes):
        text = f"<blob {len(value)} bytes>"
    else:
        text = str(value)
    text = text.replace("\n", " ").replace("|", "/")
    if len(text) > max_chars:
        text = text[: max_chars - 1] + TRUNCATION_MARKER
    return text


def _cell_texts(cells: Iterable[object], width: int) -> list[str]:
    """render_cell of each cell, with inline fast paths for the common ones, whose text
    render_cell would return unchanged: ints, short plain text, short floats, and NULL."""
    return [
        str(v)
        if v.__class__ is int
        else v
        if v.__class__ is str and len(v) <= width and "\n" not in v and "|" not in v
        else NULL_TEXT
        if v is None and width >= len(NULL_TEXT)
        else text
        if v.__class__ is float and len(text := repr(v)) <= width
        else render_cell(v, width)
        for v in cells
    ]


def render_table(
    columns: tuple[str, ...],
    rows: tuple[tuple[object, ...], ...],
    limits: SandboxLimits,
    *,
    total_text: str | None = None,
    max_rows: int | None = None,
) -> str:
    """Rows as compact pipe-separated text, capped in rows, per cell and in total."""
    max_rows = limits.max_rows_shown if max_rows is None else max_rows
    shown = rows[:max_rows]
    width = limits.max_cell_chars
    n = len(columns)
    if n and set(map(len, shown)) <= {n}:  # a query result: one cell per column in every row
        # The header's and every shown row's cells in one pass (a pass per row costs a
        # comprehension frame each), then cut into lines.
        cells = _cell_texts(chain(columns, *shown), width)
        lines = cells if n == 1 else [" | ".join(cells[i : i + n]) for i in range(0, len(cells), n)]
    else:
        lines = [" | ".join(_cell_texts(row, width)) for row in (columns, *shown)]
    total = total_text if total_text is not None else str(len(rows))
    if len(shown) < len(rows) or (total_text is not None and total_text != str(len(shown))):
        lines.append(f"({len(shown)} of {total} rows shown)")
    else:
        lines.append(f"({total} row{'s' if total != '1' else ''})")
    text = "\n".join(lines)
    if len(text) > limits.max_result_chars:
        cut = text[: limits.max_result_chars].rsplit("\n", 1)[0]
        text = f"{cut}\n{TRUNCATION_MARKER} [output truncated at {limits.max_result_chars} characters]"
    return text


def render_result(result: QueryResult, limits: SandboxLimits) -> str:
    """A QueryResult as the text of an observation."""
    return render_table(result.columns, result.rows, limits, total_text=result.row_count_text)
