"""How questions stand to a train split (`TrainSplitOverlap`), and `sqlenv patterns --trained-on`,
on spider10's real questions: its eval questions are Spider dev questions, its train split holds
others of them, so these are the relations a Spider dev report of a spider10-trained model shows."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

from typer.testing import CliRunner

from conftest import patterns_table
from sqlenv import SQLEnvironment
from sqlenv.agents.reference import OraclePolicy
from sqlenv.cli import app
from sqlenv.data.overlap import (
    OTHER_DATABASE,
    RELATIONS,
    SAME_DATABASE,
    SAME_GOLD,
    SAME_QUESTION,
    TrainSplitOverlap,
)
from sqlenv.evaluation import evaluate
from sqlenv.evaluation.reports import write_report


def test_each_question_gets_the_closest_relation_that_holds(spider10) -> None:
    overlap = TrainSplitOverlap.of(spider10.split("train"))
    assert overlap.databases == frozenset(spider10.databases)
    # Every train question is itself; restyled words are still the same question.
    for record in spider10.split("train"):
        assert overlap.relation(record) == SAME_QUESTION
        shouted = dataclasses.replace(record, question="  " + record.question.upper().replace(" ", "   "))
        assert overlap.relation(shouted) == SAME_QUESTION
    # An eval question is a twin exactly when the dataset says a train question has its gold SQL.
    relations = Counter()
    for record in spider10.split("eval"):
        relation = overlap.relation(record)
        relations[relation] += 1
        assert relation == (SAME_GOLD if spider10.seen_in_train(record.question_id) else SAME_DATABASE)
    assert relations == {SAME_GOLD: 129, SAME_DATABASE: 74}
    # The same words and SQL on a database the split never uses: neither the question nor a twin.
    moved = dataclasses.replace(spider10.split("train")[0], db_id="a_database_spider10_lacks")
    assert overlap.relation(moved) == OTHER_DATABASE


def test_cli_patterns_trained_on_counts_success_by_relation_and_pairs_each(spider10, spider_dir, tmp_path) -> None:
    env = SQLEnvironment(dataset=spider10, split="eval")
    oracle = evaluate(env, OraclePolicy(spider10), n_episodes=30, seed=3)
    played = [e.question_id for e in oracle.episodes]
    twins = sum(bool(spider10.seen_in_train(q)) for q in played)
    assert 0 < twins < len(played)  # both relations present, so the rows below can differ
    # A second report that solved only the new-SQL questions: it lost every twin against the oracle.
    new_only = [dataclasses.replace(e, success=not spider10.seen_in_train(e.question_id)) for e in oracle.episodes]
    write_report(oracle, tmp_path / "oracle")
    write_report(dataclasses.replace(oracle, episodes=new_only), tmp_path / "new-only")

    rows = patterns_table(
        str(tmp_path / "oracle"), str(tmp_path / "new-only"), "--trained-on", "spider10", "--spider-dir", str(spider_dir)
    )
    new = len(played) - twins
    twin_row, new_row = rows[f"spider10 train split: {SAME_GOLD}: correct"], rows[f"spider10 train split: {SAME_DATABASE}: correct"]
    assert twin_row[0].startswith(f"{twins}/{twins} (100.0%, ") and twin_row[1].startswith(f"0/{twins} (0.0%, ")
    assert new_row[0].startswith(f"{new}/{new} (100.0%, ") and new_row[1].startswith(f"{new}/{new} (100.0%, ")
    assert rows[f"spider10 train split: {SAME_QUESTION}: correct"] == ["0/0", "0/0"]
    assert rows[f"spider10 train split: {OTHER_DATABASE}: correct"] == ["0/0", "0/0"]
    paired = [rows[f"spider10 train split: {relation}: gained / lost against oracle (McNemar p)"] for relation in RELATIONS]
    twin_p = 2 * 0.5**twins  # all discordant questions lost: the exact two-sided binomial tail
    assert [cells[1] for cells in paired] == [
        "0 / 0 (1)",
        f"0 / {twins} ({min(1.0, twin_p):.3g})",
        "0 / 0 (1)",
        "0 / 0 (1)",
    ]


def test_cli_patterns_trained_on_names_a_dataset_it_cannot_place_against(spider10, spider_dir, tmp_path: Path) -> None:
    env = SQLEnvironment(dataset=spider10, split="eval")
    write_report(evaluate(env, OraclePolicy(spider10), n_episodes=2), tmp_path / "oracle")
    result = CliRunner().invoke(
        app, ["patterns", str(tmp_path / "oracle"), "--trained-on", str(tmp_path / "nowhere")], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 2
    assert "error:" in result.output and "nowhere" in result.output
    # The demo's databases are not spider10's: a report on spider10 placed against the demo's train
    # split has every question on a database that split never uses.
    rows = patterns_table(str(tmp_path / "oracle"), "--trained-on", "demo", "--spider-dir", str(spider_dir))
    assert rows[f"demo train split: {OTHER_DATABASE}: correct"][0].startswith("2/2 (100.0%, ")
