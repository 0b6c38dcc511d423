"""What episodes did on the way to their verdict: how they ended, which actions they used, and the
patterns that sink a policy or get it out of trouble.

The patterns are the ones reading hundreds of transcripts by hand kept finding: a query that fails,
the same action sent again (a greedy model repeats a failing query until the budget is gone), an
answer given without any query that ran (a guess, or a column name after an SQL error), output that
was no valid action at all, and the one way out of a failed query: a later query that ran. What an
episode did right after its first failed query (the same query again, the same query restyled, a
changed query, a look at a table, an answer) says whether a policy tries to fix its errors.
Everything here is computed from `EpisodeRecord`s alone, so it applies to a saved `results.json` as
well as to a fresh evaluation; the report (`sqlenv.evaluation.reports`) renders it in `summary.md` and stores
it in `results.json`. For two runs, `paired_successes` says which questions each one solved, and
`PairedSuccesses.mcnemar_p_value` whether the difference is more than chance; where several pairs
are tested at once, `holm_adjusted` corrects their p-values for the number of tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import comb
from typing import Any

from sqlenv.env.rewards import repeat_text
from sqlenv.evaluation.records import EpisodeRecord, StepRecord

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

# The step right after an episode's first failed query.
NEXT_SAME_QUERY = "the same query"  # as the repeat penalty compares (`repeat_text`)
NEXT_RESTYLED_QUERY = "the same query restyled (case or spacing)"
NEXT_CHANGED_QUERY = "a changed query"
NEXT_DESCRIBE = "DESCRIBE"
NEXT_SAMPLE = "SAMPLE"
NEXT_ANSWER = "ANSWER"
NEXT_NO_VALID_ACTION = "no valid action"
NEXT_NOTHING = "nothing: the budget ran out"
AFTER_FIRST_FAILURE: tuple[str, ...] = (
    NEXT_SAME_QUERY,
    NEXT_RESTYLED_QUERY,
    NEXT_CHANGED_QUERY,
    NEXT_DESCRIBE,
    NEXT_SAMPLE,
    NEXT_ANSWER,
    NEXT_NO_VALID_ACTION,
    NEXT_NOTHING,
)


@dataclass(frozen=True)
class EpisodePattern:
    """One episode: how it ended, how many actions of each kind it sent, which patterns it shows."""

    ended: str
    action_counts: dict[str, int]
    patterns: frozenset[str]
    # One of AFTER_FIRST_FAILURE, or None when no query failed (or there is no transcript).
    after_first_failure: str | None = None


def _kind(action: str) -> str:
    return action.split(maxsplit=1)[0].upper() if action.strip() else ""


def _repeat_key(action: str) -> tuple[str, str]:
    """A transcript's action as the environment's repeat penalty compares it (`repeat_text`)."""
    kind, _, argument = action.strip().partition(" ")
    return kind.upper(), repeat_text(argument)


def _next_step(failed: StepRecord, following: StepRecord | None) -> str:
    """What `following`, the step after the failed query `failed`, did (one of AFTER_FIRST_FAILURE)."""
    if following is None:
        return NEXT_NOTHING
    kind = _kind(following.action)
    if kind == "QUERY":
        before, after = _repeat_key(failed.action)[1], _repeat_key(following.action)[1]
        if after == before:
            return NEXT_SAME_QUERY
        # Case and spacing only, e.g. `COUNT(*)` for `count(*)` or `a , b` for `a,b`: the error stays.
        if "".join(after.split()).lower() == "".join(before.split()).lower():
            return NEXT_RESTYLED_QUERY
        return NEXT_CHANGED_QUERY
    return {"DESCRIBE": NEXT_DESCRIBE, "SAMPLE": NEXT_SAMPLE, "ANSWER": NEXT_ANSWER}.get(
        kind, NEXT_NO_VALID_ACTION
    )


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
    after_first_failure = None
    for index, step in enumerate(episode.transcript):
        kind = _kind(step.action)
        if kind == "ANSWER":
            if not query_ran:
                found.add(ANSWERED_WITHOUT_DATA)
            if previous_failed_query:
                found.add(ANSWERED_AFTER_FAILURE)
            break
        failed_query = kind == "QUERY" and bool(step.error)
        if failed_query and not a_query_failed:
            following = episode.transcript[index + 1] if index + 1 < len(episode.transcript) else None
            after_first_failure = _next_step(step, following)
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
    return EpisodePattern(
        ended=ended, action_counts=counts, patterns=frozenset(found), after_first_failure=after_first_failure
    )


def pattern_summary(episodes: Sequence[EpisodeRecord]) -> dict[str, Any]:
    """Counts over `episodes`:
    - `ended`: episodes per ending (ENDINGS);
    - `actions`: per action kind, the episodes that used it and the mean count per episode;
    - `patterns`: per pattern, the episodes that show it and the success rate among them. Transcript
      patterns are left out when no episode has a transcript (they could not be looked for);
    - `after_first_failed_query`: per AFTER_FIRST_FAILURE step, the episodes whose first failed query
      it followed and the success rate among them (empty without transcripts).
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
    paired = list(zip(episodes, per_episode, strict=True))

    def among(showing: list[EpisodeRecord]) -> dict[str, float]:
        return {
            "episodes": len(showing),
            "success_rate": sum(e.success for e in showing) / len(showing) if showing else 0.0,
        }

    has_transcripts = any(e.transcript for e in episodes)
    looked_for = PATTERNS if has_transcripts else (FORMAT_ERROR,)
    patterns = {name: among([e for e, p in paired if name in p.patterns]) for name in looked_for}
    after = {
        name: among([e for e, p in paired if p.after_first_failure == name])
        for name in (AFTER_FIRST_FAILURE if has_transcripts else ())
    }
    return {
        "n": n,
        "ended": ended,
        "actions": actions,
        "patterns": patterns,
        "after_first_failed_query": after,
    }


