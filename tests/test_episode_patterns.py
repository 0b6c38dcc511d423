"""Episode patterns: endings, action counts and the failure patterns, read from real episodes played
in the real environment on the demo databases, and their place in a report."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from conftest import patterns_table
from sqlenv import SQLAction, SQLEnvironment
from sqlenv.agents.reference import OraclePolicy
from sqlenv.env.models import SQLObservation
from sqlenv.evaluation import evaluate
from sqlenv.evaluation.patterns import (
    AFTER_FIRST_FAILURE,
    ANSWERED_AFTER_FAILURE,
    ANSWERED_WITHOUT_DATA,
    ENDED_CORRECT,
    ENDED_NO_ANSWER,
    ENDED_WRONG,
    FAILED_QUERY,
    FORMAT_ERROR,
    NEXT_ANSWER,
    NEXT_CHANGED_QUERY,
    NEXT_DESCRIBE,
    NEXT_NO_VALID_ACTION,
    NEXT_NOTHING,
    NEXT_RESTYLED_QUERY,
    NEXT_SAME_QUERY,
    PATTERNS,
    QUERY_RAN_AFTER_FAILURE,
    REPEATED_ACTION,
    PairedSuccesses,
    episode_pattern,
    paired_successes,
    pattern_summary,
)
from sqlenv.evaluation.reports import write_report


class ScriptedPolicy:
    """Plays a fixed list of (kind, argument) actions; `{table}` becomes the episode's first table."""

    def __init__(self, name: str, script: list[tuple[str, str]], format_errors: int = 0) -> None:
        self.name = name
        self.script = script
        self.errors_per_episode = format_errors

    def reset(self, observation: SQLObservation, seed: int) -> None:
        self.table = observation.schema_info.removeprefix("Tables:").split(",")[0].strip()
        self.step = 0
        self.format_errors = self.errors_per_episode

    def act(self, observation: SQLObservation) -> SQLAction:
        kind, argument = self.script[min(self.step, len(self.script) - 1)]
        self.step += 1
        return SQLAction(action_type=kind, argument=argument.format(table=self.table))


# The model's habit in run 5: a query on a column that does not exist, the same query again (with
# other spacing and a final ';', which the repeat penalty folds), then a column name as the answer.
STUCK = ScriptedPolicy(
    "stuck",
    [
        ("DESCRIBE", "{table}"),
        ("QUERY", "SELECT no_such_column FROM {table}"),
        ("QUERY", "SELECT  no_such_column FROM {table};"),
        ("ANSWER", "no_such_column"),
    ],
)
# A query that runs, a failed one, then a describe before the (wrong) answer: it failed a query but
# neither answered right after it nor without data.
RECOVERS = ScriptedPolicy(
    "recovers",
    [
        ("QUERY", "SELECT count(*) FROM {table}"),
        ("QUERY", "SELECT no_such_column FROM {table}"),
        ("DESCRIBE", "{table}"),
        ("ANSWER", "-12345"),
    ],
    format_errors=1,
)
# What run 6's SFT data teaches (`sft.recovery_rate`): after the error, look at the table, then a
# query that runs.
FIXES = ScriptedPolicy(
    "fixes",
    [
        ("QUERY", "SELECT no_such_column FROM {table}"),
        ("DESCRIBE", "{table}"),
        ("QUERY", "SELECT count(*) FROM {table}"),
        ("ANSWER", "-12345"),
    ],
)
EXPLORES = ScriptedPolicy("explores", [("SAMPLE", "{table}"), ("DESCRIBE", "{table}")])


@pytest.fixture(scope="module")
def env(demo_dataset) -> SQLEnvironment:
    return SQLEnvironment(dataset=demo_dataset, split="eval")


def test_a_stuck_episode_shows_the_failed_query_the_repeat_and_the_answer_without_data(env) -> None:
    episode = evaluate(env, STUCK, n_episodes=1).episodes[0]
    pattern = episode_pattern(episode)
    assert pattern.ended == ENDED_WRONG
    assert pattern.action_counts == {"DESCRIBE": 1, "SAMPLE": 0, "QUERY": 2, "ANSWER": 1}
    assert pattern.patterns == {FAILED_QUERY, REPEATED_ACTION, ANSWERED_WITHOUT_DATA, ANSWERED_AFTER_FAILURE}
    # The environment agrees that the second query was a repeat: it was charged the repeat penalty.
    first_query, second_query = episode.transcript[1:3]
    assert second_query.reward < first_query.reward


