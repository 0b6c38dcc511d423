"""The schema-shown control (`EnvConfig.show_schema`).

What must hold: the first observation's `schema_info` is the table list line as always, a blank
line, then one CREATE TABLE statement per table, rendered from SQLite's PRAGMAs; executed in an
empty database those statements make the same columns, types, primary keys and foreign keys as
the file (every Spider dev database, and the demo's); later observations, rewards, budget and
verdicts are those of the hidden-schema environment; every consumer that reads the table list
keeps working; the chat prompt says where the schema is; the option reaches the environment from
the CLI, a server (WebSocket sessions, one worker or several), the MCP server and a training
config; and a run with the schema shown is never continued from, summarised with or compared as a
hidden-schema run.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sqlenv import SQLAction, SQLEnvironment
from sqlenv.agents.policy import table_list_line, table_names
from sqlenv.agents.prompts import (
    SCHEMA_SHOWN_SYSTEM_PROMPT,
    SQL_ANSWER_SCHEMA_SHOWN_SYSTEM_PROMPT,
    SQL_ANSWER_SYSTEM_PROMPT,
    SYSTEM_PROMPT,
    question_message,
    system_message,
)
from sqlenv.agents.reference import OraclePolicy, RandomPolicy
from sqlenv.cli import app
from sqlenv.config import EnvConfig
from sqlenv.evaluation import evaluate
from sqlenv.sandbox.schema import DatabaseCatalog, catalog_for

SHOWN = EnvConfig(show_schema=True)


def spider_dev_databases(spider_dir: Path) -> list[Path]:
    """The files of Spider dev's databases that the release holds (it lacks wta_1)."""
    dev = {q["db_id"] for q in json.loads((spider_dir / "dev.json").read_text(encoding="utf-8"))}
    files = [spider_dir / "database" / db / f"{db}.sqlite" for db in sorted(dev)]
    return [f for f in files if f.is_file()]


def statements(schema_text: str) -> list[str]:
    """The CREATE TABLE lines of a shown schema, after its table list line and blank line."""
    head, blank, *rest = schema_text.split("\n")
    assert head.startswith("Tables: ") and blank == ""
    return rest


# ---- the rendering -----------------------------------------------------------------------------


def test_a_demo_database_is_shown_as_one_create_table_statement_per_table(demo_dataset) -> None:
    catalog = catalog_for(demo_dataset.db_path("library"))
    assert catalog.schema_text == (
        "Tables: authors, books, loans, members\n"
        "\n"
        "CREATE TABLE authors (author_id INTEGER PRIMARY KEY, name TEXT, birth_year INTEGER, nationality TEXT);\n"
        "CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT, author_id INTEGER, genre TEXT, "
        "published_year INTEGER, pages INTEGER, price REAL, FOREIGN KEY (author_id) REFERENCES authors(author_id));\n"
        "CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, book_id INTEGER, member_id INTEGER, loan_date TEXT, "
        "due_date TEXT, return_date TEXT, fine REAL, FOREIGN KEY (book_id) REFERENCES books(book_id), "
        "FOREIGN KEY (member_id) REFERENCES members(member_id));\n"
        "CREATE TABLE members (member_id INTEGER PRIMARY KEY, first_name TEXT, last_name TEXT, email TEXT, "
        "city TEXT, joined_date TEXT, membership_type TEXT);"
    )


def test_a_spider_database_shows_composite_keys_and_foreign_keys(spider_dir: Path) -> None:
    path = spider_dir / "database" / "concert_singer" / "concert_singer.sqlite"
    assert statements(DatabaseCatalog.open(path).schema_text) == [
        "CREATE TABLE concert (concert_ID INT PRIMARY KEY, concert_Name TEXT, Theme TEXT, Stadium_ID TEXT, "
        "Year TEXT, FOREIGN KEY (Stadium_ID) REFERENCES stadium(Stadium_ID));",
        "CREATE TABLE singer (Singer_ID INT PRIMARY KEY, Name TEXT, Country TEXT, Song_Name TEXT, "
        "Song_release_year TEXT, Age INT, Is_male bool);",
        "CREATE TABLE singer_in_concert (concert_ID INT, Singer_ID TEXT, PRIMARY KEY (concert_ID, Singer_ID), "
        "FOREIGN KEY (concert_ID) REFERENCES concert(concert_ID), "
        "FOREIGN KEY (Singer_ID) REFERENCES singer(Singer_ID));",
        "CREATE TABLE stadium (Stadium_ID INT PRIMARY KEY, Location TEXT, Name TEXT, Capacity INT, "
        "Highest INT, Lowest INT, Average INT);",
    ]
    # A name that is not a plain word is quoted, so the statement stays valid SQL.
    orchestra = spider_dir / "database" / "orchestra" / "orchestra.sqlite"
    assert '"Official_ratings_(millions)" REAL' in DatabaseCatalog.open(orchestra).schema_text


