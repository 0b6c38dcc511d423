"""The two answer modes.

Value mode: a table answer may give its columns in any order (Spider's execution match accepts
that; a question rarely fixes it), but one order must fit every row. SQL mode
(`EnvConfig.answer_mode="sql"`): ANSWER is a read-only statement run in the sandbox and graded by
execution match, checked here against an independent implementation of Spider's rule on pairs
of Spider's own queries, and end to end with the oracle, the random policy and the CLI.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp
from typer.testing import CliRunner

from sqlenv import SQLAction, SQLEnvironment
from sqlenv.agents.reference import OraclePolicy, RandomPolicy
from sqlenv.cli import app
from sqlenv.config import EnvConfig
from sqlenv.env.verifier import execution_match, verify_answer
from sqlenv.evaluation import evaluate

SQL_MODE = EnvConfig(answer_mode="sql")


def accepts(answer: str, gold: list[list[object]], ordered: bool = False) -> bool:
    return verify_answer(answer, [tuple(r) for r in gold], "table", ordered).correct


# ---- value mode: column order ----------------------------------------------------------------

PEOPLE = [["Alice", 30, "Paris"], ["Bob", 25, "Rome"], ["Carol", 41, "Oslo"]]


@pytest.mark.parametrize("ordered", [False, True])
@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_value_mode_accepts_every_permutation_of_the_columns(order: tuple[int, ...], ordered: bool) -> None:
    permuted = [[row[i] for i in order] for row in PEOPLE]
    assert accepts(str(permuted).replace("'", '"'), PEOPLE, ordered)
    pipes = "\n".join(" | ".join(str(c) for c in row) for row in permuted)
    assert accepts(pipes, PEOPLE, ordered)


def test_a_single_row_answer_may_swap_its_columns() -> None:
    assert accepts("30, Alice", [["Alice", 30]])
    assert not accepts("31, Alice", [["Alice", 30]])


def test_permuted_columns_keep_the_other_rules() -> None:
    # Rows in another order: only without ORDER BY, as for the gold's own column order.
    shuffled = [[row[2], row[0], row[1]] for row in reversed(PEOPLE)]
    text = str(shuffled).replace("'", '"')
    assert accepts(text, PEOPLE, ordered=False)
    assert not accepts(text, PEOPLE, ordered=True)
    # Duplicated rows are counted: a bag, not a set.
    gold = [["a", 1], ["a", 1], ["b", 2]]
    assert accepts('[[1, "a"], [1, "a"], [2, "b"]]', gold)
    assert not accepts('[[1, "a"], [2, "b"], [2, "b"]]', gold)
    assert not accepts('[[1, "a"], [2, "b"]]', gold)
    # Cell types still follow the gold column the answer column is put in: 1 % on floats.
    floats = [["x", 2.0], ["y", 100.0]]
    assert accepts('[[2.01, "x"], [100.9, "y"]]', floats)
    assert not accepts('[[2.1, "x"], [100.0, "y"]]', floats)


def test_a_permutation_that_fits_each_column_but_not_the_rows_is_wrong() -> None:
    # Every answer column holds the values of some gold column, but pairing them up breaks rows.
    gold = [["a", 1], ["b", 2]]
    assert not accepts('[[1, "b"], [2, "a"]]', gold)
    # Two columns of equal values make two orders fit column by column; neither fits the rows.
    gold = [[1, 2, "x"], [2, 1, "y"]]
    assert accepts('[["x", 1, 2], ["y", 2, 1]]', gold)
    assert not accepts('[["x", 2, 1], ["y", 2, 1]]', gold)
    assert not accepts('[["y", 1, 2], ["x", 2, 1]]', gold, ordered=True)


def test_a_wide_table_of_interchangeable_columns_is_still_graded() -> None:
    gold = [[1] * 8, [2] * 8]
    assert accepts("[[2, 2, 2, 2, 2, 2, 2, 2], [1, 1, 1, 1, 1, 1, 1, 1]]", gold)
    assert not accepts("[[2, 2, 2, 2, 2, 2, 2, 1], [1, 1, 1, 1, 1, 1, 1, 2]]", gold)


# ---- execution_match on its own --------------------------------------------------------------


def test_execution_match_rules() -> None:
    gold = [("a", 1), ("b", 2)]
    assert execution_match([("a", 1), ("b", 2)], gold, ordered=True)
    assert execution_match([(1, "a"), (2, "b")], gold, ordered=True)  # columns in any order
    assert execution_match([("b", 2), ("a", 1)], gold, ordered=False)
    assert not execution_match([("b", 2), ("a", 1)], gold, ordered=True)
    assert not execution_match([("a", 1), ("a", 1)], gold, ordered=False)  # a bag of rows
    assert not execution_match([(1, "b"), (2, "a")], gold, ordered=False)  # columns fit, rows do not
    assert not execution_match([("A", 1), ("b", 2)], gold, ordered=False)  # exact, unlike value mode
    assert execution_match([(1.0,)], [(1,)], ordered=False)  # SQLite's 1 and 1.0 are equal
    assert not execution_match([(1.0001,)], [(1,)], ordered=False)  # no tolerance
    assert execution_match([], [], ordered=True)
    assert not execution_match([("a", 1, None)], [("a", 1)], ordered=False)


# ---- SQL mode in the environment -------------------------------------------------------------


def test_sql_mode_grades_the_answers_query_and_never_writes(demo_dataset) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="train", config=SQL_MODE)
    record = demo_dataset.get("demo-0000")
    db = demo_dataset.db_path(record.db_id)
    before = db.read_bytes()

    def answer(sql: str) -> tuple[bool, str, float]:
        observation = env.reset(question_id=record.question_id)
        assert observation.metadata["answer_mode"] == "sql"
        observation = env.step(SQLAction(action_type="ANSWER", argument=sql))
        assert observation.done
        return observation.metadata["correct"], observation.result, observation.reward

    assert answer(record.gold_sql) == (True, "correct: the query's result matches the gold result", 1.0)
    assert answer(f"SELECT * FROM ({record.gold_sql})")[0]  # another query, the same result
    correct, reason, reward = answer("SELECT 12345")
    assert not correct and reward == 0.0 and reason.startswith("wrong")
    correct, reason, _ = answer("DELETE FROM books")
    assert not correct and "did not run" in reason and "not allowed: DELETE" in reason
    correct, reason, _ = answer("SELECT nonsense FROM nowhere")
    assert not correct and "did not run" in reason
    correct, reason, _ = answer("   ")
    assert not correct and "one read-only SQL statement" in reason
    # A value is not an answer in this mode, even the right one.
    gold_value = str(record.gold_answer[0][0])
    assert not answer(gold_value)[0]
    assert db.read_bytes() == before


def test_sql_mode_oracle_and_random_on_the_demo_set_keep_the_reward_invariants(demo_dataset) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="eval", config=SQL_MODE)
    oracle = evaluate(env, OraclePolicy(demo_dataset))
    assert oracle.success_rate == 1.0 and oracle.answer_mode == "sql"
    assert all(1.0 <= e.total_reward <= 1.3 for e in oracle.episodes)
    random_result = evaluate(env, RandomPolicy(seed=0), n_episodes=200, seed=0)
    assert random_result.success_rate <= 0.02
    assert random_result.avg_reward <= 0.3
    assert all(e.total_reward < 1.0 for e in random_result.episodes if not e.success)


def test_the_value_mode_oracle_answer_is_wrong_in_sql_mode_and_the_reverse(demo_dataset) -> None:
    """The oracle follows the mode the observation names; the other mode's answer fails."""
    record = demo_dataset.get("demo-0001")
    for config, wrong_answer in ((SQL_MODE, '["x"]'), (EnvConfig(), record.gold_sql)):
        env = SQLEnvironment(dataset=demo_dataset, split="train", config=config)
        env.reset(question_id=record.question_id)
        observation = env.step(SQLAction(action_type="ANSWER", argument=wrong_answer))
        assert observation.metadata["correct"] is False


