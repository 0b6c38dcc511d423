"""What an evaluation produces: a step (`StepRecord`), an episode with its transcript
(`EpisodeRecord`), a run's summary (`EvaluationResult`), and the summaries by difficulty, by
whether a question's gold SQL was seen in training and by whether its gold answer is empty. Plain
dataclasses that reports, journals and comparisons read and write."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from sqlenv.data import Dataset

__all__ = [
    "CONTEXT_FULL_VERDICT",
    "DIFFICULTY_ORDER",
    "GOLD_EMPTY",
    "GOLD_HAS_ROWS",
    "NOT_IN_TRAIN",
    "NO_ANSWER_VERDICT",
    "NO_ANSWER_VERDICTS",
    "SEEN_IN_TRAIN",
    "TRANSCRIPT_ACTION_CHARS",
    "TRANSCRIPT_RESULT_CHARS",
    "EpisodeRecord",
    "EvaluationResult",
    "Job",
    "StepRecord",
    "group_stats",
    "summarise",
    "with_question_facts",
]

Job = tuple[int, str, int]  # one planned episode: (index, question_id, episode seed)

DIFFICULTY_ORDER: tuple[str, ...] = ("easy", "medium", "hard", "extra")

# Transcript excerpts: enough to read an episode, small enough to keep thousands of them.
TRANSCRIPT_ACTION_CHARS = 400
TRANSCRIPT_RESULT_CHARS = 300
NO_ANSWER_VERDICT = "no answer: the step budget ran out"
# A local model's context could take no more turns (`sqlenv.agents.chat_policy.ContextFull`).
CONTEXT_FULL_VERDICT = "no answer: the model's context is full"
NO_ANSWER_VERDICTS: tuple[str, ...] = (NO_ANSWER_VERDICT, CONTEXT_FULL_VERDICT)


@dataclass(frozen=True)
class StepRecord:
    """One step of a transcript: the action, an excerpt of what came back, the step's reward."""

    action: str
    result: str
    error: str
    reward: float


@dataclass(frozen=True)
class EpisodeRecord:
    question_id: str
    db_id: str
    difficulty: str
    answer_type: str
    success: bool
    total_reward: float
    steps: int
    actions: list[str]
    question: str = ""
    # Outputs the policy could not parse into an action (policies driven by a language model).
    format_errors: int = 0
    # "correct", "wrong: <why>", or one of NO_ANSWER_VERDICTS.
    verdict: str = ""
    transcript: list[StepRecord] = field(default_factory=list)
    # Whether a train question has the same gold SQL (`Dataset.seen_in_train`); None for train
    # questions and datasets without a train split.
    seen_in_train: bool | None = None
    # Accepted tool calls by the format the model wrote them in (`sqlenv.agents.reply_formats`);
    # empty for policies that make no tool calls.
    call_formats: dict[str, int] = field(default_factory=dict)
    # What ANSWER took: "value", or "sql" (graded by execution match) (`EnvConfig.answer_mode`).
    answer_mode: str = "value"
    # Whether the first observation showed every table's CREATE TABLE statement (the schema-shown
    # control, `EnvConfig.show_schema`); False: the table names only, as in every older record.
    show_schema: bool = False
    # Whether the gold query returns no rows (`QuestionRecord.empty_gold`): there an explicit empty
    # answer is right, so a policy that answers "[]" after a failed query scores without exploring.
    # None in journals written before records kept it, until `with_question_facts` completes them.
    empty_gold: bool | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EpisodeRecord:
        """An episode as `asdict` wrote it: a journal entry, or one of results.json's episodes."""
        fields = dict(data)
        fields["transcript"] = [StepRecord(**step) for step in fields.get("transcript", [])]
        return cls(**fields)