def test_a_failed_query_followed_by_other_steps_is_not_an_answer_after_failure(env) -> None:
    episode = evaluate(env, RECOVERS, n_episodes=1).episodes[0]
    pattern = episode_pattern(episode)
    assert pattern.ended == ENDED_WRONG
    assert pattern.patterns == {FAILED_QUERY, FORMAT_ERROR}


def test_a_query_that_runs_after_a_failed_one_is_the_way_out(env) -> None:
    episode = evaluate(env, FIXES, n_episodes=1).episodes[0]
    assert [bool(step.error) for step in episode.transcript] == [True, False, False, False]
    pattern = episode_pattern(episode)
    assert pattern.patterns == {FAILED_QUERY, QUERY_RAN_AFTER_FAILURE}
    # A query that ran before the failure is no way out of it.
    assert (
        QUERY_RAN_AFTER_FAILURE
        not in episode_pattern(evaluate(env, RECOVERS, n_episodes=1).episodes[0]).patterns
    )


FAILS = ("QUERY", "SELECT no_such_column FROM {table}")


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        # Run 6's habit: the failed query back with only its letter case and spacing changed.
        ([FAILS, ("QUERY", "select  NO_SUCH_COLUMN from {table}"), ("ANSWER", "1")], NEXT_RESTYLED_QUERY),
        ([FAILS, ("QUERY", "SELECT count(*) FROM {table}"), ("ANSWER", "1")], NEXT_CHANGED_QUERY),
        ([FAILS, ("ANSWER", "no_such_column")], NEXT_ANSWER),
        ([FAILS, ("SHOW", "{table}"), ("ANSWER", "1")], NEXT_NO_VALID_ACTION),
        # Only the first failure counts: the later one is followed by a describe, the first by a changed query.
        ([FAILS, ("QUERY", "SELECT nope FROM {table}"), ("DESCRIBE", "{table}")], NEXT_CHANGED_QUERY),
    ],
)
def test_the_step_after_the_first_failed_query(env, script: list[tuple[str, str]], expected: str) -> None:
    episode = evaluate(env, ScriptedPolicy("scripted", script), n_episodes=1).episodes[0]
    assert episode.transcript[0].error  # the first query failed
    assert episode_pattern(episode).after_first_failure == expected


def test_the_step_after_the_first_failed_query_in_the_stuck_and_fixing_habits(env) -> None:
    # STUCK sends its query again with other spacing and a final ';': the repeat penalty's "same".
    assert (
        episode_pattern(evaluate(env, STUCK, n_episodes=1).episodes[0]).after_first_failure == NEXT_SAME_QUERY
    )
    assert (
        episode_pattern(evaluate(env, FIXES, n_episodes=1).episodes[0]).after_first_failure == NEXT_DESCRIBE
    )
    # A failed query at the last step of the budget is followed by nothing.
    late = ScriptedPolicy("late", [("DESCRIBE", "{table}")] * (env.config.step_budget - 1) + [FAILS])
    assert episode_pattern(evaluate(env, late, n_episodes=1).episodes[0]).after_first_failure == NEXT_NOTHING
    # No failed query, nothing to follow.
    oracle = evaluate(env, OraclePolicy(env.dataset), n_episodes=2).episodes
    assert all(episode_pattern(e).after_first_failure is None for e in oracle)


def test_the_oracle_shows_no_pattern_and_a_budget_run_out_is_no_answer(env) -> None:
    oracle = evaluate(env, OraclePolicy(env.dataset), n_episodes=5).episodes
    assert all(episode_pattern(e).ended == ENDED_CORRECT for e in oracle)
    assert all(not episode_pattern(e).patterns for e in oracle)
    explorer = evaluate(env, EXPLORES, n_episodes=1).episodes[0]
    pattern = episode_pattern(explorer)
    assert pattern.ended == ENDED_NO_ANSWER
    assert pattern.patterns == {REPEATED_ACTION}  # it describes the same table over and over
    assert pattern.action_counts["ANSWER"] == 0
    assert sum(pattern.action_counts.values()) == env.config.step_budget


