"""Evaluation reports: results.json, summary.md, plots and transcripts.html hold what they promise."""

from __future__ import annotations

import html
import json
import struct
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sqlenv import SQLAction, SQLEnvironment
from sqlenv.agents.reference import OraclePolicy, RandomPolicy
from sqlenv.cli import app
from sqlenv.data import load_dataset
from sqlenv.env.models import SQLObservation
from sqlenv.evaluation import (
    NO_ANSWER_VERDICT,
    TRANSCRIPT_RESULT_CHARS,
    EvaluationResult,
    evaluate,
)
from sqlenv.evaluation.reports import PLOT_FILES, write_comparison, write_report
from sqlenv.evaluation.reports.markdown import summary_markdown

runner = CliRunner()
CRAFTED_ANSWER = "<script>alert('pwned')</script>"


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; fails unless the file is a PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


class ScriptAnsweringPolicy:
    """Describes a table, runs a long query, then answers with an HTML payload; reports one
    unparseable output per episode (as an LLM policy would)."""

    name = "crafted"

    def __init__(self) -> None:
        self.format_errors = 0
        self._steps = 0

    def reset(self, observation: SQLObservation, seed: int) -> None:
        self.format_errors = 1
        self._steps = 0
        self._table = observation.schema_info.removeprefix("Tables:").split(",")[0].strip()

    def act(self, observation: SQLObservation) -> SQLAction:
        self._steps += 1
        if self._steps == 1:
            return SQLAction(action_type="DESCRIBE", argument=self._table)
        if self._steps == 2:
            return SQLAction(action_type="QUERY", argument=f'SELECT * FROM "{self._table}"')
        return SQLAction(action_type="ANSWER", argument=CRAFTED_ANSWER)


@pytest.fixture(scope="module")
def crafted_result(demo_dataset) -> EvaluationResult:
    return evaluate(SQLEnvironment(dataset=demo_dataset, split="eval"), ScriptAnsweringPolicy())