@dataclass
class EvaluationResult:
    policy: str
    dataset: str
    split: str
    n_episodes: int
    success_rate: float
    avg_reward: float
    avg_steps: float
    by_difficulty: dict[str, dict[str, float]]
    episodes: list[EpisodeRecord] = field(default_factory=list)
    by_answer_type: dict[str, dict[str, float]] = field(default_factory=dict)
    by_database: dict[str, dict[str, float]] = field(default_factory=dict)
    # Share of all actions whose policy output could not be parsed (0 for random and oracle).
    format_error_rate: float = 0.0
    seed: int = 0
    backend: str = "serial"
    wall_time_s: float = 0.0  # this call's time: the episodes it played, not those of a journal
    journal_episodes: int = 0  # episodes loaded from a journal (played by an earlier run)
    # A stopped run reported so far (`evaluate(..., play=False)`): the plan's size, and how many of
    # its episodes had finished after the first one missing (left out of these results). 0: whole.
    planned_episodes: int = 0
    finished_after_gap: int = 0
    # Keyed SEEN_IN_TRAIN / NOT_IN_TRAIN: recall of a trained query vs the rest (`sqlenv.data.overlap`).
    by_train_overlap: dict[str, dict[str, float]] = field(default_factory=dict)
    # Keyed GOLD_HAS_ROWS / GOLD_EMPTY (`EpisodeRecord.empty_gold`): success where an answer must
    # hold the gold rows, apart from success that an empty answer can reach.
    by_gold: dict[str, dict[str, float]] = field(default_factory=dict)
    # 95 % Wilson interval of success_rate (`wilson_interval`).
    success_interval: tuple[float, float] = (0.0, 0.0)
    # All episodes' accepted tool calls by format (`EpisodeRecord.call_formats`).
    call_formats: dict[str, int] = field(default_factory=dict)
    # "sql": every episode answered with SQL graded by execution match, so success_rate is
    # execution accuracy (reports say so); "value": answers graded by the typed verifier.
    answer_mode: str = "value"
    # True: every episode was shown the schema (`EnvConfig.show_schema`), a control that is not
    # comparable with hidden-schema runs (reports say so).
    show_schema: bool = False
    # What generated a language-model policy's replies ("transformers", "vllm"); None for
    # policies that generate no text here (random, oracle, an OpenAI-compatible server).
    engine: str | None = None
    # The dtype its model computed in ("bfloat16", "float32"); None where `engine` is.
    dtype: str | None = None
    # How a language-model policy chose its replies ("greedy", "temperature T"); None for
    # policies that generate no text.
    decoding: str | None = None

    @property
    def success_label(self) -> str:
        """What success_rate measures, for tables and reports."""
        return "execution accuracy" if self.answer_mode == "sql" else "success rate"

    def to_json(self, include_episodes: bool = True) -> dict[str, Any]:
        data = asdict(self)
        if not include_episodes:
            data.pop("episodes")
        return data


SEEN_IN_TRAIN = "gold SQL seen in train"
NOT_IN_TRAIN = "gold SQL not in train"
GOLD_HAS_ROWS = "gold answer has rows"
GOLD_EMPTY = "gold answer is empty"


