"""Episode journals: a stopped evaluation continues where it stopped and ends as an uninterrupted
run would have; a journal of another run, or one another run is still writing, is refused and left
as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sqlenv import SQLEnvironment
from sqlenv.agents.reference import RandomPolicy
from sqlenv.cli import app
from sqlenv.evaluation import evaluate
from sqlenv.evaluation.journal import JournalInUse
from sqlenv.evaluation.reports import summary_markdown


class Stop(Exception):
    pass


def _stop_after(count: int):
    seen: list[str] = []

    def on_episode(episode) -> None:
        seen.append(episode.question_id)
        if len(seen) == count:
            raise Stop

    return on_episode


@pytest.mark.parametrize("parallel", [1, 3])
def test_a_stopped_run_continues_and_ends_like_an_uninterrupted_one(
    demo_dataset, tmp_path: Path, parallel: int
) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    whole = evaluate(env, RandomPolicy(seed=1), 12, seed=4, parallel=parallel)
    journal = tmp_path / "random.jsonl"

    def run(on_episode):
        return evaluate(
            env, RandomPolicy(seed=1), 12, seed=4, parallel=parallel, journal=journal, on_episode=on_episode
        )

    with pytest.raises(Stop):
        run(_stop_after(5))
    recorded = journal.read_text().splitlines()
    assert 5 <= len(recorded) - 1 < 12  # the header, then what finished before the stop

    played: list[str] = []
    resumed = run(lambda e: played.append(e.question_id))
    assert len(played) == 12  # the journal's episodes are reported too, then the rest
    assert [e.__dict__ for e in resumed.episodes] == [e.__dict__ for e in whole.episodes]
    assert (resumed.success_rate, resumed.avg_reward) == (whole.success_rate, whole.avg_reward)
    assert len(journal.read_text().splitlines()) == 13
    assert resumed.journal_episodes == len(recorded) - 1 and whole.journal_episodes == 0
    summary = summary_markdown(resumed)  # the time covers the episodes this run played, and says so
    assert (
        f"{len(recorded) - 1} loaded from the journal of an earlier run, {13 - len(recorded)} played in"
        in summary
    )

    again: list[str] = []  # a finished journal: nothing left to play
    evaluate(
        env,
        RandomPolicy(seed=1),
        12,
        seed=4,
        journal=journal,
        on_episode=lambda e: again.append(e.question_id),
    )
    assert len(again) == 12 and len(journal.read_text().splitlines()) == 13


def test_a_journal_of_another_run_is_refused_and_left_unchanged(demo_dataset, tmp_path: Path) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    journal = tmp_path / "j.jsonl"
    evaluate(env, RandomPolicy(seed=1), 4, seed=4, journal=journal)
    before = journal.read_bytes()
    with pytest.raises(ValueError, match=r"journal of another run: seed 4 \(this run: 5\)"):
        evaluate(env, RandomPolicy(seed=1), 4, seed=5, journal=journal)
    with pytest.raises(ValueError, match=r"episodes 4 \(this run: 6\)"):
        evaluate(env, RandomPolicy(seed=1), 6, seed=4, journal=journal)
    assert journal.read_bytes() == before
    other = tmp_path / "other.txt"
    other.write_text("hello\n")
    with pytest.raises(ValueError, match="not an episode journal"):
        evaluate(env, RandomPolicy(seed=1), 4, seed=4, journal=other)
    assert other.read_text() == "hello\n"


def test_a_last_line_cut_short_is_played_again(demo_dataset, tmp_path: Path) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    journal = tmp_path / "j.jsonl"
    whole = evaluate(env, RandomPolicy(seed=2), 5, seed=1, journal=journal)
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])  # a crash mid-write
    played: list[str] = []
    resumed = evaluate(
        env,
        RandomPolicy(seed=2),
        5,
        seed=1,
        journal=journal,
        on_episode=lambda e: played.append(e.question_id),
    )
    assert [e.__dict__ for e in resumed.episodes] == [e.__dict__ for e in whole.episodes]
    assert all(json.loads(line) for line in journal.read_text().splitlines())
    assert len(journal.read_text().splitlines()) == 6


def test_a_stopped_run_reports_its_episodes_so_far_without_playing(demo_dataset, tmp_path: Path) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    whole = evaluate(env, RandomPolicy(seed=1), 12, seed=4)
    journal = tmp_path / "random.jsonl"
    with pytest.raises(Stop):
        evaluate(env, RandomPolicy(seed=1), 12, seed=4, journal=journal, on_episode=_stop_after(5))
    recorded = journal.read_text()
    so_far = evaluate(env, RandomPolicy(seed=1), 12, seed=4, journal=journal, play=False)
    assert so_far.n_episodes == 5 == so_far.journal_episodes
    assert (so_far.planned_episodes, so_far.finished_after_gap) == (12, 0)
    assert "the first 5 of the 12 planned episodes" in summary_markdown(so_far)
    assert "all 5 loaded from the journal of an earlier run, none played" in summary_markdown(so_far)
    assert [e.__dict__ for e in so_far.episodes] == [e.__dict__ for e in whole.episodes[:5]]
    assert journal.read_text() == recorded  # nothing was played or written
    # A gap (in a parallel run, an episode still playing when it stopped) ends the results so far:
    # what finished after it is left out, as it would favour short episodes.
    header, *entries = recorded.splitlines()
    gapped = tmp_path / "gapped.jsonl"
    gapped.write_text("\n".join([header, *(e for e in entries if json.loads(e)["index"] != 2)]) + "\n")
    prefix = evaluate(env, RandomPolicy(seed=1), 12, seed=4, journal=gapped, play=False)
    assert [e.question_id for e in prefix.episodes] == [e.question_id for e in whole.episodes[:2]]
    assert prefix.journal_episodes == 2
    assert (prefix.planned_episodes, prefix.finished_after_gap) == (12, 2)  # indices 3 and 4
    assert "2 that finished after it are left out" in summary_markdown(prefix)
    # A finished run's journal reports the whole run, not a stopped one.
    evaluate(env, RandomPolicy(seed=1), 12, seed=4, journal=journal)
    complete = evaluate(env, RandomPolicy(seed=1), 12, seed=4, journal=journal, play=False)
    assert (complete.n_episodes, complete.planned_episodes, complete.finished_after_gap) == (12, 0, 0)
    assert "stopped run" not in summary_markdown(complete)
    with pytest.raises(ValueError, match="no episode journal at"):
        evaluate(env, RandomPolicy(seed=1), 12, seed=4, journal=tmp_path / "none.jsonl", play=False)
    assert not (tmp_path / "none.jsonl").exists()
    with pytest.raises(ValueError, match="journal of another run"):  # still only this run's journal
        evaluate(env, RandomPolicy(seed=1), 12, seed=5, journal=journal, play=False)


def test_cli_eval_journal_continues_the_same_command(tmp_path: Path) -> None:
    runner = CliRunner()
    command = [
        "eval",
        "--policy",
        "random,oracle",
        "--dataset",
        "demo",
        "--episodes",
        "6",
        "--journal",
        str(tmp_path / "j"),
        "--json",
        str(tmp_path / "out.json"),
    ]
    first = runner.invoke(app, command)
    assert first.exit_code == 0, first.output
    assert sorted(p.name for p in (tmp_path / "j").iterdir()) == ["oracle.jsonl", "random.jsonl"]
    second = runner.invoke(app, command)
    assert second.exit_code == 0, second.output
    assert json.loads((tmp_path / "out.json").read_text())["oracle"]["success_rate"] == 1.0
    other_seed = runner.invoke(app, [*command, "--seed", "3"])
    assert other_seed.exit_code != 0
    assert "journal of another run" in other_seed.output
    # --journal-only reports what the journals hold and plays nothing.
    (tmp_path / "out.json").unlink()
    only = runner.invoke(app, [*command, "--journal-only"])
    assert only.exit_code == 0, only.output
    reported = json.loads((tmp_path / "out.json").read_text())
    assert reported["oracle"]["n_episodes"] == 6 == reported["oracle"]["journal_episodes"]
    assert "stopped run" not in only.output
    # A journal without its third episode: the run so far is the first two.
    random_journal = tmp_path / "j" / "random.jsonl"
    header, *entries = random_journal.read_text().splitlines()
    random_journal.write_text(
        "\n".join([header, *(e for e in entries if json.loads(e)["index"] != 2)]) + "\n"
    )
    stopped = runner.invoke(app, [*command, "--journal-only"])
    assert stopped.exit_code == 0, stopped.output
    assert "random: a stopped run, the first 2 of 6 planned episodes (3 that finished" in stopped.output
    assert json.loads((tmp_path / "out.json").read_text())["random"]["planned_episodes"] == 6
    no_journal = runner.invoke(app, ["eval", "--policy", "random", "--dataset", "demo", "--journal-only"])
    assert no_journal.exit_code == 2
    assert "give --journal" in no_journal.output


def test_a_second_run_on_a_journal_being_written_is_refused_and_changes_nothing(
    demo_dataset, tmp_path: Path
) -> None:
    pytest.importorskip("fcntl", reason="journal locks use POSIX flock")
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    journal = tmp_path / "j.jsonl"
    whole = evaluate(env, RandomPolicy(seed=2), 6, seed=1)
    seen: list[int] = []

    def meanwhile(_episode) -> None:  # on the running evaluation's thread, after it recorded one
        seen.append(len(seen))
        if len(seen) != 2:
            return
        written = journal.read_text()
        with pytest.raises(JournalInUse, match="being written by another evaluation that is still running"):
            evaluate(env, RandomPolicy(seed=2), 6, seed=1, journal=journal)
        # A report of the results so far only reads: it works beside the writer, even across a
        # half-written last line, which it leaves for the writer to finish.
        with journal.open("a") as handle:
            handle.write('{"index": 2, "epis')
        so_far = evaluate(env, RandomPolicy(seed=2), 6, seed=1, journal=journal, play=False)
        assert [e.question_id for e in so_far.episodes] == [e.question_id for e in whole.episodes[:2]]
        assert journal.read_text() == written + '{"index": 2, "epis'
        journal.write_text(written)

    run = evaluate(env, RandomPolicy(seed=2), 6, seed=1, journal=journal, on_episode=meanwhile)
    assert [e.__dict__ for e in run.episodes] == [e.__dict__ for e in whole.episodes]
    assert len(journal.read_text().splitlines()) == 7  # the header and each episode once
    # The lock ends with the run that held it, also when it stops with an error.
    with pytest.raises(Stop):
        evaluate(
            env, RandomPolicy(seed=2), 8, seed=1, journal=tmp_path / "k.jsonl", on_episode=_stop_after(1)
        )
    continued = evaluate(env, RandomPolicy(seed=2), 8, seed=1, journal=tmp_path / "k.jsonl")
    assert continued.journal_episodes == 1


def test_cli_eval_refuses_a_journal_another_run_is_writing(tmp_path: Path) -> None:
    fcntl = pytest.importorskip("fcntl", reason="journal locks use POSIX flock")
    (tmp_path / "j").mkdir()
    journal = tmp_path / "j" / "random.jsonl"
    with journal.open("a") as held:  # as the other `sqlenv eval` holds it
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = CliRunner().invoke(
            app,
            [
                "eval",
                "--policy",
                "random",
                "--dataset",
                "demo",
                "--episodes",
                "3",
                "--journal",
                str(tmp_path / "j"),
            ],
        )
        assert result.exit_code != 0
        assert "is being written by another evaluation" in " ".join(result.output.split())
        assert journal.read_text() == ""


class _TextPolicy(RandomPolicy):
    """A random player that declares a per-reply token limit, as the language-model policies do."""

    def __init__(self, seed: int, max_new_tokens: int) -> None:
        super().__init__(seed)
        self.max_new_tokens = max_new_tokens


def test_a_journal_is_refused_for_another_reply_token_limit(demo_dataset, tmp_path: Path) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    journal = tmp_path / "j.jsonl"
    evaluate(env, _TextPolicy(1, 96), 3, seed=0, journal=journal)
    assert json.loads(journal.read_text().splitlines()[0])["max_new_tokens"] == 96
    before = journal.read_bytes()
    with pytest.raises(ValueError, match=r"max_new_tokens 96 \(this run: 256\)"):
        evaluate(env, _TextPolicy(1, 256), 3, seed=0, journal=journal)
    assert journal.read_bytes() == before
    assert evaluate(env, _TextPolicy(1, 96), 3, seed=0, journal=journal).journal_episodes == 3


def test_a_journal_from_before_the_limit_was_recorded_is_a_96_token_run(demo_dataset, tmp_path: Path) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    text_journal, plain_journal = tmp_path / "text.jsonl", tmp_path / "plain.jsonl"
    evaluate(env, _TextPolicy(1, 96), 3, seed=0, journal=text_journal)
    evaluate(env, RandomPolicy(seed=1), 3, seed=0, journal=plain_journal)
    for path in (text_journal, plain_journal):  # as an older sqlenv wrote them
        lines = path.read_text().splitlines()
        header = json.loads(lines[0])
        del header["max_new_tokens"]
        path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    assert evaluate(env, _TextPolicy(1, 96), 3, seed=0, journal=text_journal).journal_episodes == 3
    with pytest.raises(ValueError, match=r"max_new_tokens 96 \(this run: 256\)"):
        evaluate(env, _TextPolicy(1, 256), 3, seed=0, journal=text_journal)
    assert evaluate(env, RandomPolicy(seed=1), 3, seed=0, journal=plain_journal).journal_episodes == 3


class _DtypePolicy(_TextPolicy):
    """A random player that declares the dtype its model computes in, as local models do."""

    def __init__(self, seed: int, dtype: str) -> None:
        super().__init__(seed, 256)
        self.dtype = dtype


def test_a_journal_is_refused_for_another_dtype_and_one_without_it_continues(
    demo_dataset, tmp_path: Path
) -> None:
    """`auto` plays in bfloat16 on one kind of CPU and float32 on another, and the two decide
    near-ties differently: a run begun in one is not continued in the other."""
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    journal = tmp_path / "j.jsonl"
    result = evaluate(env, _DtypePolicy(1, "bfloat16"), 3, seed=0, journal=journal)
    assert result.dtype == "bfloat16"
    assert json.loads(journal.read_text().splitlines()[0])["dtype"] == "bfloat16"
    before = journal.read_bytes()
    with pytest.raises(ValueError, match=r"dtype 'bfloat16' \(this run: 'float32'\)"):
        evaluate(env, _DtypePolicy(1, "float32"), 3, seed=0, journal=journal)
    assert journal.read_bytes() == before
    lines = journal.read_text().splitlines()  # as an older sqlenv wrote it: no dtype recorded
    header = json.loads(lines[0])
    del header["dtype"]
    journal.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    assert evaluate(env, _DtypePolicy(1, "float32"), 3, seed=0, journal=journal).journal_episodes == 3
    assert evaluate(env, RandomPolicy(seed=1), 3, seed=0).dtype is None


class _ExamplesPolicy(_TextPolicy):
    """A random player named and ranked as a language model shown solved examples is."""

    def __init__(self, seed: int, examples_ranking: str | None) -> None:
        super().__init__(seed, 256)
        self.name = "model-0shot-3solved" if examples_ranking else "unsolved-model-0shot"
        self.examples_ranking = examples_ranking


def test_a_journal_is_refused_for_another_ranking_of_the_solved_examples(
    demo_dataset, tmp_path: Path
) -> None:
    """Runs 11-14 ranked the examples by the question alone and recorded no ranking: such a journal
    is a "question" run and is not continued with today's ranking; one without examples is."""
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    shown, plain = tmp_path / "shown.jsonl", tmp_path / "plain.jsonl"
    evaluate(env, _ExamplesPolicy(1, "question+sql"), 3, seed=0, journal=shown)
    evaluate(env, _ExamplesPolicy(1, None), 3, seed=0, journal=plain)
    assert json.loads(shown.read_text().splitlines()[0])["examples_ranking"] == "question+sql"
    assert evaluate(env, _ExamplesPolicy(1, "question+sql"), 3, seed=0, journal=shown).journal_episodes == 3
    for path in (shown, plain):  # as an older sqlenv wrote them
        lines = path.read_text().splitlines()
        header = json.loads(lines[0])
        del header["examples_ranking"]
        path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    before = shown.read_bytes()
    with pytest.raises(ValueError, match=r"examples_ranking 'question' \(this run: 'question\+sql'\)"):
        evaluate(env, _ExamplesPolicy(1, "question+sql"), 3, seed=0, journal=shown)
    assert shown.read_bytes() == before
    assert evaluate(env, _ExamplesPolicy(1, None), 3, seed=0, journal=plain).journal_episodes == 3