@dataclass(frozen=True)
class PairedSuccesses:
    """Two runs on the questions both played: how many both solved, and how many only one did."""

    shared: int
    both: int
    only_first: int
    only_second: int

    @property
    def mcnemar_p_value(self) -> float:
        """The exact McNemar test's two-sided p-value: how likely a split of the discordant
        questions (solved by one run only) at least this uneven is if either run were as likely to
        be the one that solved each. Exact (binomial, p = 1/2) rather than the chi-square
        approximation, because a few dozen discordant questions are typical here.

        Returns:
            1.0 when no question is discordant, else min(1, 2 * P(X <= min(b, c))) for
            X ~ Binomial(b + c, 1/2), b and c the two discordant counts.
        """
        discordant = self.only_first + self.only_second
        if discordant == 0:
            return 1.0
        smaller = min(self.only_first, self.only_second)
        tail = sum(comb(discordant, k) for k in range(smaller + 1)) / 2**discordant
        return min(1.0, 2 * tail)


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


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down correction of several tests' p-values (one family, e.g. each pair of models
    compared with McNemar's test): the adjusted p-values, each compared with the level (0.05) as it
    stands. It holds the chance of any false positive in the family at that level, like Bonferroni
    (every p times the number of tests), but multiplies the k-th smallest p only by the number of
    tests not yet rejected, so it rejects at least as much.

    Args:
        p_values: the family's p-values, each in [0, 1], in any order.

    Returns:
        The adjusted p-values in the same order: with m tests and p(1) <= ... <= p(m), the j-th
        smallest becomes max over i <= j of min(1, (m - i + 1) * p(i)) (the maximum keeps them in
        the order of the raw p-values).

    Raises:
        ValueError: a p-value outside [0, 1] (or NaN).
    """
    bad = [p for p in p_values if not 0.0 <= p <= 1.0]
    if bad:
        raise ValueError(f"p-values lie in [0, 1], got {bad[0]!r}")
    m = len(p_values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted
