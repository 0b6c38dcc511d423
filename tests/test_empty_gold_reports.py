"""Reports keep success on questions whose gold answer is empty apart: there an explicit empty
answer is right, so a policy that answers "[]" scores without exploring (`EvaluationResult.by_gold`,
the summary's "By gold answer", `sqlenv patterns --gold-rows`)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import patterns_table
from sqlenv import SQLAction, SQLEnvironment, SQLObservation
from sqlenv.agents.reference import OraclePolicy
from sqlenv.cli import app
from sqlenv.data import Dataset
from sqlenv.evaluation import evaluate
from sqlenv.evaluation.records import GOLD_EMPTY, GOLD_HAS_ROWS
from sqlenv.evaluation.reports import summary_markdown, write_report


class AnswerEmptyPolicy:
    """Answers "[]" at once: right exactly where the gold answer is empty."""

    name = "answer-empty"

    def reset(self, observation: SQLObservation, seed: int) -> None:
        pass

    def act(self, observation: SQLObservation) -> SQLAction:
        return SQLAction(action_type="ANSWER", argument="[]")


@pytest.fixture(scope="module")
def with_empty_gold(demo_dataset) -> Dataset:
    """The demo dataset plus two eval questions whose gold query returns no rows."""
    empties = tuple(
        replace(
            r,
            question_id=f"empty-{i}",
            question=f"(nothing matches) {r.question}",
            gold_sql=f"SELECT * FROM ({r.gold_sql}) LIMIT 0",
            gold_answer=(),
            answer_type="list",
        )
        for i, r in enumerate(demo_dataset.split("eval")[:2])
    )
    assert all(r.empty_gold for r in empties)
    return Dataset(name="demo-empty", databases=demo_dataset.databases, records=demo_dataset.records + empties)


@pytest.fixture(scope="module")
def env(with_empty_gold: Dataset) -> SQLEnvironment:
    return SQLEnvironment(dataset=with_empty_gold, split="eval")


def test_an_empty_answer_is_right_only_where_the_gold_is_empty_and_reports_say_so(env) -> None:
    result = evaluate(env, AnswerEmptyPolicy())
    n = len(env.dataset.split("eval"))
    assert [e.question_id for e in result.episodes if e.success] == ["empty-0", "empty-1"]
    assert [e.question_id for e in result.episodes if e.empty_gold] == ["empty-0", "empty-1"]
    assert list(result.by_gold) == [GOLD_HAS_ROWS, GOLD_EMPTY]
    assert result.by_gold[GOLD_EMPTY]["n"] == 2 and result.by_gold[GOLD_EMPTY]["success_rate"] == 1.0
    assert result.by_gold[GOLD_HAS_ROWS]["n"] == n - 2
    assert result.by_gold[GOLD_HAS_ROWS]["success_rate"] == 0.0
    summary = summary_markdown(result)
    assert "## By gold answer" in summary
    assert f"| {GOLD_EMPTY} | 2 | 1.000 |" in summary
    assert f"| {GOLD_HAS_ROWS} | {n - 2} | 0.000 |" in summary


def test_without_empty_gold_the_report_has_no_gold_section(demo_dataset) -> None:
    result = evaluate(SQLEnvironment(dataset=demo_dataset, split="eval"), OraclePolicy(demo_dataset), 4)
    assert list(result.by_gold) == [GOLD_HAS_ROWS]
    assert "By gold answer" not in summary_markdown(result)


def test_a_journal_written_before_the_field_is_completed_on_load(env, tmp_path: Path) -> None:
    journal = tmp_path / "answer-empty.jsonl"
    first = evaluate(env, AnswerEmptyPolicy(), journal=journal)
    header, *lines = journal.read_text().splitlines()
    old = [json.loads(line) for line in lines]
    for entry in old:
        del entry["episode"]["empty_gold"]
    journal.write_text("\n".join([header, *(json.dumps(e) for e in old)]) + "\n")
    again = evaluate(env, AnswerEmptyPolicy(), journal=journal)
    assert again.journal_episodes == len(first.episodes)
    assert [e.empty_gold for e in again.episodes] == [e.empty_gold for e in first.episodes]
    assert again.by_gold == first.by_gold


def test_cli_patterns_gold_rows_pairs_only_the_questions_an_answer_must_fill(env, tmp_path: Path) -> None:
    n = len(env.dataset.split("eval"))
    write_report(evaluate(env, OraclePolicy(env.dataset)), tmp_path / "oracle")
    write_report(evaluate(env, AnswerEmptyPolicy()), tmp_path / "empty")
    oracle, empty = str(tmp_path / "oracle"), str(tmp_path / "empty")

    every = patterns_table(oracle, empty)
    assert every["episodes"] == [str(n), str(n)]
    assert every["correct in both"] == ["", "2"]
    assert every["correct only in this one"] == ["", "0"]

    gold_rows = patterns_table(oracle, empty, "--gold-rows")
    assert gold_rows["episodes"] == [str(n - 2), str(n - 2)]
    assert gold_rows["questions also played by oracle"] == ["", str(n - 2)]
    assert gold_rows["correct in both"] == ["", "0"]
    assert gold_rows["correct only in oracle"] == ["", str(n - 2)]


def test_cli_patterns_gold_rows_refuses_a_report_that_does_not_know_its_empty_gold(
    env, tmp_path: Path
) -> None:
    write_report(evaluate(env, AnswerEmptyPolicy()), tmp_path / "old")
    results = tmp_path / "old" / "results.json"
    data = json.loads(results.read_text())
    for episode in data["episodes"]:
        del episode["empty_gold"]
    results.write_text(json.dumps(data))
    before = patterns_table(str(results))  # without the option the old report still reads
    assert before["episodes"] == [str(len(env.dataset.split("eval")))]

    result = CliRunner().invoke(app, ["patterns", str(results), "--gold-rows"], env={"COLUMNS": "200"})
    assert result.exit_code != 0
    assert "written before reports kept which gold answers are empty" in result.output
    assert str(results) in result.output.replace("\n", "")
    assert "--journal-only" in result.output