def test_a_chat_policy_names_its_ranking_only_when_it_shows_examples(demo_dataset) -> None:
    from sqlenv.agents.openai_policy import OpenAIPolicy
    from sqlenv.agents.solved_examples import EXAMPLES_RANKING

    shown = OpenAIPolicy("http://127.0.0.1:9", "m", example_dataset=demo_dataset, solved_examples=2)
    assert shown.examples_ranking == EXAMPLES_RANKING == "question+sql"
    assert OpenAIPolicy("http://127.0.0.1:9", "m", solved_examples=0).examples_ranking is None


class _SamplingPolicy(_TextPolicy):
    """A random player that declares how it decodes, as the language-model policies do."""

    def __init__(self, seed: int, decoding: str) -> None:
        super().__init__(seed, 256)
        self.decoding = decoding


def test_a_journal_is_refused_for_another_decoding_and_one_without_it_is_greedy(
    demo_dataset, tmp_path: Path
) -> None:
    """Sampled episodes are other episodes than greedy ones: a greedy run is not continued by a
    sampled one (nor at another temperature), and journals from before decoding was recorded
    were greedy."""
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    journal = tmp_path / "j.jsonl"
    result = evaluate(env, _SamplingPolicy(1, "temperature 1"), 3, seed=0, journal=journal)
    assert result.decoding == "temperature 1"
    before = journal.read_bytes()
    for other in ("greedy", "temperature 0.7"):
        with pytest.raises(ValueError, match=rf"decoding 'temperature 1' \(this run: '{other}'\)"):
            evaluate(env, _SamplingPolicy(1, other), 3, seed=0, journal=journal)
    assert journal.read_bytes() == before
    greedy = tmp_path / "greedy.jsonl"
    evaluate(env, _SamplingPolicy(1, "greedy"), 3, seed=0, journal=greedy)
    lines = greedy.read_text().splitlines()  # as an older sqlenv wrote it: no decoding recorded
    header = json.loads(lines[0])
    del header["decoding"]
    greedy.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    assert evaluate(env, _SamplingPolicy(1, "greedy"), 3, seed=0, journal=greedy).journal_episodes == 3
    with pytest.raises(ValueError, match=r"decoding 'greedy' \(this run: 'temperature 1'\)"):
        evaluate(env, _SamplingPolicy(1, "temperature 1"), 3, seed=0, journal=greedy)
    assert evaluate(env, RandomPolicy(seed=1), 3, seed=0).decoding is None


