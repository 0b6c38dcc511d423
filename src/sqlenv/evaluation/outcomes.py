"""Compact per-episode outcomes: what is left of an evaluation when its transcripts and question
texts are dropped, and every number a results table shows, recomputed from it.

One outcomes file holds one evaluation row: a header (policy, dataset, split, seed, answer mode,
whether the schema was shown, engine, dtype, decoding, context, episode count, and for a stopped
run the planned count), then one short array per episode in `COLUMNS` order: the question id, its
database and difficulty, success, steps, format errors, whether it answered, whether its gold SQL
was seen in train and whether its gold answer is empty (1 / 0, null where unknown), and its total
reward. The answer mode and `show_schema` are the header's, because a run's episodes all share them
(`summarise` refuses a mixture). 972 episodes take about 57 kB, so the outcomes behind every row of
docs/lab-notebook.md can be committed.

`load_run` reads an evaluation's results (`sqlenv eval --json`, a report's results.json or its
folder) or an episode journal (a .jsonl file, or a `--journal` folder) into `RunOutcomes`;
`write_outcomes` / `read_outcomes` store and load the file. `recompute` gives a run's success with
its 95 % Wilson interval, by difficulty, train overlap and gold answer, its mean steps, reward and
format-error rate, by the formulas `summarise` uses (`group_stats`, `wilson_interval`), so the
numbers equal the ones the evaluation reported. `paired_tests` pairs runs played on the same
questions with McNemar's exact test (`sqlenv.evaluation.patterns`) and corrects the family of
pairs with Holm's method; `pairing_problems` says why two runs cannot be paired.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlenv.data import Dataset
from sqlenv.evaluation.journal import JOURNAL_FORMAT
from sqlenv.evaluation.patterns import ENDED_NO_ANSWER, episode_pattern, holm_adjusted, paired_successes
from sqlenv.evaluation.records import (
    DIFFICULTY_ORDER,
    GOLD_EMPTY,
    GOLD_HAS_ROWS,
    NOT_IN_TRAIN,
    SEEN_IN_TRAIN,
    EpisodeRecord,
    group_stats,
    wilson_interval,
    with_question_facts,
)
from sqlenv.evaluation.reports.files import read_report_json, results_from_json
from sqlenv.evaluation.reports.names import slug

OUTCOMES_FORMAT = "sqlenv-outcomes/1"
COLUMNS: tuple[str, ...] = (
    "question_id",
    "db_id",
    "difficulty",
    "success",
    "steps",
    "format_errors",
    "answered",
    "seen_in_train",
    "empty_gold",
    "reward",
)
# The questions of both groups at once: the results tables' "new SQL with rows" column.
NEW_SQL_WITH_ROWS = f"{NOT_IN_TRAIN}, {GOLD_HAS_ROWS}"


class OutcomesError(ValueError):
    """A file that is no outcomes file, or runs that cannot be paired; the message says which."""


@dataclass(frozen=True)
class Outcome:
    """One episode's outcome (`COLUMNS`)."""

    question_id: str
    db_id: str
    difficulty: str
    success: bool
    steps: int
    format_errors: int
    answered: bool
    seen_in_train: bool | None
    empty_gold: bool | None
    reward: float

    def row(self) -> list[Any]:
        """The episode as the file stores it (booleans as 1 / 0, unknown as null)."""

        def flag(value: bool | None) -> int | None:
            return None if value is None else int(value)

        return [
            self.question_id,
            self.db_id,
            self.difficulty,
            int(self.success),
            self.steps,
            self.format_errors,
            int(self.answered),
            flag(self.seen_in_train),
            flag(self.empty_gold),
            self.reward,
        ]


