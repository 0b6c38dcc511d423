"""Which train questions a GRPO run learns from, by how often the model it starts from solves them.

A GRPO group learns only where its rollouts differ in correctness: a question the start model never
solves gives groups that are all wrong (their advantages are the shaping's hundredths), one it
always solves gives groups that are all right. `sqlenv eval --split train --temperature T
--samples K` plays every train question K times with sampled replies, as GRPO's rollouts are; its
results.json gives each question's pass rate (solved / played). `grpo.pass_rates_from` names that
file, and the run keeps the questions whose rate lies in `grpo.pass_rate_range`, so that most of its
groups mix right and wrong answers (the offline form of DAPO's dynamic sampling, which drops groups
whose rewards are all equal after generating them).

`sqlenv train pass-rates` boils a results.json (megabytes of transcripts) down to a pass-rate table
(a few kilobytes: each question's difficulty, solved and played, and how they were played), which
`grpo.pass_rates_from` reads as well. A table kept under docs/ lets a run be repeated from its SFT
model without the hour and a half of sampled play that measured it."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "PASS_RATE_TABLE_KIND",
    "PassRates",
    "questions_in_pass_rate_range",
    "read_pass_rates",
    "solved_of_k_by_difficulty",
    "write_pass_rate_table",
]

# The `kind` a pass-rate table declares, so that no other JSON is read as one.
PASS_RATE_TABLE_KIND = "sqlenv pass-rate table v1"


@dataclass(frozen=True)
class PassRates:
    """Each question's successes in a sampled evaluation, and how it was played."""

    path: Path
    policy: str
    dataset: str
    split: str
    decoding: str | None
    answer_modes: frozenset[str]
    # question_id -> (difficulty, episodes solved, episodes played), in the order first played.
    questions: dict[str, tuple[str, int, int]]


def read_pass_rates(path: str | Path) -> PassRates:
    """Read the pass rates in a report's results.json (or its folder) or in a pass-rate table.

    Args:
        path: a results.json, the report folder holding one, or a table `write_pass_rate_table` wrote.

    Returns:
        The questions' counts, with the policy, dataset, split, decoding and answer modes they were
        played with.

    Raises:
        ValueError: the file is missing, not JSON, or neither a results.json nor a pass-rate table,
            or a table's rows are not [difficulty, solved, played] with 0 <= solved <= played, played > 0.
    """
    from sqlenv.evaluation.records import successes_by_question
    from sqlenv.evaluation.reports.files import read_report_json, results_from_json

    source, data = read_report_json(path)  # parsed once: a results.json runs to megabytes
    if isinstance(data, dict) and data.get("kind") == PASS_RATE_TABLE_KIND:
        return _table_from_json(source, data)
    saved = results_from_json(source, data)
    difficulty = {episode.question_id: episode.difficulty for episode in saved.episodes}
    return PassRates(
        path=saved.path,
        policy=saved.policy,
        dataset=saved.dataset,
        split=saved.split,
        decoding=saved.decoding,
        answer_modes=frozenset(e.answer_mode for e in saved.episodes),
        questions={q: (difficulty[q], *counts) for q, counts in successes_by_question(saved.episodes).items()},
    )


def _table_from_json(source: Path, data: dict[str, Any]) -> PassRates:
    """The pass rates in a parsed pass-rate table; ValueError for a row that is no row."""
    rows = data.get("questions")
    if not isinstance(rows, dict):
        raise ValueError(f"{source}: a pass-rate table without its questions")
    questions: dict[str, tuple[str, int, int]] = {}
    for question, row in rows.items():
        valid = (
            isinstance(row, list)
            and len(row) == 3
            and isinstance(row[0], str)
            and all(isinstance(n, int) and not isinstance(n, bool) for n in row[1:])
            and 0 <= row[1] <= row[2]
            and row[2] > 0
        )
        if not valid:
            raise ValueError(f"{source}: question {question!r} is {row!r}, not [difficulty, solved, played]")
        questions[question] = (row[0], row[1], row[2])
    return PassRates(
        path=source,
        policy=str(data.get("policy", "?")),
        dataset=str(data.get("dataset", "?")),
        split=str(data.get("split", "?")),
        decoding=data.get("decoding"),
        answer_modes=frozenset(str(mode) for mode in data.get("answer_modes", [])),
        questions=questions,
    )


