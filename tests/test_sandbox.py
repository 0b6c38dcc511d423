"""The SQL sandbox, as the spec describes it.

One read-only statement runs on a real SQLite file, bounded in time, rows and bytes:
1. every forbidden operation class is refused with a specific message and changes nothing;
2. ordinary read-only SQL works and returns exactly what SQLite returns;
3. runaway queries stop within the time limit + 10 %, and the same sandbox keeps working;
4. size bombs get a clear error without a memory blow-up; what is kept and shown is capped;
5. parser and planner limits (nesting, compound selects, LIKE patterns) give clear errors.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import least_of_attempts
from sqlenv.config import DEFAULT_CONFIG, SandboxLimits
from sqlenv.data.demo_databases import build_demo_databases
from sqlenv.env.environment import SQLEnvironment
from sqlenv.env.models import SQLAction
from sqlenv.sandbox import (
    MAX_KEPT_BYTES,
    TRUNCATION_MARKER,
    QueryResult,
    SandboxError,
    SQLSandbox,
    render_cell,
    render_result,
    render_table,
)

SRC_DIR = Path(__file__).resolve().parents[1] / "src"
LIMITS = SandboxLimits()
RUNAWAY_LIMIT_S = 1.0
TIME_MARGIN = 1.10  # the spec: a runaway query is stopped within the time limit + 10 %


def numbers(limit: int | None = None) -> str:
    """A CTE `r(n)` counting 1, 2, 3, ... up to `limit`, or forever."""
    return "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r" + (
        f" LIMIT {limit})" if limit else ")"
    )


ENDLESS_CTE = f"{numbers()} SELECT count(*) FROM r"


# ---- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_dbs() -> dict[str, Path]:
    return build_demo_databases()


@pytest.fixture(scope="module")
def library(demo_dbs: dict[str, Path]) -> Iterator[SQLSandbox]:
    with SQLSandbox(demo_dbs["library"]) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def world_db(spider_dir: Path) -> Path:
    return spider_dir / "database" / "world_1" / "world_1.sqlite"


@pytest.fixture(scope="module")
def world(world_db: Path) -> Iterator[SQLSandbox]:
    with SQLSandbox(world_db) as sandbox:
        yield sandbox


def plain_rows(db_path: Path, sql: str) -> tuple[tuple[str, ...], list[tuple[object, ...]]]:
    """What SQLite itself returns, through an ordinary read-only connection (the oracle)."""
    conn = sqlite3.connect(Path(db_path).resolve().as_uri() + "?mode=ro", uri=True)
    try:
        cursor = conn.execute(sql)
        return tuple(d[0] for d in cursor.description), cursor.fetchall()
    finally:
        conn.close()


PRIVATE_SCHEMA = """
CREATE TABLE authors (author_id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE books (
    book_id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    author_id INTEGER REFERENCES authors(author_id),
    price REAL
);
CREATE INDEX books_by_title ON books(title);
CREATE VIEW cheap_books AS SELECT title FROM books WHERE price < 10;
INSERT INTO authors VALUES (1, 'Frank Herbert'), (2, 'Jane Austen');
INSERT INTO books VALUES (1, 'Dune', 1, 9.5), (2, 'Emma', 2, 4.25), (3, 'Persuasion', 2, 12.0);
"""


@pytest.fixture()
def private_db(tmp_path: Path) -> Path:
    path = tmp_path / "private.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(PRIVATE_SCHEMA)
    conn.commit()
    conn.close()
    os.utime(path, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))  # any write would move it
    return path


def file_state(path: Path) -> tuple[str, int, int, list[str]]:
    """sha256, mtime, size, and every file next to it (a -journal/-wal/-shm would show here)."""
    stat = path.stat()
    return (
        hashlib.sha256(path.read_bytes()).hexdigest(),
        stat.st_mtime_ns,
        stat.st_size,
        sorted(p.name for p in path.parent.iterdir()),
    )


def timed(sandbox: SQLSandbox, sql: str, limit_s: float) -> tuple[str, float]:
    """Run a query expected to fail; return its error message and the wall time it took."""
    start = time.perf_counter()
    with pytest.raises(SandboxError) as info:
        sandbox.execute(sql, time_limit_s=limit_s)
    return str(info.value), time.perf_counter() - start


def stop_time(sandbox: SQLSandbox, sql: str, limit_s: float) -> float:
    """How soon a runaway query is stopped: each attempt must time out, naming the limit; the
    least wall time of up to three attempts (see least_of_attempts)."""

    def attempt() -> float:
        message, elapsed = timed(sandbox, sql, limit_s)
        assert "timed out" in message and f"{limit_s:g} s" in message, message
        return elapsed

    return least_of_attempts(attempt, limit_s * TIME_MARGIN)


# ---- 1. forbidden operations -------------------------------------------------------------------

# (statement, fragments the message must contain); "{dir}" is the private database's folder.
FORBIDDEN = [
    ("INSERT INTO books VALUES (4, 'Ubik', 1, 3.0)", ["not allowed", "INSERT", "modify data"]),
    ("UPDATE books SET price = 0", ["not allowed", "UPDATE", "modify data"]),
    ("DELETE FROM books", ["not allowed", "DELETE", "modify data"]),
    ("REPLACE INTO books VALUES (1, 'Dune', 1, 0.0)", ["not allowed", "REPLACE", "modify data"]),
    ("CREATE TABLE t (x)", ["not allowed", "CREATE TABLE", "schema"]),
    ("DROP TABLE books", ["not allowed", "DROP TABLE", "schema"]),
    ("ALTER TABLE books ADD COLUMN isbn TEXT", ["not allowed", "ALTER TABLE", "schema"]),
    ("CREATE INDEX books_by_price ON books(price)", ["not allowed", "CREATE INDEX", "schema"]),
    ("CREATE VIEW v AS SELECT 1", ["not allowed", "CREATE VIEW", "schema"]),
    (
        "CREATE TRIGGER tr AFTER INSERT ON books BEGIN DELETE FROM books; END",
        ["not allowed", "CREATE TRIGGER", "schema"],
    ),
    ("CREATE TEMP TABLE t (x)", ["not allowed", "CREATE TEMP TABLE"]),
    ("CREATE TEMPORARY VIEW v AS SELECT 1", ["not allowed", "CREATE TEMPORARY VIEW"]),
    ("ATTACH DATABASE '{dir}/attached.sqlite' AS other", ["not allowed", "ATTACH", "database file"]),
    ("DETACH DATABASE main", ["not allowed", "DETACH"]),
    ("PRAGMA table_info(books)", ["not allowed", "PRAGMA"]),
    ("PRAGMA writable_schema=1", ["not allowed", "PRAGMA"]),
    (
        "SELECT * FROM pragma_table_info('books')",
        ["not allowed", "table-valued functions", "pragma"],
    ),
    ("SELECT name FROM pragma_database_list", ["not allowed", "table-valued functions", "pragma"]),
    ("SELECT load_extension('x')", ["not allowed", "load_extension()"]),
    ("VACUUM", ["not allowed", "VACUUM"]),
    ("VACUUM INTO '{dir}/copy.sqlite'", ["not allowed", "VACUUM", "copy"]),
    ("BEGIN", ["not allowed", "BEGIN", "transactions"]),
    ("BEGIN IMMEDIATE TRANSACTION", ["not allowed", "BEGIN", "transactions"]),
    ("COMMIT", ["not allowed", "COMMIT", "transactions"]),
    ("SAVEPOINT s1", ["not allowed", "SAVEPOINT", "transactions"]),
    ("ANALYZE", ["not allowed", "ANALYZE"]),
    ("REINDEX", ["not allowed", "REINDEX"]),
    ("REINDEX books_by_title", ["not allowed", "REINDEX"]),
    ("SELECT 1; SELECT 2", ["exactly one statement"]),
    ("SELECT 1; DELETE FROM books", ["exactly one statement"]),
    ("/* harmless */ DELETE FROM books", ["not allowed", "DELETE"]),
    ("-- just a comment\n  DELETE FROM books", ["not allowed", "DELETE"]),
    # Writes that do not start with their keyword reach SQLite and are refused by the authorizer.
    ("WITH gone AS (SELECT 1) DELETE FROM books", ["not allowed", "deleting rows"]),
    ("WITH x AS (SELECT 1) INSERT INTO books SELECT 9, 'X', 1, 1.0", ["not allowed", "inserting rows"]),
    ("WITH x AS (SELECT 1) UPDATE books SET price = 0", ["not allowed", "updating rows"]),
    ("EXPLAIN DELETE FROM books", ["not allowed", "deleting rows"]),
    ("EXPLAIN CREATE TABLE t (x)", ["not allowed", "schema"]),
    ("EXPLAIN ANALYZE", ["not allowed", "ANALYZE"]),
    ("EXPLAIN PRAGMA writable_schema=1", ["not allowed", "PRAGMA"]),
    ("", ["empty query"]),
    ("   \n\t ", ["empty query"]),
    ("/* only a comment */", ["empty query"]),
    ("SELECT 1\x00; DELETE FROM books", ["NUL"]),
    ("SELECT " + "1, " * 7_000 + "1", ["query too long", str(LIMITS.max_sql_chars)]),
]


@pytest.mark.parametrize(("sql", "fragments"), FORBIDDEN, ids=[repr(s[:40]) for s, _ in FORBIDDEN])
def test_forbidden_statement_is_refused_specifically_and_changes_nothing(
    private_db: Path, sql: str, fragments: list[str]
) -> None:
    sql = sql.replace("{dir}", str(private_db.parent))
    before = file_state(private_db)
    expected = plain_rows(private_db, "SELECT * FROM books ORDER BY book_id")[1]
    with SQLSandbox(private_db) as sandbox:
        with pytest.raises(SandboxError) as info:
            sandbox.execute(sql)
        message = str(info.value)
        for fragment in fragments:
            assert fragment.lower() in message.lower(), message
        # nothing changed, and the same sandbox still reads the same rows
        assert list(sandbox.execute("SELECT * FROM books ORDER BY book_id").rows) == expected
        assert sandbox.execute("SELECT count(*) FROM sqlite_master").rows == ((4,),)
    assert file_state(private_db) == before  # sha256, mtime, size, and no new file in the folder
    assert not any(p.name.endswith(("-journal", "-wal", "-shm")) for p in private_db.parent.iterdir())


def test_vacuum_into_and_attach_create_no_file(private_db: Path) -> None:
    copy = private_db.parent / "copy.sqlite"
    attached = private_db.parent / "attached.sqlite"
    with SQLSandbox(private_db) as sandbox:
        for sql in (f"VACUUM INTO '{copy}'", f"ATTACH DATABASE '{attached}' AS other"):
            with pytest.raises(SandboxError, match="not allowed"):
                sandbox.execute(sql)
        # EXPLAIN only lists the bytecode (VACUUM's own ATTACH would happen when it runs)
        assert sandbox.execute(f"EXPLAIN VACUUM INTO '{copy}'").rows
    assert not copy.exists()
    assert not attached.exists()


def test_demo_databases_refuse_writes_and_keep_their_rows(demo_dbs: dict[str, Path]) -> None:
    writes = {
        "library": ["DELETE FROM loans", "UPDATE books SET price = 0", "DROP TABLE members"],
        "bikeshare": ["DELETE FROM trips", "INSERT INTO stations DEFAULT VALUES", "ALTER TABLE bikes ADD x"],
        "retail": ["DELETE FROM orders", "UPDATE products SET price = 0", "CREATE INDEX i ON orders(1)"],
    }
    for db_id, statements in writes.items():
        path = demo_dbs[db_id]
        before = file_state(path)
        tables = [
            name for (name,) in plain_rows(path, "SELECT name FROM sqlite_master WHERE type='table'")[1]
        ]
        counts = {t: plain_rows(path, f"SELECT count(*) FROM {t}")[1] for t in tables}
        with SQLSandbox(path) as sandbox:
            for sql in statements:
                with pytest.raises(SandboxError, match="not allowed"):
                    sandbox.execute(sql)
            assert {t: list(sandbox.execute(f"SELECT count(*) FROM {t}").rows) for t in tables} == counts
        assert file_state(path) == before


# ---- 2. allowed SQL ----------------------------------------------------------------------------

ALLOWED = [
    "SELECT title, price FROM books ORDER BY book_id",
    "SELECT a.name, count(*) AS n FROM books b JOIN authors a ON a.author_id = b.author_id "
    "GROUP BY a.name ORDER BY n DESC, a.name",
    "SELECT b.title FROM books b LEFT JOIN loans l ON l.book_id = b.book_id "
    "WHERE l.loan_id IS NULL ORDER BY b.title",
    "WITH pricey AS (SELECT * FROM books WHERE price > 15) SELECT genre, count(*) FROM pricey GROUP BY genre "
    "ORDER BY genre",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r LIMIT 5",
    "SELECT title, rank() OVER (PARTITION BY genre ORDER BY price DESC) AS r, "
    "sum(pages) OVER (ORDER BY book_id) FROM books ORDER BY book_id",
    "SELECT 1;",
    "SELECT 1; -- a trailing comment",
    "SELECT 1; /* a trailing comment */",
    "SELECT upper('abc'), round(2.567, 1), printf('%5.2f|%-4d|%s', 3.14159, 42, 'x'), "
    "date('2024-02-28', '+1 day'), strftime('%Y', '2020-06-01'), "
    "julianday('2024-03-01') - julianday('2024-02-01')",
    "SELECT type, name FROM sqlite_master ORDER BY name",
    "SELECT genre FROM books WHERE title LIKE '%the%' ORDER BY book_id",
    "SELECT instr(title, 'a'), replace(title, ' ', '_'), trim(title, 'T'), ltrim(title, 'A') "
    "FROM books ORDER BY book_id",
    "VALUES (1, 'a'), (2, 'b')",
    "SELECT * FROM books b WHERE EXISTS (SELECT 1 FROM loans l WHERE l.book_id = b.book_id) ORDER BY book_id",
    "EXPLAIN QUERY PLAN SELECT * FROM books WHERE book_id = 1",
]


@pytest.mark.parametrize("sql", ALLOWED, ids=[s[:40] for s in ALLOWED])
def test_read_only_sql_returns_exactly_what_sqlite_returns(
    library: SQLSandbox, demo_dbs: dict[str, Path], sql: str
) -> None:
    result = library.execute(sql)
    columns, rows = plain_rows(demo_dbs["library"], sql)
    assert result.columns == columns
    assert list(result.rows) == rows
    assert not result.truncated
    assert rows  # every one of these queries has rows, so the comparison says something


def test_ordinary_functions_give_the_documented_values(library: SQLSandbox) -> None:
    sql = (
        "SELECT upper('abc'), round(2.567, 1), printf('%05d', 42), printf('%.3c', 'x'), "
        "date('2024-02-28', '+1 day'), 'Dune' LIKE 'd%', instr('banana', 'nan'), replace('aXbX', 'X', '-')"
    )
    assert library.execute(sql).rows == (("ABC", 2.6, "00042", "xxx", "2024-02-29", 1, 3, "a-b-"),)


# The built-ins that run behind a guard must keep SQLite's exact semantics (types, NULLs, blobs,
# case folding, ESCAPE, printf's odd corners).
GUARDED_EXPRESSIONS = [
    "'ABC' LIKE 'a%'",
    "'é' LIKE 'É'",
    "'abc' LIKE 'a_c'",
    "1.5 LIKE '1.5'",
    "x'41' LIKE 'a'",
    "'a' LIKE NULL",
    "NULL LIKE 'a'",
    "'a_c' LIKE 'a\\_c' ESCAPE '\\'",
    "'abc' LIKE 'a\\_c' ESCAPE '\\'",
    "'abc' NOT LIKE '%b%'",
    "'' LIKE ''",
    "'abc' GLOB 'a*'",
    "'ABC' GLOB 'a*'",
    "'abc' GLOB '[a-c]?c'",
    "'abc' GLOB '[^a]*'",
    "instr('hello', 'l')",
    "instr('héllo', 'l')",
    "instr(x'00ff00', x'ff')",
    "instr(12345, 34)",
    "instr('abc', '')",
    "instr(NULL, 'a')",
    "replace('aaa', 'a', 'bb')",
    "replace('abc', '', 'x')",
    "replace(123, 2, 9)",
    "typeof(replace(123, 2, 9))",
    "replace('abc', 'b', NULL)",
    "replace(x'616263', 'b', 'B')",
    "trim('xxhixx', 'x')",
    "ltrim('abcabc', 'ba')",
    "rtrim(12300, 0)",
    "trim('  a  ')",
    "trim('abc', NULL)",
    "printf('%d %s %5.1f %-3c|', 7, 'x', 2.25, 'yz')",
    "printf('%.3c', 'ab')",
    "printf('%*d|%-*d|', 5, 42, 4, 7)",
    "printf('%.*s', 2, 'abcdef')",
    "printf('%q', 'it''s')",
    "printf('%Q', NULL)",
    "printf('%,d', 1234567)",
    "printf('100%%')",
    "printf('%')",
    "printf(NULL)",
    "printf('')",
    "printf('%d')",
    "printf('%lld %x %o %e', 5, 255, 8, 1234.5)",
    "printf('%!.3g', 1.0)",
    "printf('%.*c', -3, 'z')",
    "printf('%s', x'6869')",
    "printf('%z')",
    "format('%08.3f', 3.14159)",
]


def test_guarded_builtins_keep_sqlites_semantics(library: SQLSandbox, demo_dbs: dict[str, Path]) -> None:
    for expression in GUARDED_EXPRESSIONS:
        sql = f"SELECT {expression}"
        assert list(library.execute(sql).rows) == plain_rows(demo_dbs["library"], sql)[1], expression
    for sql in (
        "SELECT title FROM books WHERE title LIKE '%e%' ORDER BY book_id",
        "SELECT title FROM books WHERE title NOT GLOB '*[aeiou]*' ORDER BY book_id",
        "SELECT count(*) FROM books b JOIN authors a ON a.name LIKE '%' || substr(b.title, 1, 1) || '%'",
    ):
        assert list(library.execute(sql).rows) == plain_rows(demo_dbs["library"], sql)[1], sql


def test_guarded_builtins_match_sqlite_on_a_grid_of_inputs(library: SQLSandbox) -> None:
    values = ["'abc'", "'ABC'", "'a%c'", "'%'", "'_'", "'é'", "''", "NULL", "12", "1.5", "x'41'", "'[a-c]*'"]
    templates = [
        "{a} LIKE {b}",
        "{a} LIKE {b} ESCAPE {c}",
        "{a} GLOB {b}",
        "instr({a}, {b})",
        "replace({a}, {b}, {c})",
        "trim({a}, {b})",
        "rtrim({a}, {b})",
    ]
    plain = sqlite3.connect(":memory:")
    checked = 0
    for template in templates:
        for a, b, c in itertools.product(values, values, values[:4] if "{c}" in template else ["''"]):
            expression = template.format(a=a, b=b, c=c)
            sql = f"SELECT {expression}, typeof({expression})"
            try:
                expected: object = plain.execute(sql).fetchall()
            except sqlite3.Error:
                expected = "error"
            try:
                got: object = list(library.execute(sql).rows)
            except SandboxError:
                got = "error"
            assert got == expected, sql
            checked += 1
    plain.close()
    assert checked > 1000


def test_printf_guard_matches_sqlite_on_random_formats(library: SQLSandbox) -> None:
    # Refused only when SQLite itself would give up (NULL: result too big); otherwise identical.
    rnd = random.Random(7)
    pieces = [
        "%",
        "d",
        "s",
        "c",
        "*",
        ".",
        "l",
        "-",
        "0",
        "5",
        "999",
        "1000001",
        "x",
        "q",
        "!",
        ",",
        "n",
        "é",
    ]
    arguments = ["1", "-5", "1000001", "'1000001'", "'1e9'", "2.5", "NULL", "'abc'", "x'41'", "2147483648"]
    plain = sqlite3.connect(":memory:")
    plain.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, LIMITS.max_string_bytes)
    refused = 0
    for _ in range(1500):
        fmt = "".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 7)))
        args = ", ".join(["'" + fmt + "'"] + [rnd.choice(arguments) for _ in range(rnd.randint(0, 3))])
        sql = f"SELECT printf({args})"
        expected = plain.execute(sql).fetchone()[0]
        try:
            got = library.execute(sql).rows[0][0]
        except SandboxError as exc:
            assert "exceed the limit" in str(exc) and expected is None, sql
            refused += 1
            continue
        assert got == expected, sql
    plain.close()
    assert 0 < refused < 300


# ---- 3. runaway queries ------------------------------------------------------------------------


def test_endless_recursive_cte_is_stopped_in_time_and_the_sandbox_goes_on(library: SQLSandbox) -> None:
    assert stop_time(library, ENDLESS_CTE, RUNAWAY_LIMIT_S) <= RUNAWAY_LIMIT_S * TIME_MARGIN
    books = library.execute("SELECT * FROM books").rows
    assert books and library.execute("SELECT count(*) FROM books").rows == ((len(books),),)


def test_cross_join_of_large_tables_is_stopped_in_time(world: SQLSandbox, world_db: Path) -> None:
    sql = "SELECT count(*) FROM city a, city b, city c"
    assert stop_time(world, sql, RUNAWAY_LIMIT_S) <= RUNAWAY_LIMIT_S * TIME_MARGIN
    sql = "SELECT Name, Population FROM city WHERE CountryCode = 'NLD' ORDER BY Population DESC LIMIT 3"
    assert list(world.execute(sql).rows) == plain_rows(world_db, sql)[1]
    assert world.execute("SELECT count(*) FROM city").rows == ((4079,),)


def test_sorting_a_cross_join_is_stopped_in_time(world: SQLSandbox) -> None:
    sql = "SELECT a.Name FROM city a, city b, city c ORDER BY a.Name || b.Name || c.Name"
    assert stop_time(world, sql, RUNAWAY_LIMIT_S) <= RUNAWAY_LIMIT_S * TIME_MARGIN


def test_slow_instructions_between_progress_checks_are_stopped_in_time(library: SQLSandbox) -> None:
    # Each row costs one ~1 MB randomblob (milliseconds) but only a few VM instructions, so the
    # progress handler (every 10,000 instructions) alone would let ~2,000 of them run past the
    # deadline; the watchdog interrupts at the next row.
    sql = f"{numbers()} SELECT count(*) FROM r WHERE length(randomblob(999999)) > 0"
    assert stop_time(library, sql, RUNAWAY_LIMIT_S) <= RUNAWAY_LIMIT_S * TIME_MARGIN
    assert library.execute("SELECT 1").rows == ((1,),)


def test_a_query_under_the_limit_is_not_stopped(library: SQLSandbox) -> None:
    sql = f"{numbers(200_000)} SELECT count(*) FROM r"
    result = library.execute(sql, time_limit_s=RUNAWAY_LIMIT_S)
    assert result.rows == ((200_000,),)
    assert result.elapsed_s < RUNAWAY_LIMIT_S


def test_environment_reports_the_timeout_and_the_episode_goes_on(demo_dataset) -> None:
    env = SQLEnvironment(dataset=demo_dataset, config=DEFAULT_CONFIG.with_time_limit(RUNAWAY_LIMIT_S))
    try:
        obs = env.reset(seed=0)
        table = obs.schema_info.removeprefix("Tables: ").split(", ")[0]

        def attempt() -> float:
            start = time.perf_counter()
            slow = env.step(SQLAction(action_type="QUERY", argument=ENDLESS_CTE))
            elapsed = time.perf_counter() - start
            assert "timed out" in slow.error and not slow.done
            return elapsed

        assert least_of_attempts(attempt, RUNAWAY_LIMIT_S * TIME_MARGIN) <= RUNAWAY_LIMIT_S * TIME_MARGIN
        good = env.step(SQLAction(action_type="QUERY", argument=f"SELECT count(*) FROM {table}"))
        assert good.error == ""
        expected = plain_rows(demo_dataset.db_path(env.state.db_id), f"SELECT count(*) FROM {table}")[1][0][0]
        assert str(expected) in good.result
    finally:
        env.close()


# ---- 4. size bounds ----------------------------------------------------------------------------

# Runs in a fresh interpreter so that the peak RSS measured is this workload's own. The package's
# __init__ (which imports the whole environment stack) is bypassed so that it starts in ~0.1 s.
MEMORY_PROBE = """
import json, resource, sys, time, types
package = types.ModuleType("sqlenv")
package.__path__ = [sys.argv[1] + "/sqlenv"]
sys.modules["sqlenv"] = package
from sqlenv.sandbox import SandboxError, SQLSandbox

sandbox = SQLSandbox(sys.argv[2])
sandbox.execute("SELECT 1")
baseline_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
report = []
for sql in json.loads(sys.stdin.read()):
    start = time.perf_counter()
    try:
        result = sandbox.execute(sql, time_limit_s=5.0)
        outcome = {"rows": len(result.rows), "truncated": result.truncated, "error": None}
    except SandboxError as exc:
        outcome = {"error": str(exc)}
    outcome["elapsed_s"] = time.perf_counter() - start
    outcome["peak_growth_mb"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - baseline_kb) / 1024
    report.append(outcome)
print(json.dumps(report))
"""

MAX_PEAK_GROWTH_MB = 200
BOMBS = [
    ("SELECT randomblob(2000000000)", "too large"),
    ("SELECT zeroblob(2000000000)", "too large"),
    ("SELECT length(zeroblob(2000000000))", "too large"),
    ("SELECT printf('%.*c', 2000000000, 'x')", "exceed the limit"),
    ("SELECT printf('%2000000000d', 1)", "exceed the limit"),
    ("SELECT replace(hex(zeroblob(400000)), '0', 'aaaaaaaa')", "too large"),
    ("SELECT length(replace(hex(zeroblob(499999)), '0', '00000'))", "too large"),
    ("SELECT group_concat(hex(randomblob(1000))) FROM books a, books b, books c", "too large"),
]


def test_size_bombs_give_a_clear_error_without_a_memory_blow_up(demo_dbs: dict[str, Path]) -> None:
    big_rows = f"{numbers(1_000)} SELECT randomblob(999999) FROM r"
    queries = [sql for sql, _ in BOMBS] + [big_rows]
    completed = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, str(SRC_DIR), str(demo_dbs["library"])],
        input=json.dumps(queries),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(completed.stdout)
    for (sql, fragment), outcome in zip(BOMBS, report, strict=False):
        assert outcome["error"] is not None and fragment in outcome["error"], (sql, outcome)
        assert outcome["peak_growth_mb"] < MAX_PEAK_GROWTH_MB, (sql, outcome)
        assert outcome["elapsed_s"] < 2.0, (sql, outcome)
    # 1,000 rows of 1 MB cells: kept only up to the byte budget, reported as truncated.
    many_big = report[-1]
    assert many_big["error"] is None and many_big["truncated"], many_big
    assert many_big["rows"] <= MAX_KEPT_BYTES // 999_999
    assert many_big["peak_growth_mb"] < MAX_PEAK_GROWTH_MB, many_big


def test_many_rows_keep_only_max_rows_kept_and_say_truncated(library: SQLSandbox) -> None:
    sql = f"{numbers(100_000)} SELECT n, n * 2 FROM r"
    result = library.execute(sql)
    assert len(result.rows) == LIMITS.max_rows_kept
    assert result.truncated
    assert result.rows[0] == (1, 2) and result.rows[-1] == (LIMITS.max_rows_kept, 2 * LIMITS.max_rows_kept)
    assert result.row_count_text == f"more than {LIMITS.max_rows_kept}"
    text = render_result(result, LIMITS)
    body = text.splitlines()
    assert body[-1] == f"({LIMITS.max_rows_shown} of more than {LIMITS.max_rows_kept} rows shown)"
    assert len(body) == 1 + LIMITS.max_rows_shown + 1  # header, rows shown, count line


def test_exactly_max_rows_kept_rows_are_not_truncated(library: SQLSandbox) -> None:
    n = LIMITS.max_rows_kept
    result = library.execute(f"{numbers(n)} SELECT n FROM r")
    assert len(result.rows) == n and not result.truncated


def test_huge_cells_are_shown_truncated_with_the_marker(library: SQLSandbox) -> None:
    result = library.execute("SELECT printf('%.*c', 500000, 'x') AS big, 'small' AS small, zeroblob(10) AS b")
    assert len(result.rows[0][0]) == 500_000  # kept as SQLite returned it
    text = render_result(result, LIMITS)
    header, row, count = text.splitlines()
    assert header == "big | small | b"
    big_cell, small_cell, blob_cell = row.split(" | ")
    assert len(big_cell) == LIMITS.max_cell_chars and big_cell.endswith(TRUNCATION_MARKER)
    assert small_cell == "small" and blob_cell == "<blob 10 bytes>"
    assert count == "(1 row)"
    assert render_cell("y" * 1000, 10) == "y" * 9 + TRUNCATION_MARKER


def test_rendered_text_never_exceeds_max_result_chars_plus_the_marker_line(library: SQLSandbox) -> None:
    marker_line = f"\n{TRUNCATION_MARKER} [output truncated at {LIMITS.max_result_chars} characters]"
    wide = ", ".join(f"printf('%.*c', 300, 'abcdefghij') AS c{i}" for i in range(12))
    sql = f"{numbers(500)} SELECT n, {wide} FROM r"
    text = render_result(library.execute(sql), LIMITS)
    assert len(text) <= LIMITS.max_result_chars + len(marker_line)
    assert text.endswith(marker_line)
    lines = text.splitlines()
    assert all(len(cell) <= LIMITS.max_cell_chars for line in lines[:-1] for cell in line.split(" | "))
    # many columns: a header alone longer than the cap is cut too
    many = tuple(f"column_{i}" for i in range(LIMITS.max_columns))
    text = render_table(many, ((1,) * len(many),), LIMITS)
    assert len(text) <= LIMITS.max_result_chars + len(marker_line)
    # a small result is shown whole, with its count line
    small = render_result(QueryResult(("a", "b"), ((1, None), (2.5, "x|y\nz")), False, 0.0), LIMITS)
    assert small == "a | b\n1 | NULL\n2.5 | x/y z\n(2 rows)"


def test_rows_shown_are_capped_with_a_count_line(library: SQLSandbox) -> None:
    result = library.execute(f"{numbers(57)} SELECT n FROM r")
    assert len(result.rows) == 57 and not result.truncated
    lines = render_result(result, LIMITS).splitlines()
    assert lines[0] == "n"
    assert lines[1 : 1 + LIMITS.max_rows_shown] == [str(i) for i in range(1, LIMITS.max_rows_shown + 1)]
    assert lines[-1] == f"({LIMITS.max_rows_shown} of 57 rows shown)"


# ---- 5. parser, planner and function limits ----------------------------------------------------

LIMIT_BREAKERS = [
    ("SELECT " + "(" * 5000 + "1" + ")" * 5000, "nested too deeply"),
    ("SELECT " + "1 + " * 300 + "1", f"maximum depth {LIMITS.max_expr_depth}"),
    (" UNION ".join(["SELECT 1"] * 1000), "too many terms in compound SELECT"),
    ("SELECT 'a' LIKE '" + "a" * (LIMITS.max_like_pattern_bytes + 1) + "'", "pattern too long"),
    ("SELECT 'a' GLOB '" + "a" * (LIMITS.max_like_pattern_bytes + 1) + "'", "pattern too long"),
    ("SELECT " + ", ".join(["1"] * (LIMITS.max_columns + 1)), "too many columns"),
    ("SELECT max(" + ", ".join(["1"] * (LIMITS.max_function_args + 1)) + ")", "too many arguments"),
    ("SELECT ?", "variables"),
]


@pytest.mark.parametrize(("sql", "fragment"), LIMIT_BREAKERS, ids=[s[:30] for s, _ in LIMIT_BREAKERS])
def test_limit_breaking_sql_gets_a_clear_error_and_the_sandbox_goes_on(
    library: SQLSandbox, sql: str, fragment: str
) -> None:
    start = time.perf_counter()
    with pytest.raises(SandboxError) as info:
        library.execute(sql)
    assert fragment in str(info.value)
    assert time.perf_counter() - start < 0.5
    assert library.execute("SELECT count(*) FROM authors").rows[0][0] > 0


# Built-in functions whose running time is not bounded by their output: SQLite cannot interrupt
# them mid-call, so before the guards each of these ran for 6 to 30+ seconds whatever the limit.
SLOW_FUNCTION_CALLS = [
    ("SELECT printf('%.*c', 999000, 'a') LIKE '%' || printf('%.*c', 1990, 'a') || 'b'", "like()"),
    ("SELECT printf('%.*c', 999000, 'a') GLOB '*' || printf('%.*c', 1990, 'a') || 'b'", "glob()"),
    ("SELECT instr(printf('%.*c', 999000, 'a'), printf('%.*c', 499000, 'a') || 'b')", "instr()"),
    ("SELECT replace(printf('%.*c', 999000, 'a'), printf('%.*c', 499000, 'a') || 'b', '')", "replace()"),
    ("SELECT trim(printf('%.*c', 100000, 'a'), printf('%.*c', 100000, 'b') || 'a')", "trim()"),
    ("SELECT ltrim(printf('%.*c', 100000, 'a'), printf('%.*c', 100000, 'b') || 'a')", "ltrim()"),
    ("SELECT printf('%.*c', 2000000000, 'x')", "printf()"),
    ("SELECT format(replace(printf('%.*c', 100000, 'x'), 'x', '%.999999c'))", "format()"),
]


@pytest.mark.parametrize(("sql", "function"), SLOW_FUNCTION_CALLS, ids=[f for _, f in SLOW_FUNCTION_CALLS])
def test_uninterruptible_function_calls_are_refused_promptly(
    library: SQLSandbox, sql: str, function: str
) -> None:
    message, elapsed = timed(library, sql, RUNAWAY_LIMIT_S)
    assert message.startswith(f"not allowed: {function}"), message
    assert elapsed < 0.5
    assert library.execute("SELECT 'Dune' LIKE 'd%'").rows == ((1,),)


def test_text_that_is_not_utf8_gets_a_clear_error_in_guarded_functions(tmp_path: Path) -> None:
    # The guards run in Python, which cannot receive text that is not valid UTF-8 (nor can it show
    # such a cell in a result); what SQLite evaluates natively still reads it.
    path = tmp_path / "latin1.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE t (x TEXT); INSERT INTO t VALUES (CAST(x'61ff62' AS TEXT)), ('abc');")
    conn.commit()
    conn.close()
    with SQLSandbox(path) as sandbox:
        with pytest.raises(SandboxError, match="not valid UTF-8"):
            sandbox.execute("SELECT count(*) FROM t WHERE x LIKE '%b%'")
        assert sandbox.execute("SELECT length(x) FROM t").rows == ((3,), (3,))
        assert sandbox.execute("SELECT count(*) FROM t WHERE x = 'abc'").rows == ((1,),)
