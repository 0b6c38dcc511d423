"""What episodes did on the way to their verdict: how they ended, which actions they used, and the
patterns that sink a policy or get it out of trouble.

The patterns are the ones reading hundreds of transcripts by hand kept finding: a query that fails,
the same action sent again (a greedy model repeats a failing query until the budget is gone), an
answer given without any query that ran (a guess, or a column name after an SQL error), output that
was no valid action at all, and the one way out of a failed query: a later query that ran.
Everything here is computed from `EpisodeRecord`s alone, so it applies to a saved `results.json` as
well as to a fresh evaluation; the report (`sqlenv.reports`) renders it in `summary.md` and stores
it in `results.json`. For two runs, `paired_successes` says which questions each one solved."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlenv.evaluation import EpisodeRecord
from sqlenv.rewards import repeat_text

EXPLORATION_KINDS: tuple[str, ...] = ("DESCRIBE", "SAMPLE", "QUERY")
ACTION_KINDS: tuple[str, ...] = (*EXPLORATION_KINDS, "ANSWER")

ENDED_CORRECT = "correct answer"
ENDED_WRONG = "wrong answer"
ENDED_NO_ANSWER = "no answer: the step budget ran out"
ENDINGS: tuple[str, ...] = (ENDED_CORRECT, ENDED_WRONG, ENDED_NO_ANSWER)

FAILED_QUERY = "a query failed"
REPEATED_ACTION = "sent an earlier action again"
ANSWERED_WITHOUT_DATA = "answered without any query that ran"
ANSWERED_AFTER_FAILURE = "answered right after a failed query"
FORMAT_ERROR = "an output was no valid action"
QUERY_RAN_AFTER_FAILURE = "a query ran after a failed one"
# Patterns read from the transcript; FORMAT_ERROR comes from the episode's own count.
TRANSCRIPT_PATTERNS: tuple[str, ...] = (
    FAILED_QUERY,
    REPEATED_ACTION,
    ANSWERED_WITHOUT_DATA,
    ANSWERED_AFTER_FAILURE,
    QUERY_RAN_AFTER_FAILURE,
)
PATTERNS: tuple[str, ...] = (*TRANSCRIPT_PATTERNS, FORMAT_ERROR)


@dataclass(frozen=True)
class EpisodePattern:
    """One episode: how it ended, how many actions of each kind it sent, which patterns it shows."""

    ended: str
    action_counts: dict[str, int]
    patterns: frozenset[str]


def _kind(action: str) -> str:
    return action.split(maxsplit=1)[0].upper() if action.strip() else ""


def _repeat_key(action: str) -> tuple[str, str]:
    """A transcript's action as the environment's repeat penalty compares it (`repeat_text`)."""
    kind, _, argument = action.strip().partition(" ")
    return kind.upper(), repeat_text(argument)


def episode_pattern(episode: EpisodeRecord) -> EpisodePattern:
    """The ending, action counts and patterns of one episode. Transcript patterns need the
    transcript (an evaluation run with `record_transcript=False` has none): without it only
    FORMAT_ERROR can be found."""
    kinds = [_kind(a) for a in episode.actions]
    counts = {kind: kinds.count(kind) for kind in ACTION_KINDS}
    if episode.success:
        ended = ENDED_CORRECT
    else:
        ended = ENDED_WRONG if kinds and kinds[-1] == "ANSWER" else ENDED_NO_ANSWER
    found: set[str] = {FORMAT_ERROR} if episode.format_errors else set()
    seen: set[tuple[str, str]] = set()
    query_ran = False
    a_query_failed = False
    previous_failed_query = False
    for step in episode.transcript:
        kind = _kind(step.action)
        if kind == "ANSWER":
            if not query_ran:
                found.add(ANSWERED_WITHOUT_DATA)
            if previous_failed_query:
                found.add(ANSWERED_AFTER_FAILURE)
            break
        failed_query = kind == "QUERY" and bool(step.error)
        if failed_query:
            found.add(FAILED_QUERY)
        query_ran_now = kind == "QUERY" and not step.error
        if query_ran_now and a_query_failed:
            found.add(QUERY_RAN_AFTER_FAILURE)
        query_ran = query_ran or query_ran_now
        a_query_failed = a_query_failed or failed_query
        if kind in EXPLORATION_KINDS:
            key = _repeat_key(step.action)
            if key in seen:
                found.add(REPEATED_ACTION)
            seen.add(key)
        previous_failed_query = failed_query
    return EpisodePattern(ended=ended, action_counts=counts, patterns=frozenset(found))


def pattern_summary(episodes: Sequence[EpisodeRecord]) -> dict[str, Any]:
    """Counts over `episodes`:
    - `ended`: episodes per ending (ENDINGS);
    - `actions`: per action kind, the episodes that used it and the mean count per episode;
    - `patterns`: per pattern, the episodes that show it and the success rate among them. Transcript
      patterns are left out when no episode has a transcript (they could not be looked for).
    """
    n = len(episodes)
    per_episode = [episode_pattern(e) for e in episodes]
    ended = {name: sum(p.ended == name for p in per_episode) for name in ENDINGS}
    actions = {
        kind: {
            "episodes": sum(p.action_counts[kind] > 0 for p in per_episode),
            "mean_per_episode": sum(p.action_counts[kind] for p in per_episode) / n if n else 0.0,
        }
        for kind in ACTION_KINDS
    }
    looked_for = PATTERNS if any(e.transcript for e in episodes) else (FORMAT_ERROR,)
    patterns = {}
    for name in looked_for:
        showing = [e for e, p in zip(episodes, per_episode, strict=True) if name in p.patterns]
        patterns[name] = {
            "episodes": len(showing),
            "success_rate": sum(e.success for e in showing) / len(showing) if showing else 0.0,
        }
    return {"n": n, "ended": ended, "actions": actions, "patterns": patterns}


@dataclass(frozen=True)
class PairedSuccesses:
    """Two runs on the questions both played: how many both solved, and how many only one did."""

    shared: int
    both: int
    only_first: int
    only_second: int


def paired_successes(first: Sequence[EpisodeRecord], second: Sequence[EpisodeRecord]) -> PairedSuccesses:
    """Compare two runs question by question (by `question_id`), on the questions both played. A
    question played more than once in a run counts as solved there if any of its episodes was."""

    def solved(episodes: Sequence[EpisodeRecord]) -> dict[str, bool]:
        by_question: dict[str, bool] = {}
        for e in episodes:
            by_question[e.question_id] = by_question.get(e.question_id, False) or e.success
        return by_question

    a, b = solved(first), solved(second)
    shared = a.keys() & b.keys()
    return PairedSuccesses(
        shared=len(shared),
        both=sum(a[q] and b[q] for q in shared),
        only_first=sum(a[q] and not b[q] for q in shared),
        only_second=sum(b[q] and not a[q] for q in shared),
    )