@dataclass(frozen=True)
class RunOutcomes:
    """One evaluation row: how it was played (the header) and its episodes' outcomes."""

    policy: str
    dataset: str
    split: str
    seed: int
    answer_mode: str
    show_schema: bool
    outcomes: tuple[Outcome, ...]
    engine: str | None = None
    dtype: str | None = None
    decoding: str | None = None
    # How a local model's conversation was kept (`LLMPolicy.context`), where the source recorded it.
    context: str | None = None
    # A stopped run: the plan's size (its outcomes are the plan's first episodes); 0 for a whole run.
    planned_episodes: int = 0
    path: Path | None = None  # the file it was read from, if any

    def header(self) -> dict[str, Any]:
        """The file's header fields, in the order the file keeps them."""
        return {
            "format": OUTCOMES_FORMAT,
            "policy": self.policy,
            "dataset": self.dataset,
            "split": self.split,
            "seed": self.seed,
            "answer_mode": self.answer_mode,
            "show_schema": self.show_schema,
            "engine": self.engine,
            "dtype": self.dtype,
            "decoding": self.decoding,
            "context": self.context,
            "n_episodes": len(self.outcomes),
            "planned_episodes": self.planned_episodes,
        }

    def records(self) -> list[EpisodeRecord]:
        """The outcomes as episode records without actions or transcripts, for the functions that
        summarise and pair records (`group_stats`, `paired_successes`)."""
        return [
            EpisodeRecord(
                question_id=o.question_id,
                db_id=o.db_id,
                difficulty=o.difficulty,
                answer_type="",
                success=o.success,
                total_reward=o.reward,
                steps=o.steps,
                actions=[],
                format_errors=o.format_errors,
                seen_in_train=o.seen_in_train,
                answer_mode=self.answer_mode,
                show_schema=self.show_schema,
                empty_gold=o.empty_gold,
            )
            for o in self.outcomes
        ]

    def to_text(self) -> str:
        """The file's text: the header and column names indented, then one episode per line."""
        lines = ["{"]
        lines += [f"  {json.dumps(key)}: {json.dumps(value)}," for key, value in self.header().items()]
        lines.append(f'  "columns": {json.dumps(list(COLUMNS))},')
        rows = [json.dumps(o.row(), separators=(",", ":")) for o in self.outcomes]
        if rows:
            lines += ['  "episodes": [', *(f"    {row}," for row in rows[:-1]), f"    {rows[-1]}", "  ]"]
        else:
            lines.append('  "episodes": []')
        return "\n".join([*lines, "}"]) + "\n"


def outcome_of(episode: EpisodeRecord) -> Outcome:
    """An episode record's outcome; `answered` is whether it ended with an answer (right or wrong)
    rather than out of steps or context, as `sqlenv patterns` counts endings."""
    return Outcome(
        question_id=episode.question_id,
        db_id=episode.db_id,
        difficulty=episode.difficulty,
        success=bool(episode.success),
        steps=episode.steps,
        format_errors=episode.format_errors,
        answered=episode_pattern(episode).ended != ENDED_NO_ANSWER,
        seen_in_train=episode.seen_in_train,
        empty_gold=episode.empty_gold,
        reward=episode.total_reward,
    )


def outcomes_from_episodes(
    episodes: Sequence[EpisodeRecord],
    *,
    policy: str,
    dataset: str,
    split: str,
    seed: int = 0,
    engine: str | None = None,
    dtype: str | None = None,
    decoding: str | None = None,
    context: str | None = None,
    planned_episodes: int = 0,
) -> RunOutcomes:
    """The outcomes of a run's episodes.

    Args:
        episodes: the run's episodes, in the run's order.
        policy, dataset, split, seed, engine, dtype, decoding, context: how the run was played.
        planned_episodes: a stopped run's planned episode count; 0 for a whole run.

    Returns:
        The run's outcomes, its answer mode and `show_schema` taken from the episodes.

    Raises:
        OutcomesError: the episodes were played in more than one answer mode, or some with the
            schema shown and some without (two runs, not one row).
    """
    modes = sorted({e.answer_mode for e in episodes})
    if len(modes) > 1:
        raise OutcomesError(f"the episodes were played in different answer modes ({', '.join(modes)})")
    shown = {e.show_schema for e in episodes}
    if len(shown) > 1:
        raise OutcomesError("some episodes were shown the schema and some were not")
    return RunOutcomes(
        policy=policy,
        dataset=dataset,
        split=split,
        seed=seed,
        answer_mode=modes[0] if modes else "value",
        show_schema=shown == {True},
        outcomes=tuple(outcome_of(e) for e in episodes),
        engine=engine,
        dtype=dtype,
        decoding=decoding,
        context=context,
        planned_episodes=planned_episodes,
    )


def _choose(names: Sequence[str], policy: str | None, source: Path) -> str:
    """The one policy of `names` to take from a source that holds several."""
    if policy is not None:
        if policy not in names:
            raise OutcomesError(
                f"{source} holds no results of policy {policy!r}; it holds: {', '.join(names)}"
            )
        return policy
    if len(names) != 1:
        raise OutcomesError(f"{source} holds the results of several policies ({', '.join(names)}): name one")
    return names[0]


def _from_results(path: Path, policy: str | None) -> tuple[dict[str, Any], list[EpisodeRecord]]:
    """Header fields and episodes of `sqlenv eval --json` output or a report's results.json."""
    try:
        source, data = read_report_json(path)
    except ValueError as error:
        raise OutcomesError(str(error)) from None
    # `sqlenv eval --policy a,b --json`: one results object per policy, keyed by its name.
    several = isinstance(data, dict) and data and "episodes" not in data
    if several and all(isinstance(v, dict) and "episodes" in v for v in data.values()):
        data = data[_choose(list(data), policy, source)]
    try:
        saved = results_from_json(source, data)
    except ValueError as error:
        raise OutcomesError(str(error)) from None
    if policy is not None and saved.policy != policy:
        raise OutcomesError(f"{source} holds the results of {saved.policy!r}, not {policy!r}")
    header = {
        "policy": saved.policy,
        "dataset": saved.dataset,
        "split": saved.split,
        "seed": int(data.get("seed", 0)),
        "engine": data.get("engine"),
        "dtype": data.get("dtype"),
        "decoding": data.get("decoding"),
        "context": data.get("context"),
        "planned_episodes": int(data.get("planned_episodes", 0)),
    }
    return header, saved.episodes