@pytest.fixture(scope="module")
def crafted_report(crafted_result: EvaluationResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("report")
    files = write_report(crafted_result, directory)
    assert not files.skipped
    return directory


def test_a_report_writes_every_promised_file(crafted_report: Path) -> None:
    names = {p.name for p in crafted_report.iterdir()}
    assert names == {"results.json", "summary.md", "transcripts.html", *PLOT_FILES}


def test_results_json_has_the_summaries_and_every_transcript(
    crafted_report: Path, crafted_result: EvaluationResult, demo_dataset
) -> None:
    data = json.loads((crafted_report / "results.json").read_text())
    assert set(crafted_result.to_json()) <= set(data)
    eval_split = demo_dataset.split("eval")
    assert data["n_episodes"] == len(eval_split)
    for key, attribute in (
        ("by_difficulty", "difficulty"),
        ("by_answer_type", "answer_type"),
        ("by_database", "db_id"),
    ):
        assert set(data[key]) == {getattr(r, attribute) for r in eval_split}
        assert sum(group["n"] for group in data[key].values()) == data["n_episodes"]
    # one unparseable output per 3-step episode
    assert data["format_error_rate"] == pytest.approx(1 / 3)
    episode = data["episodes"][0]
    assert episode["format_errors"] == 1 and episode["success"] is False
    assert episode["question"] == eval_split[0].question
    assert episode["verdict"].startswith("wrong")
    steps = episode["transcript"]
    assert [s["action"].split()[0] for s in steps] == ["DESCRIBE", "QUERY", "ANSWER"]
    assert steps[2]["action"] == f"ANSWER {CRAFTED_ANSWER}"
    assert sum(s["reward"] for s in steps) == pytest.approx(episode["total_reward"])
    assert all(len(s["result"]) <= TRANSCRIPT_RESULT_CHARS for e in data["episodes"] for s in e["transcript"])
    assert any(s["result"].endswith("…") for e in data["episodes"] for s in e["transcript"])


def test_summary_md_has_tables_overall_and_by_difficulty_type_and_database(
    crafted_report: Path, demo_dataset
) -> None:
    text = (crafted_report / "summary.md").read_text()
    for heading in ("## Overall", "## By difficulty", "## By answer type", "## By database"):
        assert heading in text
    for record in demo_dataset.split("eval"):
        assert f"| {record.db_id} |" in text and f"| {record.difficulty} |" in text
    assert "| format-error rate | 0.333 |" in text
    for name in PLOT_FILES:
        assert f"]({name})" in text


def test_transcripts_html_shows_each_question_and_escapes_model_output(
    crafted_report: Path, demo_dataset
) -> None:
    page = (crafted_report / "transcripts.html").read_text()
    assert page.startswith("<!doctype html>")
    for record in demo_dataset.split("eval"):
        assert html.escape(record.question) in page
    assert CRAFTED_ANSWER not in page
    assert html.escape(CRAFTED_ANSWER) in page
    assert page.count("<script>") == 1  # the page's own filter script, nothing from an answer
    assert 'data-success="0"' in page and 'data-mode="ok"' in page
    assert "http://" not in page and "https://" not in page  # self-contained


def test_plots_are_pngs_of_a_legible_size(crafted_report: Path) -> None:
    for name in PLOT_FILES:
        width, height = png_size(crafted_report / name)
        assert 700 <= width <= 2000 and 450 <= height <= 1400, (name, width, height)
        assert (crafted_report / name).stat().st_size > 10_000


@pytest.mark.parametrize(
    "run", ["runs/cpu-smollm2/grpo/final on spider10/eval", "a-model-directory-name-without-spaces-" * 3]
)
def test_a_long_plot_title_stays_inside_the_figure(run: str) -> None:
    pytest.importorskip("matplotlib")
    from sqlenv.evaluation.reports.plots import _figure, _style

    figure = _figure()
    axes = figure.add_subplot()
    axes.bar(["easy", "hard"], [0.5, 0.25])
    _style(axes, f"Success rate by difficulty — {run}", "difficulty", "success rate")
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # what savefig renders PNGs with

    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw(renderer)
    title = axes.title.get_window_extent(renderer)
    assert title.x0 >= 0 and title.x1 <= figure.bbox.x1 and title.y1 <= figure.bbox.y1, title
    assert run.replace(" ", "") in axes.title.get_text().replace("\n", "").replace(" ", "")


def test_transcripts_record_each_step_and_a_budget_without_answer(demo_dataset) -> None:
    class NeverAnswers:
        name = "explorer"

        def reset(self, observation: SQLObservation, seed: int) -> None:
            self.table = observation.schema_info.removeprefix("Tables:").split(",")[0].strip()

        def act(self, observation: SQLObservation) -> SQLAction:
            return SQLAction(action_type="SAMPLE", argument=self.table)

    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    episode = evaluate(env, NeverAnswers(), n_episodes=1).episodes[0]
    assert episode.verdict == NO_ANSWER_VERDICT
    assert len(episode.transcript) == episode.steps == env.config.step_budget
    assert episode.format_errors == 0  # a policy without the attribute counts none


def test_a_chat_policys_format_error_shows_its_reason_in_the_transcript(demo_dataset) -> None:
    """The conversation logic of every chat-model policy, with scripted replies in place of a
    model: a reply without a tool call, one the parser rejects, then a valid answer."""
    from sqlenv.agents.chat_policy import ChatToolPolicy
    from sqlenv.agents.prompts import FORMAT_ERROR_ACTION

    class Scripted(ChatToolPolicy):
        name = "scripted"

        def _reply(self) -> tuple[SQLAction | None, str, str]:
            if self.format_errors == 0:
                return None, "no tool call found", "The answer is 42."
            if self.format_errors == 1:  # a parser error quotes the reply after its first line
                return None, "unreadable reply: not JSON.\nContent: '{\"name\": 42'", '{"name": 42'
            return SQLAction(action_type="ANSWER", argument="42"), "", ""

    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    policy = Scripted()
    episode = evaluate(env, policy, n_episodes=1).episodes[0]
    first, second, third = episode.transcript
    assert first.action == f"{FORMAT_ERROR_ACTION} The answer is 42."
    assert first.error == "not a valid tool call: no tool call found"  # not cut off: no limit named
    assert second.error == "not a valid tool call: unreadable reply: not JSON."
    assert third.action == "ANSWER 42" and "not a valid tool call" not in third.error
    assert policy.last_format_error is None  # cleared by the valid reply
    assert episode.format_errors == 2
    # The model is told the whole problem, as before.
    assert "Content: " in policy._turns[3]["content"]


def test_oracle_and_random_produce_no_format_errors(demo_dataset) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    for policy in (RandomPolicy(), OraclePolicy(demo_dataset)):
        result = evaluate(env, policy, n_episodes=10)
        assert result.format_error_rate == 0.0
        assert all(e.format_errors == 0 for e in result.episodes)


def test_without_matplotlib_the_text_files_are_still_written(
    crafted_result: EvaluationResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    files = write_report(crafted_result, tmp_path)
    assert {p.name for p in files.written} == {"results.json", "summary.md", "transcripts.html"}
    assert len(files.skipped) == len(PLOT_FILES) and "sqlenv[eval]" in files.skipped[0]


def test_comparison_refuses_results_of_different_questions(demo_dataset) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    a = evaluate(env, RandomPolicy(), n_episodes=5, seed=1)
    b = evaluate(env, RandomPolicy(), n_episodes=5, seed=2)
    with pytest.raises(ValueError, match="other questions"):
        write_comparison([a, b], "/nonexistent-never-written")


def test_cli_eval_report_writes_a_report_per_policy(tmp_path: Path) -> None:
    single = runner.invoke(app, ["eval", "--policy", "random", "--report", str(tmp_path / "one")])
    assert single.exit_code == 0, single.output
    assert json.loads((tmp_path / "one" / "results.json").read_text())["policy"] == "random"
    both = runner.invoke(
        app, ["eval", "--policy", "oracle,random", "--episodes", "6", "--report", str(tmp_path / "two")]
    )
    assert both.exit_code == 0, both.output
    for name in ("oracle", "random"):
        data = json.loads((tmp_path / "two" / name / "results.json").read_text())
        assert data["policy"] == name and data["n_episodes"] == 6
        png_size(tmp_path / "two" / name / "reward_distribution.png")
    assert "report written to" in both.output


def test_the_success_interval_is_wilsons_and_the_summary_shows_it() -> None:
    from sqlenv.evaluation.records import wilson_interval

    low, high = wilson_interval(63, 203)
    assert (round(low, 3), round(high, 3)) == (0.251, 0.377)  # the documented 25.1-37.7 %
    assert wilson_interval(0, 203)[0] < 1e-9 and round(wilson_interval(0, 203)[1], 3) == 0.019
    assert wilson_interval(0, 0) == (0.0, 0.0)
    oracle = evaluate(SQLEnvironment(split="eval"), OraclePolicy(load_dataset("demo")))
    assert oracle.success_interval == wilson_interval(oracle.n_episodes, oracle.n_episodes)
    assert "| 95 % interval (Wilson) | " in summary_markdown(oracle)