def _refuse_greedy(rates: PassRates, where: str) -> None:
    """ValueError when the rates were decoded greedily: a question's episodes are then alike."""
    if rates.decoding == "greedy":
        raise ValueError(
            f"{where} decoded greedily: a pass rate needs sampled replies, and here every rate is 0 or 1 "
            "(sqlenv eval --temperature T --samples K, T the run's grpo.temperature)"
        )


def write_pass_rate_table(results: str | Path, out: str | Path) -> PassRates:
    """Write the pass-rate table of a sampled evaluation: what `grpo.pass_rates_from` needs of it.

    Args:
        results: the results.json (or its report folder) of `sqlenv eval --temperature T --samples K`.
        out: the JSON file to write.

    Returns:
        The pass rates written (their `path` is `out`).

    Raises:
        ValueError: the results cannot be read, or were decoded greedily (every rate 0 or 1).
    """
    rates = read_pass_rates(results)
    _refuse_greedy(rates, str(rates.path))
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    head = {
        "kind": PASS_RATE_TABLE_KIND,
        "policy": rates.policy,
        "dataset": rates.dataset,
        "split": rates.split,
        "decoding": rates.decoding,
        "answer_modes": sorted(rates.answer_modes),
    }
    # One question a line: a table kept under docs/ stays readable and diffs by question.
    fields = ",\n".join(f"  {json.dumps(key)}: {json.dumps(value)}" for key, value in head.items())
    rows = ",\n".join(f"    {json.dumps(q)}: {json.dumps(list(row))}" for q, row in rates.questions.items())
    target.write_text("{\n" + fields + ',\n  "questions": {\n' + rows + "\n  }\n}\n", encoding="utf-8")
    return dataclasses.replace(rates, path=target)


def solved_of_k_by_difficulty(rates: PassRates) -> dict[str, Counter[int]]:
    """How many questions of each difficulty were solved in 0, 1, ... of their episodes.

    Args:
        rates: pass rates whose questions were each played the same number of times.

    Returns:
        difficulty -> Counter(episodes solved -> questions), difficulties in the order first met.
    """
    table: dict[str, Counter[int]] = {}
    for difficulty, solved, _ in rates.questions.values():
        table.setdefault(difficulty, Counter())[solved] += 1
    return table


def questions_in_pass_rate_range(
    results: str | Path,
    *,
    dataset: str,
    answer_mode: str,
    low: float,
    high: float,
) -> tuple[set[str], dict[str, int]]:
    """The train questions whose pass rate in a sampled evaluation lies in [low, high].

    Args:
        results: the results.json (or its report folder) of `sqlenv eval --split train
            --temperature T --samples K` with the model GRPO starts from, or its pass-rate table.
        dataset: the dataset the run trains on (the results must be of it).
        answer_mode: the run's answer mode (the results must have played it).
        low: the lowest pass rate kept (0 keeps the never solved).
        high: the highest pass rate kept (1 keeps the always solved).

    Returns:
        (the question ids kept, counts: `questions` in the results, `kept`, `below` the range,
        `above` it).

    Raises:
        ValueError: the file is no results.json nor pass-rate table, or of another dataset, split or
            answer mode, or its replies were decoded greedily (every rate would be 0 or 1), or the
            range is not within [0, 1].
    """
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"grpo.pass_rate_range: [{low}, {high}] is not a range within [0, 1]")
    saved = read_pass_rates(results)
    where = f"grpo.pass_rates_from: {saved.path}"
    if saved.dataset != dataset or saved.split != "train":
        raise ValueError(
            f"{where} played {saved.dataset}/{saved.split}; the run trains on {dataset}/train "
            f"(sqlenv eval --dataset {dataset} --split train --temperature T --samples K)"
        )
    if saved.answer_modes - {answer_mode}:
        modes = ", ".join(sorted(saved.answer_modes))
        raise ValueError(f"{where} answered in mode {modes}; the run answers in {answer_mode}")
    _refuse_greedy(saved, where)
    rates = {question: solved / played for question, (_, solved, played) in saved.questions.items()}
    kept = {question for question, rate in rates.items() if low <= rate <= high}
    return kept, {
        "questions": len(rates),
        "kept": len(kept),
        "below": sum(rate < low for rate in rates.values()),
        "above": sum(rate > high for rate in rates.values()),
    }