def _from_journal(path: Path, policy: str | None) -> tuple[dict[str, Any], list[EpisodeRecord]]:
    """Header fields and episodes of an episode journal (`sqlenv.evaluation.journal`): the plan's
    episodes up to the first one it lacks, as `sqlenv eval --journal-only` reports them."""
    if path.is_dir():
        journals = sorted(path.glob("*.jsonl"))
        if not journals:
            raise OutcomesError(f"{path} holds neither results.json nor an episode journal (*.jsonl)")
        by_name = {p.stem: p for p in journals}
        if policy is not None and slug(policy) in by_name:
            path = by_name[slug(policy)]
        else:
            path = by_name[_choose(list(by_name), None if policy is None else slug(policy), path)]
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise OutcomesError(f"{path} cannot be read: {error.strerror}") from None
    try:
        header = json.loads(lines[0])
    except (json.JSONDecodeError, IndexError):
        header = None
    if not isinstance(header, dict) or header.get("format") != JOURNAL_FORMAT:
        raise OutcomesError(f"{path} is not an episode journal ({JOURNAL_FORMAT})")
    if policy is not None and header.get("policy") != policy:
        raise OutcomesError(f"{path} is the journal of {header.get('policy')!r}, not {policy!r}")
    done: dict[int, EpisodeRecord] = {}
    for number, line in enumerate(lines[1:], start=2):
        try:
            entry = json.loads(line)
            done[int(entry["index"])] = EpisodeRecord.from_json(entry["episode"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            if number == len(lines):  # cut short by a stopped run: that episode is not finished
                break
            raise OutcomesError(f"{path} line {number} is not a journal entry") from None
    planned = int(header.get("episodes", len(done)))
    finished = next((i for i in range(planned) if i not in done), planned)
    if finished == 0:
        raise OutcomesError(f"{path} holds no finished episode at the start of its plan")
    fields = {
        key: header.get(key)
        for key in ("policy", "dataset", "split", "engine", "dtype", "decoding", "context")
    }
    fields |= {"seed": int(header.get("seed", 0)), "planned_episodes": planned if finished < planned else 0}
    return fields, [done[i] for i in range(finished)]


def load_run(
    path: str | Path,
    policy: str | None = None,
    dataset_for: Callable[[str], Dataset] | None = None,
) -> RunOutcomes:
    """The outcomes of an evaluation, from its results or its journal.

    Args:
        path: `sqlenv eval --json` output, a report's results.json or its folder, an episode journal
            (.jsonl), or a `--journal` folder.
        policy: which policy's results to take where the source holds several (a `--json` file of
            several policies, a journal folder); else the source's only one.
        dataset_for: loads a dataset by name; used only when episodes were recorded before records
            kept whether their gold answer is empty, to complete their question facts
            (`with_question_facts`). Without it such facts stay unknown (null).

    Returns:
        The run's outcomes (`path` not set: they were not read from an outcomes file).

    Raises:
        OutcomesError: the source is missing, unreadable, of another kind, holds several policies
            and none is named, or mixes answer modes or schema settings; the message says which.
    """
    source = Path(path)
    if not source.exists():
        raise OutcomesError(f"{source}: no such file or folder")
    journal = source.suffix == ".jsonl" or (source.is_dir() and not (source / "results.json").is_file())
    fields, episodes = _from_journal(source, policy) if journal else _from_results(source, policy)
    if dataset_for is not None and any(e.empty_gold is None for e in episodes):
        dataset = dataset_for(str(fields["dataset"]))
        episodes = [with_question_facts(e, dataset) for e in episodes]
    return outcomes_from_episodes(episodes, **fields)


def write_outcomes(run: RunOutcomes, path: str | Path) -> int:
    """Write `run` as an outcomes file (its folder created as needed).

    Args:
        run: the outcomes.
        path: the file to write.

    Returns:
        The file's size in bytes.
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = run.to_text()
    out.write_text(text, encoding="utf-8")
    return len(text.encode())


def _flag(value: Any, nullable: bool) -> bool | None:
    if value is None and nullable:
        return None
    if value in (0, 1) and not isinstance(value, float):
        return bool(value)
    raise ValueError(f"{value!r} is not 1 or 0" + (" or null" if nullable else ""))


def _count(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError(f"{value!r} is not a count")


def _text(value: Any) -> str:
    if isinstance(value, str) and value:
        return value
    raise ValueError(f"{value!r} is not a non-empty string")


def _number(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    raise ValueError(f"{value!r} is not a number")


_PARSERS: tuple[Callable[[Any], Any], ...] = (
    _text,
    _text,
    _text,
    lambda v: _flag(v, False),
    _count,
    _count,
    lambda v: _flag(v, False),
    lambda v: _flag(v, True),
    lambda v: _flag(v, True),
    _number,
)


def read_outcomes(path: str | Path) -> RunOutcomes:
    """Read an outcomes file back.

    Args:
        path: a file `write_outcomes` wrote.

    Returns:
        Its outcomes, with `path` set.

    Raises:
        OutcomesError: the file is missing, not JSON, of another format, or a field or an episode is
            not what the format says; the message names the file and the episode.
    """
    source = Path(path)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OutcomesError(f"{source}: no such file") from None
    except OSError as error:
        raise OutcomesError(f"{source} cannot be read: {error.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise OutcomesError(f"{source} is not JSON: {error}") from None
    if not isinstance(data, dict) or data.get("format") != OUTCOMES_FORMAT:
        raise OutcomesError(
            f"{source} is not an outcomes file ({OUTCOMES_FORMAT}): write one with `sqlenv results outcomes`"
        )
    if data.get("columns") != list(COLUMNS):
        raise OutcomesError(f"{source}: its columns are {data.get('columns')!r}, not {list(COLUMNS)!r}")
    rows = data.get("episodes")
    if not isinstance(rows, list):
        raise OutcomesError(f"{source}: its episodes are not a list")
    outcomes = []
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, list) or len(row) != len(COLUMNS):
            raise OutcomesError(f"{source}: episode {number} is not a list of {len(COLUMNS)} values")
        values = []
        for column, parse, value in zip(COLUMNS, _PARSERS, row, strict=True):
            try:
                values.append(parse(value))
            except ValueError as error:
                raise OutcomesError(f"{source}: episode {number}, {column}: {error}") from None
        outcomes.append(Outcome(*values))
    try:
        run = RunOutcomes(
            policy=_text(data.get("policy")),
            dataset=_text(data.get("dataset")),
            split=_text(data.get("split")),
            seed=int(_number(data.get("seed"))),
            answer_mode=_text(data.get("answer_mode")),
            show_schema=bool(_flag(data.get("show_schema"), False)),
            outcomes=tuple(outcomes),
            engine=data.get("engine"),
            dtype=data.get("dtype"),
            decoding=data.get("decoding"),
            context=data.get("context"),
            planned_episodes=_count(data.get("planned_episodes", 0)),
            path=source,
        )
    except ValueError as error:
        raise OutcomesError(f"{source}: a header field is wrong: {error}") from None
    if data.get("n_episodes") != len(outcomes):
        raise OutcomesError(
            f"{source}: n_episodes is {data.get('n_episodes')!r} but it holds {len(outcomes)} episodes"
        )
    return run


@dataclass(frozen=True)
class Count:
    """Successes among some episodes, with the rate and its 95 % Wilson interval."""

    successes: int
    n: int

    @property
    def rate(self) -> float:
        return self.successes / self.n if self.n else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.successes, self.n)

    def to_json(self) -> dict[str, Any]:
        return {"successes": self.successes, "n": self.n, "rate": self.rate, "interval": list(self.interval)}


def _counts(
    records: Sequence[EpisodeRecord], key: Callable[[EpisodeRecord], str | None], order: Sequence[str]
) -> dict[str, Count]:
    """Successes per group (`key` None: in no group), groups in `order`, then any others by name."""
    groups: dict[str, list[EpisodeRecord]] = {}
    for r in records:
        name = key(r)
        if name is not None:
            groups.setdefault(name, []).append(r)
    ranked = sorted(groups, key=lambda n: (order.index(n) if n in order else len(order), n))
    return {name: Count(sum(r.success for r in groups[name]), len(groups[name])) for name in ranked}


def _overlap(r: EpisodeRecord) -> str | None:
    return None if r.seen_in_train is None else SEEN_IN_TRAIN if r.seen_in_train else NOT_IN_TRAIN


def _gold(r: EpisodeRecord) -> str | None:
    return None if r.empty_gold is None else GOLD_EMPTY if r.empty_gold else GOLD_HAS_ROWS


def _new_sql_with_rows(r: EpisodeRecord) -> str | None:
    return NEW_SQL_WITH_ROWS if r.seen_in_train is False and r.empty_gold is False else None


def recompute(run: RunOutcomes) -> dict[str, Any]:
    """Every number a results table shows for one run, from its outcomes.

    Args:
        run: a run's outcomes.

    Returns:
        A JSON-ready dict: the header fields; `success` (successes, n, rate, 95 % Wilson interval);
        the same per group in `by_difficulty`, `by_train_overlap` (SEEN_IN_TRAIN / NOT_IN_TRAIN,
        where known), `by_gold` (GOLD_HAS_ROWS / GOLD_EMPTY, where known) and `new_sql_with_rows`
        (None when no such question); `answered` (episodes that ended with an answer, as a
        count); `mean_steps`, `mean_reward` and `format_error_rate` (format errors per step), by
        `group_stats`, the formula of the evaluation's own summary.
    """
    records = run.records()
    overall = group_stats(records)
    new_rows = _counts(records, _new_sql_with_rows, ())
    return {
        **run.header(),
        "file": None if run.path is None else str(run.path),
        "success": Count(sum(r.success for r in records), len(records)).to_json(),
        "by_difficulty": {
            k: c.to_json() for k, c in _counts(records, lambda r: r.difficulty, DIFFICULTY_ORDER).items()
        },
        "by_train_overlap": {
            k: c.to_json() for k, c in _counts(records, _overlap, (SEEN_IN_TRAIN, NOT_IN_TRAIN)).items()
        },
        "by_gold": {k: c.to_json() for k, c in _counts(records, _gold, (GOLD_HAS_ROWS, GOLD_EMPTY)).items()},
        "new_sql_with_rows": new_rows[NEW_SQL_WITH_ROWS].to_json() if new_rows else None,
        "answered": Count(sum(o.answered for o in run.outcomes), len(records)).to_json(),
        "mean_steps": overall["avg_steps"],
        "mean_reward": overall["avg_reward"],
        "format_error_rate": overall["format_error_rate"],
    }


def pairing_problems(first: RunOutcomes, second: RunOutcomes) -> list[str]:
    """Why two runs cannot be paired question by question; empty when they can.

    Args:
        first, second: two runs' outcomes.

    Returns:
        One line per difference: the dataset, the split, the answer mode (success means another
        thing in each), or the questions played (as a multiset: a question played K times in one
        run must be played K times in the other).
    """
    problems = [
        f"their {name} differ ({getattr(first, attr)!r} and {getattr(second, attr)!r})"
        for name, attr in (("datasets", "dataset"), ("splits", "split"), ("answer modes", "answer_mode"))
        if getattr(first, attr) != getattr(second, attr)
    ]

    def played(run: RunOutcomes) -> dict[str, int]:
        counts: dict[str, int] = {}
        for o in run.outcomes:
            counts[o.question_id] = counts.get(o.question_id, 0) + 1
        return counts

    a, b = played(first), played(second)
    if a != b:
        only_a, only_b = sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())
        times = sorted(q for q in a.keys() & b.keys() if a[q] != b[q])
        details = [
            f"{len(only_a)} only in the first (e.g. {only_a[0]})" if only_a else "",
            f"{len(only_b)} only in the second (e.g. {only_b[0]})" if only_b else "",
            f"{len(times)} played a different number of times (e.g. {times[0]})" if times else "",
        ]
        problems.append(f"their questions differ: {'; '.join(d for d in details if d)}")
    return problems


# The groups each pair is also tested within (raw p-values; Holm corrects the overall tests only).
PAIR_GROUPS: tuple[tuple[str, Callable[[EpisodeRecord], bool]], ...] = (
    (GOLD_HAS_ROWS, lambda r: r.empty_gold is False),
    (SEEN_IN_TRAIN, lambda r: r.seen_in_train is True),
    (NOT_IN_TRAIN, lambda r: r.seen_in_train is False),
)


def _paired(first: Sequence[EpisodeRecord], second: Sequence[EpisodeRecord]) -> dict[str, Any]:
    pair = paired_successes(first, second)
    return {
        "questions": pair.shared,
        "both": pair.both,
        "only_first": pair.only_first,
        "only_second": pair.only_second,
        "mcnemar_p": pair.mcnemar_p_value,
    }


def paired_tests(
    pairs: Sequence[tuple[tuple[str, RunOutcomes], tuple[str, RunOutcomes]]],
) -> list[dict[str, Any]]:
    """Pair runs question by question: McNemar's exact test for each pair, Holm's correction across
    the pairs, and the same test within `PAIR_GROUPS` where the outcomes know the group.

    Args:
        pairs: ((label, run), (label, run)) per pair, the labels naming the runs in the output.

    Returns:
        Per pair, in the order given: `first`, `second` (the labels), `questions`, `both`,
        `only_first` (lost, going from the first to the second), `only_second` (gained),
        `mcnemar_p`, `holm_p` (across all the pairs given), and `groups`: the same counts and raw
        p per group.

    Raises:
        OutcomesError: a pair whose runs cannot be paired (`pairing_problems`), naming the pair and
            every difference.
    """
    results = []
    for (first_label, first), (second_label, second) in pairs:
        problems = pairing_problems(first, second)
        if problems:
            raise OutcomesError(f"cannot pair {first_label} with {second_label}: " + "; ".join(problems))
        a, b = first.records(), second.records()
        groups = {}
        for name, member in PAIR_GROUPS:
            in_a, in_b = [r for r in a if member(r)], [r for r in b if member(r)]
            if in_a and in_b:
                groups[name] = _paired(in_a, in_b)
        results.append({"first": first_label, "second": second_label, **_paired(a, b), "groups": groups})
    for result, adjusted in zip(results, holm_adjusted([r["mcnemar_p"] for r in results]), strict=True):
        result["holm_p"] = adjusted
    return results