class _ContextPolicy(_TextPolicy):
    """A random player that declares its context, as a local model's policy does."""

    def __init__(self, seed: int, context: str) -> None:
        super().__init__(seed, 256)
        self.context = context


def test_a_journal_is_refused_for_another_context_and_one_without_it_kept_messages(
    demo_dataset, tmp_path: Path
) -> None:
    """A local model kept as the token ids it read and wrote plays other episodes than one whose
    conversation was rendered again from its messages (older journals), or than one with another
    context length: neither continues the other's journal."""
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    journal = tmp_path / "j.jsonl"
    evaluate(env, _ContextPolicy(1, "tokens, 8192"), 3, seed=0, journal=journal)
    with pytest.raises(ValueError, match=r"context 'tokens, 8192' \(this run: 'tokens, 4096'\)"):
        evaluate(env, _ContextPolicy(1, "tokens, 4096"), 3, seed=0, journal=journal)
    lines = journal.read_text().splitlines()  # as an older sqlenv wrote it: no context recorded
    header = json.loads(lines[0])
    del header["context"]
    journal.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    with pytest.raises(ValueError, match=r"context 'messages, 2048' \(this run: 'tokens, 8192'\)"):
        evaluate(env, _ContextPolicy(1, "tokens, 8192"), 3, seed=0, journal=journal)
    assert evaluate(env, RandomPolicy(seed=1), 3, seed=0, journal=tmp_path / "r.jsonl").n_episodes == 3
