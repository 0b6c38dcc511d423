"""Guards on the SQLite built-in functions whose running time is not bounded by their output.

SQLite can interrupt a statement between function calls, never inside one. LIKE/GLOB, instr,
replace, trim with a character set (O(n·m)) and printf's `%.*c` (a loop as long as the precision)
can each run for minutes inside a single call. The sandbox (`sqlenv.sandbox.executor`) overrides
them with wrappers that first ask the guard here whether the inputs can finish promptly, refuse
them with a reason when not, and otherwise delegate to SQLite's own implementation, so results
are unchanged. The budgets are `SandboxLimits.max_match_steps` and `max_scan_bytes`.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence

from sqlenv.config import SandboxLimits


class FunctionRefused(Exception):
    """Raised inside a guarded SQL function; the sandbox reports the reason it recorded."""


# ---- guards for the built-in functions SQLite cannot interrupt -------------------------------------


def _length(value: object) -> int:
    if isinstance(value, str | bytes):
        return len(value)
    return 0 if value is None else len(str(value))


_INT64_MAX = 2**63 - 1
_LEADING_INTEGER = re.compile(r"[ \t\n\f\r]*([-+]?)0*([0-9]*)")


def _as_int64(value: object) -> int:
    """sqlite3_value_int64(value): what SQL printf takes for a `*` width or precision."""
    if isinstance(value, int):
        return value
    if isinstance(value, float):  # truncated, saturated (infinities included)
        if value != value:
            return 0
        return _INT64_MAX if value >= 2**63 else -_INT64_MAX - 1 if value < -(2**63) else int(value)
    if isinstance(value, str | bytes):  # the leading integer, saturated (sqlite3Atoi64)
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        match = _LEADING_INTEGER.match(text)
        assert match is not None  # the pattern matches the empty string
        number = int(match.group(2) or "0")
        number = -number if match.group(1) == "-" else number
        return max(min(number, _INT64_MAX), -_INT64_MAX - 1)
    return 0


def _star_argument(value: object) -> int:
    """A `*` width or precision as SQLite's printf uses it: cast to a C int, negatives flipped."""
    n = (_as_int64(value) + 2**31) % 2**32 - 2**31
    if n >= 0:
        return n
    if n >= -(2**31 - 1):
        return -n
    return 0  # INT_MIN: width 0, or no precision at all


# SQL printf's conversions (any other character ends the formatting); those whose output is at
# least `precision` characters long (%c repeats its character); those that take no argument.
_KNOWN_CONVERSIONS = frozenset("dsgzqQwcouxXfeEGinpr%")
_PRECISION_IS_MINIMUM = frozenset("cdiuxXoprfeE")
_NO_ARGUMENT = frozenset("%n")
_DIGITS = frozenset("0123456789")


def _printf_minimum_length(args: Sequence[object]) -> int:
    """A lower bound of the length of printf(args...), following SQLite's own format parser."""
    if not args or args[0] is None:
        return 0
    fmt = args[0].decode("utf-8", "replace") if isinstance(args[0], bytes) else str(args[0])
    values = iter(args[1:])
    total = 0
    i, n = 0, len(fmt)
    while i < n:
        if fmt[i] != "%":
            i += 1
            continue
        i += 1
        width, precision = 0, 0
        while i < n:  # flags, width and precision, in the order SQLite's loop accepts them
            c = fmt[i]
            if c in "-+ #!0,":
                i += 1
            elif c in _DIGITS:
                j = i
                while j < n and fmt[j] in _DIGITS:
                    j += 1
                width = int(fmt[i:j]) % 2**32 & 0x7FFFFFFF
                i = j
                if i >= n or fmt[i] not in ".l":
                    break
            elif c == "*":
                width = _star_argument(next(values, 0))
                i += 1
                if i >= n or fmt[i] not in ".l":
                    break
            elif c == ".":
                i += 1
                if i < n and fmt[i] == "*":
                    precision = _star_argument(next(values, 0))
                    i += 1
                else:
                    j = i
                    while j < n and fmt[j] in _DIGITS:
                        j += 1
                    precision = int(fmt[i:j] or "0") % 2**32 & 0x7FFFFFFF
                    i = j
                if i >= n or fmt[i] != "l":
                    break
            elif c == "l":
                i += 2 if fmt[i + 1 : i + 2] == "l" else 1
                break
            else:
                break
        if i >= n or fmt[i] not in _KNOWN_CONVERSIONS:
            break  # SQLite stops formatting at an unknown conversion
        conversion = fmt[i]
        i += 1
        if conversion not in _NO_ARGUMENT:
            next(values, None)
        if conversion != "n":  # %n writes nothing
            total += max(width, precision if conversion in _PRECISION_IS_MINIMUM else 0, 1)
    return total


def _printf_guard(limits: SandboxLimits, args: Sequence[object]) -> str | None:
    if _printf_minimum_length(args) > limits.max_string_bytes:
        return (
            f"its result would exceed the limit of {limits.max_string_bytes} bytes "
            "(width or precision too large)"
        )
    return None


def _contains(value: object, char: str) -> bool:
    if isinstance(value, str):
        return char in value
    return isinstance(value, bytes) and char.encode() in value


def _match_guard(limits: SandboxLimits, args: Sequence[object], wildcard: str) -> str | None:
    pattern, text = args[0], args[1]
    if not _contains(pattern, wildcard):
        return None  # without a wildcard, matching is linear
    if _length(pattern) * _length(text) > limits.max_match_steps:
        return (
            f"a pattern with wildcards of {_length(pattern)} characters against a text of "
            f"{_length(text)} characters would take too long"
        )
    return None


def _scan_guard(limits: SandboxLimits, args: Sequence[object]) -> str | None:
    haystack, needle = _length(args[0]), _length(args[1])
    work = needle * max(haystack - needle + 1, 0)
    if work > limits.max_scan_bytes:
        return f"searching a text of {haystack} characters for one of {needle} would take too long"
    return None


def _trim_guard(limits: SandboxLimits, args: Sequence[object]) -> str | None:
    text, chars = _length(args[0]), _length(args[1])
    if text * chars > limits.max_match_steps:
        return f"trimming a text of {text} characters with a set of {chars} characters would take too long"
    return None


Guard = Callable[[SandboxLimits, Sequence[object]], "str | None"]
# (function name, number of arguments (-1: any), guard)
GUARDED_FUNCTIONS: tuple[tuple[str, int, Guard], ...] = (
    ("printf", -1, _printf_guard),
    ("format", -1, _printf_guard),
    ("like", 2, lambda limits, args: _match_guard(limits, args, "%")),
    ("like", 3, lambda limits, args: _match_guard(limits, args, "%")),
    ("glob", 2, lambda limits, args: _match_guard(limits, args, "*")),
    ("instr", 2, _scan_guard),
    ("replace", 3, _scan_guard),
    ("trim", 2, _trim_guard),
    ("ltrim", 2, _trim_guard),
    ("rtrim", 2, _trim_guard),
)


def _builtin_functions_present() -> frozenset[str]:
    probe = sqlite3.connect(":memory:")
    try:
        present = set()
        for name, nargs, _ in GUARDED_FUNCTIONS:
            try:
                probe.execute(f"SELECT {name}({', '.join(['1'] * max(nargs, 1))})")
                present.add(name)
            except sqlite3.Error:
                pass  # e.g. format() before SQLite 3.38: not overridden, so not added either
        return frozenset(present)
    finally:
        probe.close()


PRESENT_BUILTINS = _builtin_functions_present()