def test_the_summary_counts_endings_actions_and_the_success_among_each_pattern(env) -> None:
    episodes = [
        *evaluate(env, STUCK, n_episodes=2).episodes,
        *evaluate(env, OraclePolicy(env.dataset), n_episodes=2).episodes,
    ]
    summary = pattern_summary(episodes)
    assert summary["n"] == 4
    assert summary["ended"] == {ENDED_CORRECT: 2, ENDED_WRONG: 2, ENDED_NO_ANSWER: 0}
    assert summary["actions"]["ANSWER"] == {"episodes": 4, "mean_per_episode": 1.0}
    assert summary["actions"]["SAMPLE"]["episodes"] == 0
    assert summary["patterns"][FAILED_QUERY] == {"episodes": 2, "success_rate": 0.0}
    assert summary["patterns"][FORMAT_ERROR] == {"episodes": 0, "success_rate": 0.0}
    assert set(summary["patterns"]) == set(PATTERNS)
    after = summary["after_first_failed_query"]
    assert list(after) == list(AFTER_FIRST_FAILURE)
    assert after[NEXT_SAME_QUERY] == {"episodes": 2, "success_rate": 0.0}
    assert sum(a["episodes"] for a in after.values()) == summary["patterns"][FAILED_QUERY]["episodes"]


def test_without_transcripts_only_format_errors_are_looked_for(env) -> None:
    episodes = evaluate(env, RECOVERS, n_episodes=2, record_transcripts=False).episodes
    assert all(not e.transcript for e in episodes)
    summary = pattern_summary(episodes)
    assert set(summary["patterns"]) == {FORMAT_ERROR}
    assert summary["patterns"][FORMAT_ERROR]["episodes"] == 2
    assert summary["after_first_failed_query"] == {}
    assert summary["actions"]["QUERY"]["mean_per_episode"] == 2.0  # counted from the action history


def test_a_report_shows_the_patterns_in_summary_md_and_results_json(env, tmp_path: Path) -> None:
    result = evaluate(env, STUCK, n_episodes=3)
    write_report(result, tmp_path)
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["episode_patterns"]["patterns"][REPEATED_ACTION]["episodes"] == 3
    assert data["episode_patterns"]["ended"][ENDED_WRONG] == 3
    text = (tmp_path / "summary.md").read_text()
    assert "## How episodes ended" in text and "## Actions and patterns" in text
    assert f"| {ENDED_WRONG} | 3 | 1.000 |" in text
    assert f"| {ANSWERED_AFTER_FAILURE} | 3 | 1.000 | 0.000 |" in text
    assert "| DESCRIBE | 3 | 1.00 |" in text
    assert f"| {NEXT_SAME_QUERY} | 3 | 0.000 |" in text and f"| {NEXT_DESCRIBE} | 0 | – |" in text
    assert data["episode_patterns"]["after_first_failed_query"][NEXT_SAME_QUERY]["episodes"] == 3
    page = (tmp_path / "transcripts.html").read_text()  # each episode names its patterns, for the filter
    expected = " · ".join([FAILED_QUERY, REPEATED_ACTION, ANSWERED_WITHOUT_DATA, ANSWERED_AFTER_FAILURE])
    assert page.count(f'<div class="patterns">{expected}</div>') == 3


