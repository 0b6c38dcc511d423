"""`evaluate()` and the `sqlenv` command: what the README promises a user."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sqlenv import SQLEnvironment
from sqlenv.agents.policy import Policy
from sqlenv.agents.reference import OraclePolicy, RandomPolicy
from sqlenv.cli import app
from sqlenv.evaluation import evaluate

runner = CliRunner()


def test_policies_satisfy_the_protocol(demo_dataset) -> None:
    assert isinstance(RandomPolicy(), Policy)
    assert isinstance(OraclePolicy(demo_dataset), Policy)


def test_evaluate_plays_every_question_once_by_default(demo_dataset) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    result = evaluate(env, OraclePolicy(demo_dataset))
    assert result.n_episodes == len(env.questions)
    assert sorted(e.question_id for e in result.episodes) == sorted(r.question_id for r in env.questions)
    assert result.success_rate == 1.0
    assert sum(v["n"] for v in result.by_difficulty.values()) == result.n_episodes
    assert 1.0 <= result.avg_reward <= 1.3


def test_evaluate_is_reproducible_for_a_seed(demo_dataset) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="train")
    a = evaluate(env, RandomPolicy(), n_episodes=30, seed=7)
    b = evaluate(env, RandomPolicy(), n_episodes=30, seed=7)
    c = evaluate(env, RandomPolicy(), n_episodes=30, seed=8)
    assert [e.__dict__ for e in a.episodes] == [e.__dict__ for e in b.episodes]
    assert [e.actions for e in a.episodes] != [e.actions for e in c.episodes]


def test_cli_eval_writes_the_json_the_spec_names(tmp_path: Path) -> None:
    out = tmp_path / "oracle.json"
    result = runner.invoke(app, ["eval", "--policy", "oracle", "--dataset", "demo", "--json", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    for key in ("success_rate", "avg_reward", "avg_steps", "n_episodes", "by_difficulty"):
        assert key in data
    assert data["success_rate"] == 1.0
    assert "oracle" in result.output


def test_cli_eval_runs_several_policies_and_episode_counts(tmp_path: Path) -> None:
    out = tmp_path / "both.json"
    result = runner.invoke(
        app,
        [
            "eval",
            "--policy",
            "oracle,random",
            "--split",
            "train",
            "--episodes",
            "12",
            "--seed",
            "3",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["oracle"]["n_episodes"] == 12 and data["random"]["n_episodes"] == 12
    assert data["random"]["success_rate"] < data["oracle"]["success_rate"]


def test_cli_reports_bad_input_clearly() -> None:
    bad_policy = runner.invoke(app, ["eval", "--policy", "genius"])
    assert bad_policy.exit_code == 2 and "unknown policy" in bad_policy.output
    bad_dataset = runner.invoke(app, ["eval", "--dataset", "nope"])
    assert bad_dataset.exit_code == 2 and "unknown dataset" in bad_dataset.output


def test_cli_data_info_json_for_spider10(spider_dir: Path) -> None:
    result = runner.invoke(
        app, ["data", "info", "--dataset", "spider10", "--spider-dir", str(spider_dir), "--json"]
    )
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["databases"] == 10
    assert info["splits"] == {"eval": 203, "train": 473}


def test_cli_data_info_table_for_demo() -> None:
    result = runner.invoke(app, ["data", "info"])
    assert result.exit_code == 0
    assert "demo" in result.output and "train" in result.output and "eval" in result.output


@pytest.mark.slow
def test_oracle_on_the_full_spider_eval_split(spider_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "spider.json"
    result = runner.invoke(
        app,
        [
            "eval",
            "--policy",
            "oracle",
            "--dataset",
            "spider",
            "--spider-dir",
            str(spider_dir),
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["n_episodes"] == 972
    assert data["success_rate"] >= 0.99
