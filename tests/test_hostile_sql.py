"""Hostile SQL: every entry of a corpus goes through a real environment, and nothing breaks or leaks.

Each entry of `tests/data/hostile_sql.jsonl` is sent as a QUERY action to ONE `SQLEnvironment` on the
demo dataset (1 s time limit), in one long episode per database. For every entry:
- `step` returns an observation (never raises) within the time limit + 10 %;
- "reject": the error names the reason (every fragment of the entry's "match" appears in it);
- "timeout": the error says the query timed out, or refuses it sooner for its size or complexity;
- "ok": no error, and the result is exactly what plain SQLite returns, rendered the same way;
- afterwards the same episode still answers a normal query correctly.
Over the whole corpus: the process's peak memory grows by less than MAX_RSS_GROWTH_MB, no file
appears in the folder that ATTACH / VACUUM INTO point at, and (conftest) no database file changes.

Corpus format, one JSON object per line:
- "sql": the query text; "class": what kind of attack (REQUIRED_CLASSES lists those that must be
  covered); "expect": "reject" | "timeout" | "ok";
- "match": list of fragments the error must contain, case-insensitively (required for "reject");
- "db": the demo database to run on ("library" when absent);
- "repeat": {placeholder: [text, times]}: each placeholder in "sql" (written like "{R1}") is
  replaced by `text * times`, so that entries of megabytes stay one short line in the file;
- "{tmp}" in "sql" is replaced by a fresh empty folder, which must still be empty at the end;
- "nondeterministic": true: an "ok" result is not compared with plain SQLite (random values);
- "note": why the entry is there.
"""

from __future__ import annotations

import json
import re
import resource
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pytest

from conftest import least_of_attempts
from sqlenv.config import DEFAULT_CONFIG, EnvConfig
from sqlenv.env.environment import SQLEnvironment
from sqlenv.env.models import SQLAction
from sqlenv.sandbox import QueryResult, render_result

CORPUS_PATH = Path(__file__).parent / "data" / "hostile_sql.jsonl"
CORPUS: list[dict] = [json.loads(line) for line in CORPUS_PATH.read_text(encoding="utf-8").splitlines()]

TIME_LIMIT_S = 1.0
TIME_MARGIN = 1.10  # the spec: a runaway query is stopped within the time limit + 10 %
# One episode per database absorbs the whole corpus (each entry costs two steps).
CONFIG = EnvConfig(step_budget=10_000).with_time_limit(TIME_LIMIT_S)
# Measured: ~20 MB. Before json_group_array/object were refused, one such query grew it by 300-600 MB.
MAX_RSS_GROWTH_MB = 200
MIN_ENTRIES = 250
MAX_TIMEOUT_ENTRIES = 35  # each costs a full second
REQUIRED_CLASSES = frozenset(
    {
        "write",
        "ddl",
        "attach",
        "pragma",
        "load_extension",
        "vacuum",
        "temp_object",
        "transaction",
        "analyze_reindex",
        "multi_statement",
        "comment_trick",
        "recursive_cte_bomb",
        "size_bomb",
        "memory_bomb",
        "cartesian_bomb",
        "huge_in_list",
        "deep_nesting",
        "giant_literal",
        "pattern_bomb",
        "unicode",
        "nul_byte",
        "over_length",
        "non_sql",
        "parameter",
        "table_valued",
        "benign",
    }
)
ENTRY_KEYS = frozenset({"sql", "class", "expect", "match", "db", "repeat", "nondeterministic", "note"})
DATABASES = ("library", "bikeshare", "retail")
# A normal query per database, asked after every entry in the same episode.
SANITY = {
    "library": "SELECT COUNT(*) FROM books",
    "bikeshare": "SELECT COUNT(*) FROM trips",
    "retail": "SELECT COUNT(*) FROM order_items",
}
# What a "timeout" entry may answer: stopped at the limit, or refused sooner for its size/complexity.
TIMEOUT_OR_REFUSAL = re.compile(
    r"timed out|too large|too long|too complex|too deeply|too many|maximum depth|not allowed", re.I
)