def test_cli_patterns_reads_saved_reports_side_by_side(env, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from sqlenv.cli import app

    write_report(evaluate(env, STUCK, n_episodes=3), tmp_path / "stuck-report")
    write_report(evaluate(env, OraclePolicy(env.dataset), n_episodes=3), tmp_path / "oracle-report")
    result = CliRunner().invoke(
        app,
        ["patterns", str(tmp_path / "stuck-report"), str(tmp_path / "oracle-report" / "results.json")],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line for line in result.output.splitlines() if line.count("│") == 4}
    assert [c.strip() for c in rows[ENDED_CORRECT].split("│")[2:4]] == ["0 (0%)", "3 (100%)"]
    assert [c.strip() for c in rows[REPEATED_ACTION].split("│")[2:4]] == ["3 (0%)", "0"]
    assert "stuck-report: stuck" in result.output and "oracle-report: oracle" in result.output
    # Paired with the first report, question by question: the oracle solves the 3 the stuck one does not.
    assert [c.strip() for c in rows["questions also played by stuck-report"].split("│")[2:4]] == ["", "3"]
    assert rows["correct in both"].split("│")[3].strip() == "0"
    assert rows["correct only in stuck-report"].split("│")[3].strip() == "0"
    assert rows["correct only in this one"].split("│")[3].strip() == "3"
    assert rows["McNemar exact p (two-sided)"].split("│")[3].strip() == "0.25"  # 2 x (1/2)^3
    after_same = rows[f"after the first failed query: {NEXT_SAME_QUERY}"]
    assert [c.strip() for c in after_same.split("│")[2:4]] == ["3 (0%)", "0"]


def test_cli_patterns_shared_counts_only_the_questions_every_report_played(env, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from sqlenv.cli import app

    stuck = evaluate(env, STUCK, n_episodes=3)
    oracle = evaluate(env, OraclePolicy(env.dataset), n_episodes=3)
    assert [e.question_id for e in stuck.episodes] == [e.question_id for e in oracle.episodes]
    assert len({e.question_id for e in stuck.episodes}) == 3
    write_report(stuck, tmp_path / "all-three")
    write_report(
        dataclasses.replace(oracle, episodes=oracle.episodes[:2], n_episodes=2), tmp_path / "first-two"
    )
    write_report(dataclasses.replace(oracle, episodes=oracle.episodes[2:], n_episodes=1), tmp_path / "third")

    first, second = str(tmp_path / "all-three"), str(tmp_path / "first-two")
    assert patterns_table(first, second)["episodes"] == ["3", "2"]
    assert patterns_table(first, second)[FAILED_QUERY] == ["3 (0%)", "0"]
    shared = patterns_table(first, second, "--shared")
    assert shared["episodes"] == ["2", "2"]
    assert shared[FAILED_QUERY] == ["2 (0%)", "0"]
    assert shared["questions also played by all-three"] == ["", "2"]
    result = CliRunner().invoke(
        app, ["patterns", second, str(tmp_path / "third"), "--shared"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 2
    assert "the reports have no question in common" in result.output


def test_paired_successes_compare_two_runs_on_the_questions_both_played(env) -> None:
    oracle = evaluate(env, OraclePolicy(env.dataset), n_episodes=4).episodes
    stuck = evaluate(env, STUCK, n_episodes=4).episodes
    # Both runs play the same seeded questions, so each question is shared.
    assert [e.question_id for e in oracle] == [e.question_id for e in stuck]
    assert paired_successes(oracle, stuck) == PairedSuccesses(shared=4, both=0, only_first=4, only_second=0)
    assert paired_successes(stuck, oracle[:2]) == PairedSuccesses(
        shared=2, both=0, only_first=0, only_second=2
    )
    assert paired_successes(oracle, oracle[1:]) == PairedSuccesses(
        shared=3, both=3, only_first=0, only_second=0
    )
    # A question played twice counts as solved if either episode was.
    assert paired_successes([stuck[0], oracle[0]], stuck[:1]) == PairedSuccesses(1, 0, 1, 0)


def test_mcnemar_exact_p_value_is_the_two_sided_binomial_test_on_the_discordant_questions() -> None:
    # Worked by hand: 2 x P(X <= 2), X ~ Binomial(12, 1/2) = 2 x (1 + 12 + 66) / 4096.
    assert PairedSuccesses(shared=100, both=20, only_first=2, only_second=10).mcnemar_p_value == pytest.approx(
        158 / 4096
    )
    # Symmetric in the two runs; an even split is no evidence; nothing discordant is p = 1.
    assert PairedSuccesses(100, 20, 10, 2).mcnemar_p_value == PairedSuccesses(100, 20, 2, 10).mcnemar_p_value
    assert PairedSuccesses(100, 20, 5, 5).mcnemar_p_value == 1.0
    assert PairedSuccesses(100, 20, 0, 0).mcnemar_p_value == 1.0
    assert PairedSuccesses(40, 0, 0, 40).mcnemar_p_value == pytest.approx(2 / 2**40)
    scipy_stats = pytest.importorskip("scipy.stats", reason="scipy comes with the llm extra (scikit-learn)")
    for first, second in [(3, 17), (11, 20), (0, 6), (25, 24), (1, 60)]:
        expected = scipy_stats.binomtest(first, first + second, 0.5).pvalue
        assert PairedSuccesses(200, 0, first, second).mcnemar_p_value == pytest.approx(expected, rel=1e-9)


EPISODE_FIELDS = {
    "question_id": "q1",
    "db_id": "d",
    "difficulty": "easy",
    "answer_type": "integer",
    "success": False,
    "total_reward": 0.0,
    "steps": 2,
    "actions": [],
}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("{not json", "is not JSON"),
        ('{"policy": "x"}', "has no list of episodes"),
        ('{"episodes": [{"question_id": "q1"}]}', "an episode is not an episode record"),
        (
            json.dumps({"episodes": [{**EPISODE_FIELDS, "actions": [1, 2]}]}),
            "episode 'q1' has an action or error that is not text",
        ),
        ("", "is not JSON"),
    ],
)
def test_cli_patterns_names_what_is_wrong_with_a_file(
    tmp_path: Path, content: str | None, message: str
) -> None:
    from typer.testing import CliRunner

    from sqlenv.cli import app

    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    result = CliRunner().invoke(app, ["patterns", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
