"""How a query result looks to the agent: compact pipe-separated text, capped in rows, per cell
and in total (`SandboxLimits.max_rows_shown`, `max_cell_chars`, `max_result_chars`), with a
visible marker wherever something was cut."""

from __future__ import annotations

from sqlenv.config import SandboxLimits
from sqlenv.sandbox.executor import QueryResult

TRUNCATION_MARKER = "…"


def render_cell(value: object, max_chars: int) -> str:
    """One cell as the agent sees it: NULL for None, floats compact, long text cut with a marker."""
    if value is None:
        text = "NULL"
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
    lines = [" | ".join([render_cell(c, width) for c in columns])]
    # Fast path for the common cells (ints, short plain text); render_cell for everything else.
    lines.extend(
        " | ".join(
            [
                str(v)
                if v.__class__ is int
                else v
                if v.__class__ is str and len(v) <= width and "\n" not in v and "|" not in v
                else render_cell(v, width)
                for v in row
            ]
        )
        for row in shown
    )
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