def expand(entry: dict, tmp: Path) -> str:
    sql = entry["sql"]
    for placeholder, (text, times) in entry.get("repeat", {}).items():
        sql = sql.replace(placeholder, text * times)
    return sql.replace("{tmp}", str(tmp))


def plain_connection(db_path: Path) -> sqlite3.Connection:
    """An ordinary read-only connection: the oracle for "ok" entries."""
    return sqlite3.connect(f"file:{quote(str(db_path.resolve()))}?mode=ro&immutable=1", uri=True)


def plain_render(conn: sqlite3.Connection, sql: str) -> str:
    """What the agent should see: SQLite's own rows, kept and rendered as the sandbox does."""
    cursor = conn.execute(sql)
    keep = CONFIG.sandbox.max_rows_kept
    rows = cursor.fetchmany(keep + 1)
    result = QueryResult(tuple(d[0] for d in cursor.description), tuple(rows[:keep]), len(rows) > keep, 0.0)
    return render_result(result, CONFIG.sandbox)


def peak_rss_kb_so_far() -> int:
    """The process's peak resident set size so far (ru_maxrss, in KB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


@dataclass
class CorpusRun:
    """One environment shared by every entry; a reset only when the database changes."""

    env: SQLEnvironment
    tmp: Path
    plain: dict[str, sqlite3.Connection]
    sanity_text: dict[str, str]
    first_question: dict[str, str]
    baseline_rss_kb: int
    peak_rss_kb: int = 0
    ran: set[int] = field(default_factory=set)
    timeout_wall_s: list[float] = field(default_factory=list)
    db: str | None = None

    def episode_on(self, db: str) -> SQLEnvironment:
        state = self.env.state
        if self.db != db or state.done or state.step_count + 2 > state.step_budget:
            self.env.reset(question_id=self.first_question[db])
            self.db = db
        return self.env


@pytest.fixture(scope="module")
def run(demo_dataset, tmp_path_factory) -> Iterator[CorpusRun]:
    env = SQLEnvironment(dataset=demo_dataset, split="train", config=CONFIG)
    plain = {db: plain_connection(demo_dataset.db_path(db)) for db in DATABASES}
    first = {db: next(r.question_id for r in env.questions if r.db_id == db) for db in DATABASES}
    corpus_run = CorpusRun(
        env=env,
        tmp=tmp_path_factory.mktemp("hostile-files"),
        plain=plain,
        sanity_text={db: plain_render(plain[db], SANITY[db]) for db in DATABASES},
        first_question=first,
        baseline_rss_kb=peak_rss_kb_so_far(),
    )
    yield corpus_run
    env.close()
    for conn in plain.values():
        conn.close()


# ---- the corpus itself -------------------------------------------------------------------------


def test_corpus_is_large_well_formed_and_covers_every_class() -> None:
    assert len(CORPUS) >= MIN_ENTRIES
    counts = Counter(e["class"] for e in CORPUS)
    missing = REQUIRED_CLASSES - counts.keys()
    assert not missing, f"classes without entries: {sorted(missing)}"
    assert not counts.keys() - REQUIRED_CLASSES, "a class not listed in REQUIRED_CLASSES"
    assert all(n >= 3 for n in counts.values()), counts
    for i, entry in enumerate(CORPUS):
        assert entry.keys() <= ENTRY_KEYS and {"sql", "class", "expect"} <= entry.keys(), i
        assert entry["expect"] in ("reject", "timeout", "ok"), i
        assert entry.get("db", "library") in DATABASES, i
        if entry["expect"] == "reject":
            assert entry.get("match"), f"entry {i}: a rejection must say what its error names"
        for placeholder in entry.get("repeat", {}):
            assert placeholder in entry["sql"], i
    expects = Counter(e["expect"] for e in CORPUS)
    assert (
        expects["ok"] >= 50 and expects["reject"] >= 150 and 20 <= expects["timeout"] <= MAX_TIMEOUT_ENTRIES
    )
    assert CORPUS_PATH.stat().st_size < 300_000
    # some entries really are big once expanded: megabytes, and over the length limit
    sizes = [len(expand(e, Path("/tmp"))) for e in CORPUS]
    assert max(sizes) >= 1_000_000
    assert sum(s > DEFAULT_CONFIG.sandbox.max_sql_chars for s in sizes) >= 10


# ---- every entry -------------------------------------------------------------------------------


@pytest.mark.parametrize("index", range(len(CORPUS)), ids=[f"{e['class']}-{i}" for i, e in enumerate(CORPUS)])
def test_entry_is_handled_and_the_episode_goes_on(run: CorpusRun, index: int) -> None:
    entry = CORPUS[index]
    db = entry.get("db", "library")
    sql = expand(entry, run.tmp)
    env = run.episode_on(db)
    before = env.state

    start = time.perf_counter()
    obs = env.step(SQLAction(action_type="QUERY", argument=sql))
    elapsed = time.perf_counter() - start
    run.ran.add(index)
    run.peak_rss_kb = max(run.peak_rss_kb, peak_rss_kb_so_far())

    growth_mb = (run.peak_rss_kb - run.baseline_rss_kb) / 1024
    assert growth_mb < MAX_RSS_GROWTH_MB, f"peak memory grew by {growth_mb:.0f} MB so far"
    assert obs.step_count == before.step_count + 1 and not obs.done
    expect = entry["expect"]
    if expect == "ok":
        assert obs.error == "", obs.error
        if not entry.get("nondeterministic"):
            assert obs.result == plain_render(run.plain[db], sql)
        else:
            assert obs.result
    elif expect == "reject":
        assert obs.error and obs.result == ""
        for fragment in entry["match"]:
            assert fragment.lower() in obs.error.lower(), obs.error
    else:
        assert obs.error and TIMEOUT_OR_REFUSAL.search(obs.error), obs.error
        if "timed out" in obs.error:
            assert f"after {TIME_LIMIT_S:g} s" in obs.error
    assert obs.error != "SQL error" and not obs.error.endswith("SQL error: ")

    # The same episode goes on, and a normal query gets the right answer.
    after = env.step(SQLAction(action_type="QUERY", argument=SANITY[db]))
    assert after.error == "", after.error
    assert after.result == run.sanity_text[db]
    assert env.state.episode_id == before.episode_id
    assert env.state.step_count == before.step_count + 2

    bound = TIME_LIMIT_S * TIME_MARGIN
    if elapsed > bound:  # retimed in the same episode: the machine may have been busy for a moment

        def attempt() -> float:
            start = time.perf_counter()
            again = env.step(SQLAction(action_type="QUERY", argument=sql))
            assert again.error == obs.error
            return time.perf_counter() - start

        elapsed = min(elapsed, least_of_attempts(attempt, bound, attempts=2))
    if expect not in ("ok", "reject"):
        run.timeout_wall_s.append(elapsed)
    assert elapsed <= bound, f"took {elapsed:.3f} s: {obs.error}"


# ---- over the whole corpus ---------------------------------------------------------------------


def test_whole_corpus_run_left_memory_and_files_bounded(run: CorpusRun) -> None:
    if len(run.ran) < len(CORPUS):
        pytest.skip("only meaningful after every corpus entry ran in this session (run the whole module)")
    growth_mb = (run.peak_rss_kb - run.baseline_rss_kb) / 1024
    print(
        f"\nhostile corpus: {len(CORPUS)} entries; peak RSS growth {growth_mb:.0f} MB; "
        f"slowest timeout entry {max(run.timeout_wall_s):.3f} s (limit {TIME_LIMIT_S:g} s)"
    )
    assert growth_mb < MAX_RSS_GROWTH_MB
    assert max(run.timeout_wall_s) <= TIME_LIMIT_S * TIME_MARGIN
    assert list(run.tmp.iterdir()) == [], "ATTACH / VACUUM INTO / writefile created a file"
