"""Outcomes files (`sqlenv.evaluation.outcomes`, `sqlenv results`): real evaluations in the real
environment written as compact per-episode outcomes, every number recomputed from them and compared
with what `evaluate()` reported; McNemar between runs with Holm's correction; the refusals; and the
size of a 972-episode file."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sqlenv import SQLAction, SQLEnvironment
from sqlenv.agents.reference import OraclePolicy, RandomPolicy
from sqlenv.cli import app
from sqlenv.config import EnvConfig
from sqlenv.data import Dataset
from sqlenv.env.models import SQLObservation
from sqlenv.evaluation import EvaluationResult, evaluate
from sqlenv.evaluation.outcomes import (
    OutcomesError,
    load_run,
    outcomes_from_episodes,
    paired_tests,
    read_outcomes,
    recompute,
    write_outcomes,
)
from sqlenv.evaluation.patterns import holm_adjusted, paired_successes
from sqlenv.evaluation.records import NOT_IN_TRAIN, wilson_interval

runner = CliRunner()


class Flaky:
    """The oracle, except on the episodes whose seed is `wrong` mod 3: there it answers "no" at
    once. It reports seed mod 2 format errors per episode, so the format-error rate is not 0."""

    def __init__(self, name: str, dataset: Dataset, wrong: int) -> None:
        self.name = name
        self.oracle = OraclePolicy(dataset)
        self.wrong = wrong
        self.format_errors = 0

    def reset(self, observation: SQLObservation, seed: int) -> None:
        self.oracle.reset(observation, seed)
        self.give_up = seed % 3 == self.wrong
        self.format_errors = seed % 2

    def act(self, observation: SQLObservation) -> SQLAction:
        if self.give_up:
            return SQLAction(action_type="ANSWER", argument="no")
        return self.oracle.act(observation)


def _results_file(result: EvaluationResult, path: Path) -> Path:
    """The result as `sqlenv eval --json` writes it."""
    path.write_text(json.dumps(result.to_json(), indent=2, default=list))
    return path


def _through_a_file(result: EvaluationResult, tmp_path: Path) -> dict[str, Any]:
    """results JSON -> outcomes file -> read back -> every number."""
    source = _results_file(result, tmp_path / f"{result.policy}-results.json")
    out = tmp_path / f"{result.policy}.json"
    write_outcomes(load_run(source), out)
    return recompute(read_outcomes(out))


def _assert_same_numbers(numbers: dict[str, Any], result: EvaluationResult) -> None:
    """Every number of a results table, recomputed, equals the one `evaluate()` reported."""
    assert numbers["n_episodes"] == result.n_episodes
    assert numbers["success"]["rate"] == result.success_rate
    assert tuple(numbers["success"]["interval"]) == tuple(result.success_interval)
    assert numbers["mean_steps"] == result.avg_steps
    assert numbers["mean_reward"] == result.avg_reward
    assert numbers["format_error_rate"] == result.format_error_rate
    for recomputed, reported in (
        (numbers["by_difficulty"], result.by_difficulty),
        (numbers["by_train_overlap"], result.by_train_overlap),
        (numbers["by_gold"], result.by_gold),
    ):
        assert list(recomputed) == list(reported)
        for group, stats in reported.items():
            assert recomputed[group]["n"] == stats["n"]
            assert recomputed[group]["rate"] == stats["success_rate"]
            successes = recomputed[group]["successes"]
            assert tuple(recomputed[group]["interval"]) == wilson_interval(successes, stats["n"])
    assert numbers["answer_mode"] == result.answer_mode
    assert numbers["show_schema"] == result.show_schema
    assert (numbers["policy"], numbers["dataset"], numbers["split"]) == (
        result.policy,
        result.dataset,
        result.split,
    )


@pytest.fixture(scope="module")
def spider10_sql_runs(spider10) -> dict[str, EvaluationResult]:
    """Real runs on spider10's 203 eval questions in SQL mode: oracle, random, and two flaky oracles
    that fail on different thirds of the episodes (a pair that differs both ways)."""
    env = SQLEnvironment(spider10, "eval", config=EnvConfig(answer_mode="sql"))
    return {
        "oracle": evaluate(env, OraclePolicy(spider10)),
        "random": evaluate(env, RandomPolicy()),
        "flaky0": evaluate(env, Flaky("flaky0", spider10, 0)),
        "flaky1": evaluate(env, Flaky("flaky1", spider10, 1)),
    }


def test_demo_outcomes_give_back_what_evaluate_reported(demo_dataset, tmp_path: Path) -> None:
    for policy in (OraclePolicy(demo_dataset), RandomPolicy(), Flaky("flaky", demo_dataset, 0)):
        for split in ("eval", "train"):
            result = evaluate(SQLEnvironment(demo_dataset, split), policy)
            numbers = _through_a_file(result, tmp_path)
            _assert_same_numbers(numbers, result)
    assert result.format_error_rate > 0 and 0 < result.success_rate < 1  # the flaky policy's run


def test_spider10_outcomes_give_back_every_group(spider10_sql_runs, tmp_path: Path) -> None:
    for result in spider10_sql_runs.values():
        numbers = _through_a_file(result, tmp_path)
        _assert_same_numbers(numbers, result)
        # twins, new SQL, gold with rows and empty: all four groups are there to compare
        assert len(numbers["by_train_overlap"]) == 2 and len(numbers["by_gold"]) == 2
        new_with_rows = [e for e in result.episodes if e.seen_in_train is False and e.empty_gold is False]
        assert numbers["new_sql_with_rows"]["n"] == len(new_with_rows) > 0
        assert numbers["new_sql_with_rows"]["successes"] == sum(e.success for e in new_with_rows)
        answered = sum(bool(e.actions) and e.actions[-1].startswith("ANSWER") for e in result.episodes)
        assert numbers["answered"]["successes"] == answered
    flaky = _through_a_file(spider10_sql_runs["flaky0"], tmp_path)
    assert 0 < flaky["success"]["successes"] < 203 and flaky["format_error_rate"] > 0


def test_the_file_keeps_outcomes_only(spider10_sql_runs, tmp_path: Path) -> None:
    result = spider10_sql_runs["flaky1"]
    out = tmp_path / "flaky1.json"
    write_outcomes(load_run(_results_file(result, tmp_path / "r.json")), out)
    text = out.read_text()
    first = result.episodes[0]
    assert first.question not in text and first.actions[0] not in text  # no question text, no transcript
    data = json.loads(text)
    assert data["n_episodes"] == len(data["episodes"]) == 203
    assert data["answer_mode"] == "sql" and data["show_schema"] is False
    run = read_outcomes(out)
    assert [o.question_id for o in run.outcomes] == [e.question_id for e in result.episodes]
    assert [o.success for o in run.outcomes] == [e.success for e in result.episodes]
    assert [o.format_errors for o in run.outcomes] == [e.format_errors for e in result.episodes]


def test_pairs_give_the_mcnemar_test_of_the_episodes(spider10_sql_runs, tmp_path: Path) -> None:
    runs = {
        name: load_run(_results_file(r, tmp_path / f"{name}.json")) for name, r in spider10_sql_runs.items()
    }
    pairs = paired_tests(
        [
            (("oracle", runs["oracle"]), ("random", runs["random"])),
            (("flaky0", runs["flaky0"]), ("flaky1", runs["flaky1"])),
        ]
    )
    for pair, (a, b) in zip(pairs, (("oracle", "random"), ("flaky0", "flaky1")), strict=True):
        expected = paired_successes(spider10_sql_runs[a].episodes, spider10_sql_runs[b].episodes)
        assert (pair["questions"], pair["both"], pair["only_first"], pair["only_second"]) == (
            expected.shared,
            expected.both,
            expected.only_first,
            expected.only_second,
        )
        assert pair["mcnemar_p"] == expected.mcnemar_p_value
        rows_only = [e for e in spider10_sql_runs[a].episodes if e.empty_gold is False]
        rows_b = [e for e in spider10_sql_runs[b].episodes if e.empty_gold is False]
        assert (
            pair["groups"]["gold answer has rows"]["mcnemar_p"]
            == paired_successes(rows_only, rows_b).mcnemar_p_value
        )
    flaky = pairs[1]
    assert flaky["only_first"] > 0 and flaky["only_second"] > 0  # the pair differs both ways
    assert [p["holm_p"] for p in pairs] == holm_adjusted([p["mcnemar_p"] for p in pairs])
    assert pairs[0]["mcnemar_p"] < 1e-30


def test_holm_against_a_hand_computed_example() -> None:
    # sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> held at 0.06
    assert holm_adjusted([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # the two SQL-mode arms' final points (p 0.029 and 0.043): Holm keeps the second at 0.058,
    # where Bonferroni (each p times 2) would make it 0.086
    assert holm_adjusted([0.029, 0.043]) == pytest.approx([0.058, 0.058])
    assert holm_adjusted([0.5, 0.6]) == [1.0, 1.0]
    assert holm_adjusted([0.2]) == [0.2] and holm_adjusted([]) == []
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        holm_adjusted([0.1, 1.5])


def test_cli_writes_outcomes_and_recomputes_the_eval_numbers(spider_dir: Path, tmp_path: Path) -> None:
    results = tmp_path / "both.json"
    played = runner.invoke(
        app,
        ["eval", "--policy", "oracle,random", "--dataset", "spider10", "--split", "eval", "--answer-mode", "sql",
         "--spider-dir", str(spider_dir), "--json", str(results)],
    )  # fmt: skip
    assert played.exit_code == 0, played.output
    for policy in ("oracle", "random"):
        written = runner.invoke(
            app,
            [
                "results",
                "outcomes",
                str(results),
                "--policy",
                policy,
                "--out",
                str(tmp_path / "o" / f"{policy}.json"),
            ],
        )
        assert written.exit_code == 0, written.output
        assert (
            f"outcomes of 203 episodes written to {tmp_path / 'o' / policy}.json"
            in written.output.replace("\n", "")
        )
    out = tmp_path / "numbers.json"
    shown = runner.invoke(app, ["results", "recompute", str(tmp_path / "o"), "--json", str(out)])
    assert shown.exit_code == 0, shown.output
    assert "203/203 (100.0%)" in shown.output and "McNemar exact p" in shown.output
    numbers = json.loads(out.read_text())
    reported = json.loads(results.read_text())
    assert [r["label"] for r in numbers["runs"]] == ["oracle", "random"]
    for run in numbers["runs"]:
        data = reported[run["policy"]]
        assert run["success"]["rate"] == data["success_rate"]
        assert run["success"]["interval"] == data["success_interval"]
        assert run["mean_steps"] == data["avg_steps"] and run["mean_reward"] == data["avg_reward"]
        assert run["format_error_rate"] == data["format_error_rate"]
        for difficulty, stats in data["by_difficulty"].items():
            assert run["by_difficulty"][difficulty]["rate"] == stats["success_rate"]
        assert (
            run["by_train_overlap"][NOT_IN_TRAIN]["rate"]
            == data["by_train_overlap"][NOT_IN_TRAIN]["success_rate"]
        )
        assert run["new_sql_with_rows"]["n"] == 34  # spider10: new SQL whose gold answer has rows
    [pair] = numbers["pairs"]  # found on its own: the two played the same questions
    assert (pair["first"], pair["second"], pair["only_first"], pair["only_second"]) == (
        "oracle",
        "random",
        203,
        0,
    )
    assert pair["holm_p"] == pair["mcnemar_p"]  # one test: nothing to correct


def test_a_journal_gives_the_outcomes_of_its_results(demo_dataset, tmp_path: Path) -> None:
    env = SQLEnvironment(demo_dataset, "eval")
    journal = tmp_path / "j" / "flaky.jsonl"
    whole = evaluate(env, Flaky("flaky", demo_dataset, 2), journal=journal)
    from_journal = load_run(tmp_path / "j")
    assert from_journal.outcomes == load_run(_results_file(whole, tmp_path / "r.json")).outcomes
    # a stopped run: episode 5 missing, and a last line cut short
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join([*lines[:6], *lines[7:-1], lines[-1][:20]]) + "\n")
    stopped = load_run(journal)
    so_far = evaluate(env, Flaky("flaky", demo_dataset, 2), journal=journal, play=False)
    assert stopped.planned_episodes == so_far.planned_episodes == 28
    _assert_same_numbers(recompute(stopped), so_far)


def test_results_without_question_facts_are_completed_from_the_dataset(
    spider10_sql_runs, spider10, tmp_path: Path
) -> None:
    result = spider10_sql_runs["flaky0"]
    data = result.to_json()
    for episode in data["episodes"]:  # as results were written before records kept these
        del episode["seen_in_train"], episode["empty_gold"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data, default=list))
    unknown = recompute(load_run(old))
    assert unknown["by_gold"] == {} and unknown["new_sql_with_rows"] is None
    asked = []

    def dataset_for(name: str) -> Dataset:
        asked.append(name)
        return spider10

    completed = load_run(old, dataset_for=dataset_for)
    assert asked == ["spider10"]
    _assert_same_numbers(recompute(completed), result)


def test_pairs_of_other_questions_modes_datasets_or_splits_are_refused(
    spider10_sql_runs, spider10, demo_dataset, tmp_path: Path
) -> None:
    sql = load_run(_results_file(spider10_sql_runs["oracle"], tmp_path / "sql.json"))
    value_result = evaluate(SQLEnvironment(spider10, "eval"), RandomPolicy())
    files = {
        "sql": sql,
        "value": load_run(_results_file(value_result, tmp_path / "value.json")),
        "fewer": replace(sql, outcomes=sql.outcomes[:-3]),
        "twice": replace(sql, outcomes=sql.outcomes + sql.outcomes[:1]),
        "demo": load_run(
            _results_file(evaluate(SQLEnvironment(demo_dataset, "eval"), RandomPolicy()), tmp_path / "d.json")
        ),
        "demo-train": load_run(
            _results_file(
                evaluate(SQLEnvironment(demo_dataset, "train"), RandomPolicy()), tmp_path / "dt.json"
            )
        ),
    }
    for name, run in files.items():
        write_outcomes(run, tmp_path / "o" / f"{name}.json")
    expected = {
        ("sql", "value"): "their answer modes differ ('sql' and 'value')",
        ("sql", "fewer"): "their questions differ: 3 only in the first",
        ("sql", "twice"): "1 played a different number of times",
        ("sql", "demo"): "their datasets differ ('spider10' and 'demo')",
        ("demo", "demo-train"): "their splits differ ('eval' and 'train')",
    }
    for (a, b), message in expected.items():
        with pytest.raises(OutcomesError, match=f"cannot pair {a} with {b}: .*{re.escape(message)}"):
            paired_tests([((a, files[a]), (b, files[b]))])
        refused = runner.invoke(
            app,
            [
                "results",
                "recompute",
                "--pair",
                f"{a}={tmp_path / 'o' / a}.json,{b}={tmp_path / 'o' / b}.json",
            ],
        )
        assert refused.exit_code == 2
        assert message in " ".join(refused.output.split())
    # without --pair, only the runs that can be paired are paired: none of these
    shown = runner.invoke(app, ["results", "recompute", str(tmp_path / "o")])
    assert shown.exit_code == 0, shown.output
    assert "no pair tested" in " ".join(shown.output.split())


def test_bad_outcomes_files_are_refused_saying_where(spider10_sql_runs, tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    write_outcomes(load_run(_results_file(spider10_sql_runs["random"], tmp_path / "r.json")), good)
    data = json.loads(good.read_text())
    cases = {
        "not JSON": ("{", "is not JSON"),
        "results": (json.dumps(spider10_sql_runs["random"].to_json(include_episodes=False)), "is not an outcomes file"),
        "a success of 2": (json.dumps({**data, "episodes": [[*data["episodes"][0][:3], 2, *data["episodes"][0][4:]]], "n_episodes": 1}), "episode 1, success: 2 is not 1 or 0"),
        "a short row": (json.dumps({**data, "episodes": [data["episodes"][0][:4]], "n_episodes": 1}), "episode 1 is not a list of 10 values"),
        "a wrong count": (json.dumps({**data, "n_episodes": 5}), "n_episodes is 5 but it holds 203 episodes"),
    }  # fmt: skip
    for name, (text, message) in cases.items():
        bad = tmp_path / f"{name}.json"
        bad.write_text(text)
        with pytest.raises(OutcomesError, match=message):
            read_outcomes(bad)
        refused = runner.invoke(app, ["results", "recompute", str(bad)])
        assert refused.exit_code == 2 and message in " ".join(refused.output.split()), name
    several = tmp_path / "several.json"
    several.write_text(
        json.dumps({p: spider10_sql_runs[p].to_json() for p in ("oracle", "random")}, default=list)
    )
    refused = runner.invoke(app, ["results", "outcomes", str(several), "--out", str(tmp_path / "x.json")])
    assert refused.exit_code == 2 and "several policies (oracle, random): name one" in " ".join(
        refused.output.split()
    )
    assert not (tmp_path / "x.json").exists()


@pytest.mark.slow
def test_a_972_episode_file_stays_small(spider_dir: Path, tmp_path: Path) -> None:
    """Oracle on all of Spider dev in SQL mode (seconds), then the same outcomes with every field at
    its widest: 15 steps, 2-digit format errors, a reward of 20 characters."""
    results = tmp_path / "dev.json"
    played = runner.invoke(
        app,
        ["eval", "--policy", "oracle", "--dataset", "spider", "--split", "eval", "--answer-mode", "sql",
         "--spider-dir", str(spider_dir), "--json", str(results)],
    )  # fmt: skip
    assert played.exit_code == 0, played.output
    run = load_run(results)
    assert len(run.outcomes) == 972
    assert write_outcomes(run, tmp_path / "dev-outcomes.json") < 64_000
    widest = replace(
        run,
        outcomes=tuple(
            replace(o, steps=15, format_errors=14, reward=-0.30000000000000004, seen_in_train=None)
            for o in run.outcomes
        ),
    )
    assert write_outcomes(widest, tmp_path / "widest.json") < 80_000
    assert read_outcomes(tmp_path / "widest.json").outcomes == widest.outcomes


def test_one_run_of_several_modes_is_refused(spider10_sql_runs) -> None:
    episodes = spider10_sql_runs["oracle"].episodes
    mixed = [episodes[0], replace(episodes[1], answer_mode="value")]
    with pytest.raises(OutcomesError, match="different answer modes"):
        outcomes_from_episodes(mixed, policy="oracle", dataset="spider10", split="eval")