def _structure(conn: sqlite3.Connection, table: str) -> tuple[object, ...]:
    """What the shown schema must carry of a table: columns (name, declared type, key position)
    and foreign keys (as sets of (parent table, from, to) column pairs per constraint)."""
    q = '"' + table.replace('"', '""') + '"'
    columns = [
        (name, declared, pk)
        for _cid, name, declared, _nn, _default, pk in conn.execute(f"PRAGMA table_info({q})")
    ]
    constraints: dict[int, list[tuple[str, str, str | None]]] = {}
    for row in conn.execute(f"PRAGMA foreign_key_list({q})"):
        constraints.setdefault(row[0], []).append((row[2], row[3], row[4]))
    return tuple(columns), sorted(sorted(pairs) for pairs in constraints.values())


def test_the_shown_statements_rebuild_every_spider_dev_database_and_the_demos(
    spider_dir: Path, demo_dataset
) -> None:
    files = spider_dev_databases(spider_dir) + [
        demo_dataset.db_path(db) for db in ("library", "bikeshare", "retail")
    ]
    assert len(files) == 22  # 19 Spider dev databases (wta_1 is not in the release) and 3 demo ones
    shown_chars = stored_chars = 0
    for path in files:
        catalog = DatabaseCatalog.open(path)
        text = catalog.schema_text
        assert table_list_line(text) == catalog.table_list_text
        lines = statements(text)
        assert len(lines) == len(catalog.tables)
        with (
            closing(sqlite3.connect(":memory:")) as rebuilt,
            closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as original,
        ):
            for table, line in zip(catalog.tables, lines, strict=True):
                assert line.startswith("CREATE TABLE ") and line.endswith(");"), line
                rebuilt.execute(line)  # one valid statement per line, in the table list's order
                assert _structure(rebuilt, table) == _structure(original, table), (path.name, table)
            stored = [
                sql
                for (sql,) in original.execute(
                    "SELECT sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                )
            ]
        if path.parent.parent.name == "database":
            shown_chars += sum(len(line) for line in lines)
            stored_chars += sum(len(sql) for sql in stored)
    # Compact: shorter than what SQLite stores (docs/environment.md has the numbers).
    assert shown_chars < 0.9 * stored_chars


def test_the_size_script_prints_the_numbers_environment_md_quotes(spider_dir: Path) -> None:
    import subprocess
    import sys

    from conftest import REPO_ROOT

    script = REPO_ROOT / "scripts" / "shown_schema_sizes.py"
    result = subprocess.run(
        [sys.executable, str(script), "--spider-dir", str(spider_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines() if line.strip()}
    assert rows["median"] == ["637", "707"] and rows["largest"] == ["2,839", "3,002"]
    assert rows["total"] == ["15,730", "17,575"] and rows["19"] == ["databases"]
    docs = (REPO_ROOT / "docs" / "environment.md").read_text(encoding="utf-8")
    assert "| median database | 637 | 139 | 707 | 199 |" in docs
    assert "| largest (`student_transcripts_tracking`) | 2,839 | 643 | 3,002 | 838 |" in docs


def test_the_shown_schema_is_built_once_per_database(demo_dataset) -> None:
    catalog = DatabaseCatalog.open(demo_dataset.db_path("retail"))
    assert not catalog.is_schema_cached()
    first = catalog.schema_text
    assert catalog.is_schema_cached()
    assert catalog.schema_text is first


# ---- the environment ---------------------------------------------------------------------------


def test_only_the_first_observation_carries_the_schema(demo_dataset) -> None:
    hidden = SQLEnvironment(dataset=demo_dataset, split="train")
    shown = SQLEnvironment(dataset=demo_dataset, split="train", config=SHOWN)
    record = demo_dataset.get("demo-0011")
    before, after = hidden.reset(question_id=record.question_id), shown.reset(question_id=record.question_id)
    assert before.schema_info == "Tables: authors, books, loans, members"
    assert before.metadata["show_schema"] is False and after.metadata["show_schema"] is True
    assert after.schema_info == catalog_for(demo_dataset.db_path(record.db_id)).schema_text
    assert table_list_line(after.schema_info) == before.schema_info
    assert (after.question, after.budget_remaining, after.step_count) == (before.question, 15, 0)
    for action in (
        SQLAction(action_type="DESCRIBE", argument="loans"),
        SQLAction(action_type="QUERY", argument=record.gold_sql),
        SQLAction(action_type="ANSWER", argument="14"),
    ):
        before, after = hidden.step(action), shown.step(action)
        assert after.schema_info == before.schema_info == "Tables: authors, books, loans, members"
        assert after.metadata["show_schema"] is True
    assert after.done and after.metadata["correct"] is True


def _outcomes(result) -> list[tuple[object, ...]]:
    return [
        (e.question_id, e.success, e.total_reward, e.steps, e.actions, e.verdict) for e in result.episodes
    ]


@pytest.mark.parametrize("answer_mode", ["value", "sql"])
def test_rewards_budget_and_verdicts_are_those_of_the_hidden_schema(demo_dataset, answer_mode: str) -> None:
    """The oracle and the random policy (which reads the table names from schema_info) play the
    same episodes with the same rewards, whether the schema is shown or not."""
    hidden = SQLEnvironment(dataset=demo_dataset, split="eval", config=EnvConfig(answer_mode=answer_mode))
    shown = SQLEnvironment(
        dataset=demo_dataset, split="eval", config=EnvConfig(answer_mode=answer_mode, show_schema=True)
    )
    oracle = evaluate(shown, OraclePolicy(demo_dataset))
    assert oracle.success_rate == 1.0 and oracle.show_schema and all(e.show_schema for e in oracle.episodes)
    assert _outcomes(oracle) == _outcomes(evaluate(hidden, OraclePolicy(demo_dataset)))
    random_shown = evaluate(shown, RandomPolicy(seed=0), n_episodes=60, seed=0)
    random_hidden = evaluate(hidden, RandomPolicy(seed=0), n_episodes=60, seed=0)
    assert _outcomes(random_shown) == _outcomes(random_hidden)
    assert not random_hidden.show_schema
    # The random policy explored real tables: table_names read the list line, not the statements.
    described = {
        a.split(" ", 1)[1]
        for e in random_shown.episodes
        for a in e.actions
        if a.startswith(("DESCRIBE", "SAMPLE"))
    }
    assert described and described <= {
        t for db in ("library", "bikeshare", "retail") for t in catalog_for(demo_dataset.db_path(db)).tables
    }


def test_a_show_schema_that_is_not_a_bool_is_refused() -> None:
    with pytest.raises(ValueError, match="show_schema must be true or false, not 'yes'"):
        EnvConfig(show_schema="yes")  # type: ignore[arg-type]


# ---- what reads schema_info --------------------------------------------------------------------


def test_the_table_list_readers_see_the_same_tables(demo_dataset, spider10) -> None:
    from sqlenv.agents.solved_examples import SolvedExamples

    for dataset, split in ((demo_dataset, "eval"), (spider10, "eval")):
        hidden = SQLEnvironment(dataset=dataset, split=split)
        shown = SQLEnvironment(dataset=dataset, split=split, config=SHOWN)
        examples = SolvedExamples(dataset, 3)
        for record in dataset.split(split)[:40]:
            before, after = (
                hidden.reset(question_id=record.question_id),
                shown.reset(question_id=record.question_id),
            )
            assert "CREATE TABLE" in after.schema_info
            assert (
                table_names(after)
                == table_names(before)
                == list(catalog_for(dataset.db_path(record.db_id)).tables)
            )
            found = examples.for_observation(after)
            assert found == examples.for_observation(before)
            assert found and all(e.db_id == record.db_id for e in found)


def test_the_chat_prompt_says_where_the_schema_is(demo_dataset) -> None:
    for answer_mode, hidden_template, shown_template in (
        ("value", SYSTEM_PROMPT, SCHEMA_SHOWN_SYSTEM_PROMPT),
        ("sql", SQL_ANSWER_SYSTEM_PROMPT, SQL_ANSWER_SCHEMA_SHOWN_SYSTEM_PROMPT),
    ):
        hidden = SQLEnvironment(dataset=demo_dataset, config=EnvConfig(answer_mode=answer_mode)).reset(seed=1)
        shown = SQLEnvironment(
            dataset=demo_dataset, config=EnvConfig(answer_mode=answer_mode, show_schema=True)
        ).reset(seed=1)
        assert system_message(hidden)["content"] == hidden_template.format(budget=15)
        text = system_message(shown)["content"]
        assert text == shown_template.format(budget=15)
        assert (
            "cannot see" not in text
            and "schema (one CREATE TABLE statement per table) is given in the question message" in text
        )
        assert "You can still explore it with the tools" in text and "describe(table_name)" in text
        # The answer format is the answer mode's, as without the schema.
        assert text.split("Answer format: ")[1] == hidden_template.split("Answer format: ")[1]
        assert question_message(shown)["content"] == f"Question: {shown.question}\n{shown.schema_info}"


def test_sft_trajectories_and_grpo_prompts_with_the_schema_shown(demo_dataset, tmp_path: Path) -> None:
    from sqlenv.training.config import load_config
    from sqlenv.training.grpo import grpo_rows
    from sqlenv.training.sft_data import oracle_conversations

    hidden = oracle_conversations(demo_dataset, seed=2, max_examples=6, mistake_rate=0.5)
    shown = oracle_conversations(demo_dataset, seed=2, max_examples=6, mistake_rate=0.5, config=SHOWN)
    assert len(shown) == 6
    for before, after in zip(hidden, shown, strict=True):
        assert after[0]["content"] == SCHEMA_SHOWN_SYSTEM_PROMPT.format(budget=15)
        assert "\n\nCREATE TABLE " in after[1]["content"]
        assert after[2:] == before[2:]  # the same plan, the same tool results
    row = grpo_rows(demo_dataset, curriculum=["easy"], config=SHOWN)[0]
    assert row["prompt"][0]["content"] == SCHEMA_SHOWN_SYSTEM_PROMPT.format(budget=15)
    assert "\n\nCREATE TABLE " in row["prompt"][1]["content"]

    config_file = tmp_path / "c.yaml"
    config_file.write_text("show_schema: true\nanswer_mode: sql\n")
    assert load_config(config_file).env_config == EnvConfig(answer_mode="sql", show_schema=True)
    config_file.write_text("answer_mode: sql\n")
    assert load_config(config_file).env_config.show_schema is False
    config_file.write_text("show_schema: 'yes'\n")
    with pytest.raises(ValueError, match="show_schema: expected true or false, got 'yes'"):
        load_config(config_file)


def test_play_shows_the_schema_in_the_terminal() -> None:
    from test_play import run_play

    out = run_play(["describe books", "quit"], "--question-id", "demo-0000", "--show-schema")
    assert "Tables: authors, books, loans, members" in out
    assert "CREATE TABLE books (book_id INTEGER PRIMARY KEY" in out
    assert "table books" in out and "14 steps left" in out
    refused = CliRunner().invoke(app, ["play", "--url", "http://127.0.0.1:1", "--show-schema"])
    assert refused.exit_code == 2 and "the server decides whether the schema is shown" in " ".join(
        refused.output.split()
    )


# ---- the CLI, reports, journals ----------------------------------------------------------------


def test_eval_show_schema_reaches_the_environment_and_the_report(tmp_path: Path) -> None:
    runner = CliRunner()
    report = tmp_path / "report"
    result = runner.invoke(
        app,
        [
            "eval",
            "--show-schema",
            "--answer-mode",
            "sql",
            "--policy",
            "oracle",
            "--dataset",
            "demo",
            "--report",
            str(report),
            "--json",
            str(tmp_path / "out.json"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "execution accuracy (SQL answers, schema shown)" in " ".join(result.output.split())
    saved = json.loads((tmp_path / "out.json").read_text())
    assert saved["show_schema"] is True and saved["success_rate"] == 1.0
    assert all(e["show_schema"] for e in saved["episodes"])
    summary = (report / "summary.md").read_text()
    assert summary.startswith("# oracle on demo/eval (SQL answers, schema shown)\n")
    assert "The schema was shown" in summary
    plain = runner.invoke(
        app, ["eval", "--policy", "oracle", "--dataset", "demo", "--json", str(tmp_path / "plain.json")]
    )
    assert plain.exit_code == 0, plain.output
    assert json.loads((tmp_path / "plain.json").read_text())["show_schema"] is False


def test_compare_with_the_schema_shown(tmp_path: Path) -> None:
    from sqlenv.evaluation.reports import write_comparison

    result = CliRunner().invoke(
        app,
        [
            "compare",
            "--show-schema",
            "--policies",
            "random,oracle",
            "--dataset",
            "demo",
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "success rate (schema shown)" in " ".join(result.output.split())
    assert json.loads((tmp_path / "compare.json").read_text())["show_schema"] is True
    # A hidden-schema result is never compared as one of the control's.
    env_shown = SQLEnvironment(dataset="demo", split="eval", config=SHOWN)
    env_hidden = SQLEnvironment(dataset="demo", split="eval")
    mixed = [evaluate(env_shown, RandomPolicy(seed=0)), evaluate(env_hidden, RandomPolicy(seed=0))]
    with pytest.raises(ValueError, match="played with the schema shown and the others without"):
        write_comparison(mixed, tmp_path / "mixed")


def test_a_journal_of_one_setting_is_never_continued_in_the_other(demo_dataset, tmp_path: Path) -> None:
    journal = tmp_path / "oracle.jsonl"
    hidden = SQLEnvironment(dataset=demo_dataset, split="eval")
    shown = SQLEnvironment(dataset=demo_dataset, split="eval", config=SHOWN)
    evaluate(shown, OraclePolicy(demo_dataset), n_episodes=4, journal=journal)
    assert json.loads(journal.read_text().splitlines()[0])["show_schema"] is True
    with pytest.raises(ValueError, match=r"journal of another run: show_schema True \(this run: False\)"):
        evaluate(hidden, OraclePolicy(demo_dataset), n_episodes=4, journal=journal)
    with pytest.raises(ValueError, match=r"show_schema True \(this run: False\)"):
        evaluate(hidden, OraclePolicy(demo_dataset), n_episodes=4, journal=journal, play=False)
    continued = evaluate(shown, OraclePolicy(demo_dataset), n_episodes=4, journal=journal)
    assert continued.journal_episodes == 4 and continued.show_schema

    # A journal written before the header named the setting was a hidden-schema run's.
    old = tmp_path / "old.jsonl"
    evaluate(hidden, OraclePolicy(demo_dataset), n_episodes=2, journal=old)
    header, *entries = old.read_text().splitlines()
    legacy = json.loads(header)
    del legacy["show_schema"]
    old.write_text("\n".join([json.dumps(legacy), *entries]) + "\n")
    assert evaluate(hidden, OraclePolicy(demo_dataset), n_episodes=2, journal=old).journal_episodes == 2
    with pytest.raises(ValueError, match=r"show_schema False \(this run: True\)"):
        evaluate(shown, OraclePolicy(demo_dataset), n_episodes=2, journal=old)


def test_episodes_of_both_settings_are_never_summarised_together(demo_dataset) -> None:
    from sqlenv.evaluation.records import summarise

    played = evaluate(
        SQLEnvironment(dataset=demo_dataset, split="eval"), OraclePolicy(demo_dataset), n_episodes=2
    )
    episodes = [played.episodes[0], replace(played.episodes[1], show_schema=True)]
    with pytest.raises(ValueError, match="some episodes were shown the schema and some were not"):
        summarise("oracle", "demo", "eval", episodes)


# ---- the server and MCP ------------------------------------------------------------------------


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_server_session_shows_the_schema_and_eval_refuses_a_mismatch(workers: str, demo_dataset) -> None:
    from conftest import RunningServer
    from sqlenv.server.client import RemoteSQLEnvironment

    server = RunningServer("--dataset", "demo", "--split", "eval", "--show-schema", "--workers", workers)
    try:
        with RemoteSQLEnvironment(server.url, demo_dataset, "eval") as env:
            first = env.reset(question_id="demo-0003")
            assert first.metadata["show_schema"] is True
            assert first.schema_info == catalog_for(demo_dataset.db_path(first.metadata["db_id"])).schema_text
            later = env.step(SQLAction(action_type="DESCRIBE", argument=table_names(first)[0]))
            assert later.schema_info == table_list_line(first.schema_info) and not later.error
        runner = CliRunner()
        played = runner.invoke(
            app, ["eval", "--policy", "oracle", "--dataset", "demo", "--url", server.url, "--show-schema"]
        )
        assert played.exit_code == 0, played.output
        assert "schema shown" in played.output and "1.000" in played.output
        mismatch = runner.invoke(
            app, ["eval", "--policy", "oracle", "--dataset", "demo", "--url", server.url]
        )
        assert mismatch.exit_code == 2
        assert "shows the schema: pass --show-schema" in " ".join(mismatch.output.split())
    finally:
        server.stop()


def test_a_hidden_schema_server_refuses_a_show_schema_eval(demo_server) -> None:
    refused = CliRunner().invoke(
        app,
        [
            "eval",
            "--policy",
            "oracle",
            "--dataset",
            "demo",
            "--split",
            "train",
            "--url",
            demo_server.url,
            "--show-schema",
        ],
    )
    assert refused.exit_code == 2
    assert "hides the schema: serve with --show-schema" in " ".join(refused.output.split())


def test_over_mcp_start_episode_shows_the_schema(demo_dataset) -> None:
    from test_mcp import call, in_process_rewards, play_oracle, stdio_session

    async def play() -> None:
        async with stdio_session("--show-schema", "--split", "eval") as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert "CREATE TABLE statement" in tools["start_episode"].description
            first, *later = await play_oracle(session, demo_dataset, "demo-0003")
            assert first.metadata["show_schema"] is True
            assert first.schema_info == catalog_for(demo_dataset.db_path(first.metadata["db_id"])).schema_text
            assert all(o.schema_info == table_list_line(first.schema_info) for o in later)
            assert later[-1].metadata["correct"] is True
            assert [o.reward for o in later] == in_process_rewards(demo_dataset, "demo-0003")
        async with stdio_session() as session:
            first = await call(session, "start_episode", question_id="demo-0000")
            assert first["metadata"]["show_schema"] is False and "\n" not in first["schema_info"]

    asyncio.run(play())


def test_the_web_page_lists_the_tables_and_shows_the_statements(demo_dataset) -> None:
    """In a real Chromium: the table buttons come from the first line alone, and the statements
    are shown beside them."""
    from conftest import RunningServer
    from test_web import CHROMIUM, LAUNCH_FLAGS, playwright_api

    if not Path(CHROMIUM).exists():
        import os

        message = "Debian chromium is not installed (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    server = RunningServer("--dataset", "demo", "--split", "train", "--show-schema")
    try:
        with playwright_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_FLAGS)
            page = browser.new_page()
            page.goto(server.url + "/web")
            page.wait_for_selector("#question-select option[value='demo-0000']", state="attached")
            page.select_option("#question-select", "demo-0000")
            page.click("#new-episode")
            page.wait_for_function("document.querySelector('#budget').textContent === '15'")
            names = page.locator("#tables .table-row .name").all_inner_texts()
            assert names == ["authors", "books", "loans", "members"]
            shown = page.inner_text("#schema")
            assert shown == "\n".join(statements(catalog_for(demo_dataset.db_path("library")).schema_text))
            page.click("#tables button[data-kind='DESCRIBE'][data-table='books']")
            page.wait_for_function("document.querySelector('#budget').textContent === '14'")
            assert "table books" in page.inner_text("#result")
            browser.close()
    finally:
        server.stop()