def with_question_facts(episode: EpisodeRecord, dataset: Dataset) -> EpisodeRecord:
    """An episode from a journal written before records kept their question's train overlap or
    empty gold, completed from the dataset.

    Args:
        episode: a journal's episode.
        dataset: the dataset it was played on.

    Returns:
        The episode with `seen_in_train` and `empty_gold` set (itself when both already were).
    """
    if episode.seen_in_train is not None and episode.empty_gold is not None:
        return episode
    return replace(
        episode,
        seen_in_train=dataset.seen_in_train(episode.question_id),
        empty_gold=dataset.get(episode.question_id).empty_gold,
    )


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a success rate (95 % with the default z).

    Args:
        successes: episodes that succeeded.
        n: episodes in all.
        z: the normal quantile of the interval's confidence.

    Returns:
        (low, high), both in [0, 1]; (0, 0) when there are no episodes.
    """
    if n == 0:
        return 0.0, 0.0
    rate = successes / n
    centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def group_stats(episodes: Sequence[EpisodeRecord]) -> dict[str, float]:
    """n, success rate, mean reward, mean steps and format-error rate of some episodes."""
    n = len(episodes)
    steps = sum(e.steps for e in episodes)
    return {
        "n": n,
        "success_rate": sum(e.success for e in episodes) / n if n else 0.0,
        "avg_reward": sum(e.total_reward for e in episodes) / n if n else 0.0,
        "avg_steps": steps / n if n else 0.0,
        "format_error_rate": sum(e.format_errors for e in episodes) / steps if steps else 0.0,
    }


def _grouped(
    episodes: Sequence[EpisodeRecord], key: Callable[[EpisodeRecord], str], order: Sequence[str] = ()
) -> dict[str, dict[str, float]]:
    groups: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for e in episodes:
        groups[key(e)].append(e)

    def rank(name: str) -> tuple[int, str]:
        return (order.index(name) if name in order else len(order), name)

    return {name: group_stats(groups[name]) for name in sorted(groups, key=rank)}


def successes_by_question(episodes: Sequence[EpisodeRecord]) -> dict[str, tuple[int, int]]:
    """How often each question was solved, for runs that play a question several times (`sqlenv
    eval --samples K`): its sampled success rate, and pass@K (solved at least once).

    Args:
        episodes: the episodes of a run.

    Returns:
        question_id -> (episodes that succeeded, episodes played), in the order questions first appear.
    """
    counts: dict[str, tuple[int, int]] = {}
    for e in episodes:
        solved, played = counts.get(e.question_id, (0, 0))
        counts[e.question_id] = (solved + e.success, played + 1)
    return counts


def summarise(
    policy: str,
    dataset: str,
    split: str,
    episodes: Sequence[EpisodeRecord],
    *,
    seed: int = 0,
    backend: str = "serial",
    wall_time_s: float = 0.0,
    journal_episodes: int = 0,
    planned_episodes: int = 0,
    finished_after_gap: int = 0,
    engine: str | None = None,
    dtype: str | None = None,
    decoding: str | None = None,
) -> EvaluationResult:
    """An `EvaluationResult` from episode records (overall and by difficulty, type, database).

    Raises:
        ValueError: when the episodes were played in different answer modes (a journal of one
            mode continued in the other), or some with the schema shown and some without, whose
            success rates do not add up.
    """
    modes = sorted({e.answer_mode for e in episodes})
    if len(modes) > 1:
        raise ValueError(
            f"the episodes were played in different answer modes ({', '.join(modes)}): "
            "report each mode's run on its own"
        )
    shown = {e.show_schema for e in episodes}
    if len(shown) > 1:
        raise ValueError(
            "some episodes were shown the schema and some were not: report the schema-shown "
            "control and the hidden-schema run each on its own"
        )
    overall = group_stats(episodes)
    return EvaluationResult(
        policy=policy,
        dataset=dataset,
        split=split,
        n_episodes=len(episodes),
        success_rate=overall["success_rate"],
        avg_reward=overall["avg_reward"],
        avg_steps=overall["avg_steps"],
        by_difficulty=_grouped(episodes, lambda e: e.difficulty, DIFFICULTY_ORDER),
        episodes=list(episodes),
        by_answer_type=_grouped(episodes, lambda e: e.answer_type),
        by_database=_grouped(episodes, lambda e: e.db_id),
        by_train_overlap=_grouped(
            [e for e in episodes if e.seen_in_train is not None],
            lambda e: SEEN_IN_TRAIN if e.seen_in_train else NOT_IN_TRAIN,
            (SEEN_IN_TRAIN, NOT_IN_TRAIN),
        ),
        by_gold=_grouped(
            [e for e in episodes if e.empty_gold is not None],
            lambda e: GOLD_EMPTY if e.empty_gold else GOLD_HAS_ROWS,
            (GOLD_HAS_ROWS, GOLD_EMPTY),
        ),
        format_error_rate=overall["format_error_rate"],
        success_interval=wilson_interval(sum(e.success for e in episodes), len(episodes)),
        call_formats=dict(sum((Counter(e.call_formats) for e in episodes), Counter())),
        answer_mode=modes[0] if modes else "value",
        show_schema=shown == {True},
        seed=seed,
        backend=backend,
        wall_time_s=round(wall_time_s, 4),
        journal_episodes=journal_episodes,
        planned_episodes=planned_episodes,
        finished_after_gap=finished_after_gap,
        engine=engine,
        dtype=dtype,
        decoding=decoding,
    )
