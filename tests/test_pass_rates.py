"""Sampled evaluation (`sqlenv eval --temperature T --samples K`) and the GRPO questions chosen by
their pass rate in it (`grpo.pass_rates_from`, `grpo.pass_rate_range`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sqlenv.cli import app

REPO = Path(__file__).resolve().parents[1]


def _eval(*args: str) -> str:
    result = CliRunner().invoke(app, ["eval", "--dataset", "demo", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_sampled_evaluation_plays_each_question_k_times_in_a_row(tmp_path: Path) -> None:
    sampled = tmp_path / "sampled.json"
    output = _eval("--policy", "random", "--split", "train", "--heldout", "2", "--samples", "3", "--json", str(sampled))
    played = json.loads(sampled.read_text())
    ids = [e["question_id"] for e in played["episodes"]]
    assert len(ids) == 6 and ids[0] == ids[1] == ids[2] != ids[3] == ids[4] == ids[5]
    assert len({json.dumps(e["actions"]) for e in played["episodes"][:3]}) == 3  # each its own seed
    assert played["decoding"] is None  # the random player writes no text
    assert "random: pass@3" in output and "of 2 questions solved at least once" in output


def test_a_language_model_given_a_temperature_samples_its_replies(demo_dataset) -> None:
    pytest.importorskip("transformers")
    from sqlenv import SQLEnvironment
    from sqlenv.agents.registry import PolicySettings, make_policy
    from sqlenv.config import EnvConfig
    from sqlenv.evaluation import evaluate

    env = SQLEnvironment(dataset=demo_dataset, split="train", config=EnvConfig(step_budget=2))
    question = env.questions[0].question_id

    def play(temperature: float | None) -> object:
        policy = make_policy("smollm2-135m", demo_dataset, settings=PolicySettings(max_new_tokens=24, temperature=temperature))
        return evaluate(env, policy, question_ids=[question] * 3)

    sampled, greedy = play(1.0), play(None)
    assert (sampled.decoding, greedy.decoding) == ("temperature 1", "greedy")
    assert len({json.dumps(e.actions) for e in greedy.episodes}) == 1  # greedy: one episode, thrice
    assert len({json.dumps(e.actions) for e in sampled.episodes}) > 1


def test_sampling_options_that_make_no_sense_are_refused() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["eval", "--policy", "random", "--temperature", "0"])
    assert result.exit_code == 2 and "--temperature must be above 0" in result.output
    result = runner.invoke(app, ["eval", "--policy", "random", "--samples", "2", "--episodes", "3"])
    assert result.exit_code == 2 and "give one of them" in result.output


@pytest.fixture
def sampled_results(tmp_path: Path) -> Path:
    """A real results.json of 3 samples per train question (the random player's), its successes
    then set so that questions are solved 3, 2, 1 and 0 times in 3 (the rest 0)."""
    out = tmp_path / "report"
    _eval("--policy", "random", "--split", "train", "--samples", "3", "--report", str(out))
    path = out / "results.json"
    data = json.loads(path.read_text())
    questions = list(dict.fromkeys(e["question_id"] for e in data["episodes"]))
    solved = dict(zip(questions[:4], (3, 2, 1, 0), strict=True))
    for question, count in solved.items():
        mine = [e for e in data["episodes"] if e["question_id"] == question]
        assert len(mine) == 3
        for index, episode in enumerate(mine):
            episode["success"] = index < count
    path.write_text(json.dumps(data))
    return path


def test_the_questions_kept_are_those_whose_pass_rate_lies_in_the_range(sampled_results: Path) -> None:
    from sqlenv.training.pass_rates import questions_in_pass_rate_range

    data = json.loads(sampled_results.read_text())
    questions = list(dict.fromkeys(e["question_id"] for e in data["episodes"]))
    kept, counts = questions_in_pass_rate_range(sampled_results, dataset="demo", answer_mode="value", low=0.3, high=0.7)
    assert kept == {questions[1], questions[2]}  # 2 of 3 and 1 of 3
    assert counts == {"questions": len(questions), "kept": 2, "below": len(questions) - 3, "above": 1}
    everything, _ = questions_in_pass_rate_range(sampled_results.parent, dataset="demo", answer_mode="value", low=0, high=1)
    assert everything == set(questions)


def test_pass_rates_of_another_run_are_refused(sampled_results: Path, tmp_path: Path) -> None:
    from sqlenv.training.pass_rates import questions_in_pass_rate_range

    def keep(path: Path = sampled_results, **changes: object) -> None:
        options = {"dataset": "demo", "answer_mode": "value", "low": 0.0, "high": 1.0} | changes
        questions_in_pass_rate_range(path, **options)  # type: ignore[arg-type]

    with pytest.raises(ValueError, match="played demo/train; the run trains on spider10/train"):
        keep(dataset="spider10")
    with pytest.raises(ValueError, match="answered in mode value; the run answers in sql"):
        keep(answer_mode="sql")
    with pytest.raises(ValueError, match=r"\[0.8, 0.2\] is not a range"):
        keep(low=0.8, high=0.2)
    data = json.loads(sampled_results.read_text())
    for field, value, message in (("decoding", "greedy", "decoded greedily"), ("split", "eval", "played demo/eval")):
        changed = tmp_path / f"{field}.json"
        changed.write_text(json.dumps(data | {field: value}))
        with pytest.raises(ValueError, match=message):
            keep(changed)
    with pytest.raises(ValueError, match="no such file"):
        keep(tmp_path / "missing.json")


def test_a_pass_rate_range_that_is_no_range_is_refused_at_load() -> None:
    pytest.importorskip("yaml")
    from sqlenv.training.config import load_config

    for bad in ([0.5], [0.6, 0.4], [0.0, 1.5], ["a", 1], 0.5):
        with pytest.raises(ValueError, match=r"grpo\.pass_rate_range: expected \[low, high\]"):
            load_config(REPO / "configs" / "smoke.yaml", {"grpo.pass_rate_range": bad})
    config = load_config(REPO / "configs" / "smoke.yaml", {"grpo.pass_rate_range": [0.25, 0.75]})
    assert config.grpo.pass_rate_range == [0.25, 0.75] and config.grpo.pass_rates_from is None


def test_grpo_rows_keep_only_the_chosen_questions_in_curriculum_order(demo_dataset) -> None:
    from sqlenv.training.grpo import grpo_rows

    levels = ["easy", "medium", "hard", "extra"]
    whole = grpo_rows(demo_dataset, curriculum=levels, seed=1)
    chosen = {r["question_id"] for r in whole[::3]}
    kept = grpo_rows(demo_dataset, curriculum=levels, seed=1, keep=chosen)
    assert [r["question_id"] for r in kept] == [r["question_id"] for r in whole if r["question_id"] in chosen]
    # A run that reads more questions than are kept reads them all, then again in the same order:
    # an odd count is not cut at an epoch's end, as TRL's sampler would cut it.
    assert len(kept) % 2 == 1
    again = grpo_rows(demo_dataset, curriculum=levels, seed=1, keep=chosen, fit_to=2 * len(kept) + 1)
    assert again == [*kept, *kept, kept[0]]


def test_the_grpo_trainer_trains_on_the_questions_in_the_pass_rate_range(sampled_results: Path, tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from sqlenv.training.config import load_config
    from sqlenv.training.grpo import build_grpo_trainer

    data = json.loads(sampled_results.read_text())
    questions = list(dict.fromkeys(e["question_id"] for e in data["episodes"]))
    overrides = {
        "dataset": "demo", "output_dir": str(tmp_path / "run"), "grpo.init_from": "smollm2-135m",
        "live.eval_every": 0, "grpo.pass_rates_from": str(sampled_results), "grpo.pass_rate_range": [0.3, 1.0],
        "grpo.curriculum": ["easy", "medium", "hard", "extra"],
    }  # fmt: skip
    trainer = build_grpo_trainer(load_config(REPO / "configs" / "smoke.yaml", overrides))
    assert set(trainer.train_dataset["question_id"]) == set(questions[:3])  # 3, 2 and 1 of 3
    nothing = overrides | {"grpo.pass_rate_range": [0.9, 0.95]}
    with pytest.raises(ValueError, match=r"none of the \d+ questions .* has a pass rate in \[0.9, 0.95\]"):
        build_grpo_trainer(load_config(REPO / "configs" / "smoke.yaml", nothing))


def test_a_pass_rate_table_keeps_what_the_run_reads_of_the_results(sampled_results: Path, tmp_path: Path) -> None:
    from sqlenv.training.pass_rates import (
        PASS_RATE_TABLE_KIND,
        questions_in_pass_rate_range,
        write_pass_rate_table,
    )

    table = tmp_path / "docs" / "pass-rates.json"
    written = write_pass_rate_table(sampled_results.parent, table)
    data = json.loads(table.read_text())
    assert data["kind"] == PASS_RATE_TABLE_KIND and (data["dataset"], data["split"]) == ("demo", "train")
    assert data["answer_modes"] == ["value"] and data["policy"] == written.policy
    assert len(table.read_text().splitlines()) == len(data["questions"]) + 10  # one question a line
    assert table.stat().st_size < sampled_results.stat().st_size / 5
    for low, high in ((0.3, 0.7), (0.0, 1.0), (1.0, 1.0)):
        options = {"dataset": "demo", "answer_mode": "value", "low": low, "high": high}
        assert questions_in_pass_rate_range(table, **options) == questions_in_pass_rate_range(sampled_results, **options)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="played demo/train; the run trains on spider10/train"):
        questions_in_pass_rate_range(table, dataset="spider10", answer_mode="value", low=0, high=1)
    with pytest.raises(ValueError, match="answered in mode value; the run answers in sql"):
        questions_in_pass_rate_range(table, dataset="demo", answer_mode="sql", low=0, high=1)


def test_a_pass_rate_table_that_is_not_one_is_refused(sampled_results: Path, tmp_path: Path) -> None:
    from sqlenv.training.pass_rates import read_pass_rates, write_pass_rate_table

    table = tmp_path / "pass-rates.json"
    write_pass_rate_table(sampled_results, table)
    data = json.loads(table.read_text())
    question = next(iter(data["questions"]))
    for bad in (["easy", 3, 2], ["easy", 1, 0], ["easy", True, 3], [2, 3], "1/3"):
        broken = tmp_path / "broken.json"
        broken.write_text(json.dumps(data | {"questions": data["questions"] | {question: bad}}))
        with pytest.raises(ValueError, match=rf"question '{question}' is .*not \[difficulty, solved, played\]"):
            read_pass_rates(broken)
    greedy = tmp_path / "greedy.json"
    greedy.write_text(json.dumps(json.loads(sampled_results.read_text()) | {"decoding": "greedy"}))
    with pytest.raises(ValueError, match="decoded greedily: a pass rate needs sampled replies"):
        write_pass_rate_table(greedy, tmp_path / "never.json")
    assert not (tmp_path / "never.json").exists()
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"kind": "something else", "questions": {}}))
    with pytest.raises(ValueError, match=r"not an evaluation's results\.json"):
        read_pass_rates(other)


def test_the_pass_rates_command_counts_questions_by_difficulty_and_writes_the_table(
    sampled_results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlenv.training.pass_rates import read_pass_rates

    monkeypatch.setenv("COLUMNS", "200")
    table = tmp_path / "pass-rates.json"
    result = CliRunner().invoke(app, ["train", "pass-rates", str(sampled_results), "--out", str(table)])
    assert result.exit_code == 0, result.output
    rates = read_pass_rates(sampled_results)
    easy = [solved for difficulty, solved, _ in rates.questions.values() if difficulty == "easy"]
    row = next(line for line in result.output.splitlines() if line.strip("│ ").startswith("easy"))
    cells = [cell.strip() for cell in row.strip("│").split("│")]
    assert cells == ["easy", str(len(easy)), *(str(easy.count(k)) for k in range(4))]
    assert "questions, solved in k of 3 episodes" in result.output and f"written to {table}" in result.output
    assert read_pass_rates(table).questions == rates.questions
    again = CliRunner().invoke(app, ["train", "pass-rates", str(table)])  # a table reads back as itself
    assert again.exit_code == 0 and row in again.output
    missing = CliRunner().invoke(app, ["train", "pass-rates", str(tmp_path / "nothing.json")])
    assert missing.exit_code != 0 and "no such file" in missing.output


def test_the_cpu_recipe_reads_the_shipped_pass_rate_table_of_its_own_questions(spider10) -> None:
    """configs/cpu-qwen0.5b.yaml trains on the questions of the table kept under docs/results: every
    spider10 train question, played as many times each, sampled at the run's own temperature."""
    pytest.importorskip("yaml")
    from sqlenv.training.config import load_config
    from sqlenv.training.pass_rates import questions_in_pass_rate_range, read_pass_rates

    config = load_config(REPO / "configs" / "cpu-qwen0.5b.yaml")
    table = REPO / config.grpo.pass_rates_from
    assert table.parent == REPO / "docs" / "results", "the recipe's pass rates must be a table kept in the repository"
    rates = read_pass_rates(table)
    assert (rates.dataset, rates.split, rates.answer_modes) == ("spider10", "train", frozenset({config.answer_mode}))
    assert rates.decoding == f"temperature {config.grpo.temperature:g}"
    train = {q.question_id: q.difficulty for q in spider10.split("train")}
    assert {q: row[0] for q, row in rates.questions.items()} == train
    assert {row[2] for row in rates.questions.values()} == {4}
    low, high = config.grpo.pass_rate_range
    keep, counts = questions_in_pass_rate_range(table, dataset="spider10", answer_mode=config.answer_mode, low=low, high=high)
    assert counts["questions"] == len(train) and keep
    assert all(low <= rates.questions[q][1] / 4 <= high for q in keep)