def test_an_unknown_answer_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="answer_mode must be one of value, sql"):
        EnvConfig(answer_mode="python")  # type: ignore[arg-type]


# ---- SQL mode against an independent execution match on Spider's queries ---------------------


def spider_execution_match(db: Path, gold_sql: str, predicted_sql: str) -> bool:
    """Spider's execution match written from its definition, independently of sqlenv: run both
    queries on the file with plain sqlite3; equal when some order of the prediction's columns
    gives the gold rows, as a list when the gold query says ORDER BY, else as a bag."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        try:
            predicted = connection.execute(predicted_sql).fetchall()
        except sqlite3.Error:
            return False
        gold = connection.execute(gold_sql).fetchall()
    finally:
        connection.close()
    if not gold and not predicted:
        return True
    if len(gold) != len(predicted) or len(gold[0]) != len(predicted[0]):
        return False
    order_matters = "order by" in gold_sql.lower()
    for order in itertools.permutations(range(len(gold[0]))):
        moved = [tuple(row[i] for i in order) for row in predicted]
        if (moved == gold) if order_matters else (Counter(moved) == Counter(gold)):
            return True
    return False


def query_variants(sql: str) -> list[str]:
    """Other queries built from a gold query: its columns reversed, DISTINCT added, its ORDER BY
    reversed, its LIMIT changed. Some give the same result, most do not."""
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except sqlglot.errors.ParseError:
        return []
    if not isinstance(tree, exp.Select):
        return []
    variants = []
    if len(tree.expressions) > 1:
        reversed_columns = tree.copy()
        reversed_columns.set("expressions", list(reversed(tree.expressions)))
        variants.append(reversed_columns)
    distinct = tree.copy()
    distinct.set("distinct", exp.Distinct())
    variants.append(distinct)
    if tree.args.get("order"):
        flipped = tree.copy()
        for ordered in flipped.args["order"].expressions:
            ordered.set("desc", not ordered.args.get("desc"))
        variants.append(flipped)
    if tree.args.get("limit"):
        more = tree.copy()
        more.set("limit", exp.Limit(expression=exp.Literal.number(3)))
        variants.append(more)
    return [v.sql(dialect="sqlite") for v in variants]


def test_sql_mode_verdicts_equal_an_independent_execution_match_on_spider_queries(spider10) -> None:
    env = SQLEnvironment(dataset=spider10, split="eval", config=SQL_MODE)
    questions = spider10.split("eval")
    by_db: dict[str, list[str]] = {}
    for record in spider10.split("train"):
        by_db.setdefault(record.db_id, []).append(record.gold_sql)
    verdicts: list[tuple[bool, bool]] = []
    mismatches = []
    order_rule_differs = 0
    for index, record in enumerate(questions):
        others = by_db.get(record.db_id, [])
        candidates = [record.gold_sql, *query_variants(record.gold_sql)]
        if others:  # another question's query on the same database (rarely the same result)
            candidates.append(others[index % len(others)])
        for sql in candidates:
            # Spider decides order by "order by" anywhere in the gold query, sqlenv by an ORDER BY
            # of the outer query: the pairs where those differ are not the comparison's business.
            if record.order_sensitive != ("order by" in record.gold_sql.lower()):
                order_rule_differs += 1
                continue
            env.reset(question_id=record.question_id)
            observation = env.step(SQLAction(action_type="ANSWER", argument=sql))
            ours = bool(observation.metadata["correct"])
            theirs = spider_execution_match(spider10.db_path(record.db_id), record.gold_sql, sql)
            verdicts.append((ours, theirs))
            if ours != theirs:
                mismatches.append((record.question_id, sql, ours, theirs, observation.result))
    assert len(verdicts) >= 200
    assert sum(t for _, t in verdicts) >= 50 and sum(not t for _, t in verdicts) >= 50  # both kinds
    assert order_rule_differs < len(verdicts) // 10
    assert mismatches == []


# ---- the CLI -----------------------------------------------------------------------------------


def test_eval_answer_mode_sql_reports_execution_accuracy(spider_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    report = tmp_path / "report"
    result = runner.invoke(
        app,
        [
            "eval", "--answer-mode", "sql", "--policy", "oracle,random", "--dataset", "spider10",
            "--split", "eval", "--spider-dir", str(spider_dir), "--report", str(report),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "execution accuracy" in result.output
    oracle_summary = (report / "oracle" / "summary.md").read_text()
    assert "| execution accuracy | 1.000 |" in oracle_summary
    assert "(SQL answers)" in oracle_summary
    random_summary = (report / "random" / "summary.md").read_text()
    rate = float(random_summary.split("| execution accuracy | ")[1].split(" |")[0])
    assert rate <= 0.02


# ---- the TRL adapter --------------------------------------------------------------------------


def test_the_trl_adapter_in_sql_mode_asks_for_a_statement_and_grades_it(demo_dataset) -> None:
    from sqlenv.training.trl_env import SQLEnvTRL

    env = SQLEnvTRL(demo_dataset, split="train", config=SQL_MODE)
    assert "SELECT statement" in env.answer.__doc__
    assert "SELECT statement" not in SQLEnvTRL(demo_dataset, split="train").answer.__doc__
    record = demo_dataset.get("demo-0002")
    env.reset(question_id=record.question_id)
    env.query(record.gold_sql)
    env.answer(record.gold_sql)
    assert env.correct and env.get_reward() >= 1.0
    env.reset(question_id=record.question_id)
    from sqlenv.env.verifier import format_answer

    env.answer(format_answer(record.gold_answer, record.answer_type))  # a value, not a statement
    assert not env.correct and env.get_reward() < 1.0


# ---- the server --------------------------------------------------------------------------------


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_server_in_sql_mode_grades_sql_and_eval_refuses_a_mode_mismatch(workers: str) -> None:
    from conftest import RunningServer

    server = RunningServer("--dataset", "demo", "--split", "eval", "--answer-mode", "sql", "--workers", workers)
    try:
        runner = CliRunner()
        played = runner.invoke(
            app, ["eval", "--policy", "oracle", "--dataset", "demo", "--url", server.url, "--answer-mode", "sql"]
        )
        assert played.exit_code == 0, played.output
        assert "execution accuracy" in played.output and "1.000" in played.output
        mismatch = runner.invoke(app, ["eval", "--policy", "oracle", "--dataset", "demo", "--url", server.url])
        assert mismatch.exit_code == 2
        assert "grades answers in mode 'sql', not 'value'" in " ".join(mismatch.output.split())
    finally:
        server.stop()


# ---- training in SQL-answer mode -------------------------------------------------------------


def test_training_in_sql_mode_teaches_sql_answers_with_the_sql_tools(demo_dataset, tmp_path: Path) -> None:
    from sqlenv.agents.tools import SQL_ANSWER_TOOLS
    from sqlenv.training.config import load_config
    from sqlenv.training.grpo import grpo_rows
    from sqlenv.training.models import load_tokenizer
    from sqlenv.training.sft_data import oracle_conversations, sft_dataset

    conversations = oracle_conversations(demo_dataset, max_examples=8, config=SQL_MODE)
    assert len(conversations) == 8
    for conversation in conversations:
        answer_call = [m for m in conversation if m.get("tool_calls")][-1]["tool_calls"][0]["function"]
        record = demo_dataset.get(
            next(r.question_id for r in demo_dataset.split("train") if r.question in conversation[1]["content"])
        )
        assert answer_call == {"name": "answer", "arguments": {"value": record.gold_sql}}
        assert "SELECT statement whose result answers" in conversation[0]["content"]  # the system prompt
    tokenizer = load_tokenizer("smollm2-135m")
    rows, _ = sft_dataset(demo_dataset, tokenizer, max_examples=2, max_length=4_000, config=SQL_MODE)
    prompt = tokenizer.apply_chat_template(
        conversations[0][:2], tools=list(SQL_ANSWER_TOOLS), tokenize=False, add_generation_prompt=True
    )
    assert tokenizer.decode(rows[0]["input_ids"]).startswith(prompt)
    rows = grpo_rows(demo_dataset, curriculum=["easy"], config=SQL_MODE)
    assert "SELECT statement whose result answers" in rows[0]["prompt"][0]["content"]
    config_file = tmp_path / "c.yaml"
    config_file.write_text("answer_mode: sql\n")
    assert load_config(config_file).env_config.answer_mode == "sql"
    config_file.write_text("answer_mode: python\n")
    with pytest.raises(ValueError, match="answer_mode: 'python' is not one of value, sql"):
        load_config(config_file)


def test_sft_in_both_modes_plays_them_in_turn_each_with_its_own_tools(demo_dataset, tmp_path: Path) -> None:
    from sqlenv.agents.tools import SQL_ANSWER_TOOLS, TOOLS
    from sqlenv.training.config import load_config
    from sqlenv.training.models import load_tokenizer
    from sqlenv.training.sft_data import oracle_conversations, oracle_conversations_by_mode, sft_dataset

    both = oracle_conversations_by_mode(demo_dataset, seed=3, max_examples=6, answer_modes=["value", "sql"])
    assert [mode for mode, _ in both] == ["value", "sql"] * 3
    for mode, conversation in both:
        answer = [m for m in conversation if m.get("tool_calls")][-1]["tool_calls"][0]["function"]["arguments"]
        record = next(r for r in demo_dataset.split("train") if r.question in conversation[1]["content"])
        assert (answer["value"] == record.gold_sql) == (mode == "sql")
        assert ("SELECT statement whose result answers" in conversation[0]["content"]) == (mode == "sql")
        assert conversation[-2]["content"].split(":")[0] == "correct"  # only right episodes are kept
    # One mode, or none, plays exactly what the config's mode alone plays (the same draws).
    alone = oracle_conversations(demo_dataset, seed=3, max_examples=6, mistake_rate=0.5, clean_copies=True)
    assert oracle_conversations(
        demo_dataset, seed=3, max_examples=6, mistake_rate=0.5, clean_copies=True, answer_modes=["value"]
    ) == alone
    # A clean copy stays in its original's mode; the next question takes the next mode.
    copied = oracle_conversations_by_mode(
        demo_dataset, seed=3, max_examples=8, mistake_rate=1.0, clean_copies=True, answer_modes=["sql", "value"]
    )
    assert [mode for mode, _ in copied][:4] == ["sql", "sql", "value", "value"]

    tokenizer = load_tokenizer("smollm2-135m")
    rows, counts = sft_dataset(
        demo_dataset, tokenizer, seed=3, max_examples=2, max_length=4_000, answer_modes=["value", "sql"]
    )
    assert (counts["examples"], counts["examples_value_mode"], counts["examples_sql_mode"]) == (2, 1, 1)
    for row, (_, conversation), tools in zip(rows, both, (TOOLS, SQL_ANSWER_TOOLS), strict=False):
        prompt = tokenizer.apply_chat_template(
            conversation[:2], tools=list(tools), tokenize=False, add_generation_prompt=True
        )
        assert tokenizer.decode(row["input_ids"]).startswith(prompt)
    config_file = tmp_path / "c.yaml"
    config_file.write_text("sft:\n  answer_modes: [value, sql]\n")
    assert load_config(config_file).sft.answer_modes == ["value", "sql"]
    for wrong in ("[value, python]", "[]", "sql"):
        config_file.write_text(f"sft:\n  answer_modes: {wrong}\n")
        with pytest.raises(ValueError, match=r"sft\.answer_modes: expected a list of value, sql"):
            load_config(config_file)
