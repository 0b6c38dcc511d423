"""Which train questions a GRPO run learns from, by how often the model it starts from solves them.

A GRPO group learns only where its rollouts differ in correctness: a question the start model never
solves gives groups that are all wrong (their advantages are the shaping's hundredths), one it
always solves gives groups that are all right. `sqlenv eval --split train --temperature T
--samples K` plays every train question K times with sampled replies, as GRPO's rollouts are; its
results.json gives each question's pass rate (solved / played). `grpo.pass_rates_from` names that
file, and the run keeps the questions whose rate lies in `grpo.pass_rate_range`, so that most of its
groups mix right and wrong answers (the offline form of DAPO's dynamic sampling, which drops groups
whose rewards are all equal after generating them)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["questions_in_pass_rate_range"]


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
            --temperature T --samples K` with the model GRPO starts from.
        dataset: the dataset the run trains on (the results must be of it).
        answer_mode: the run's answer mode (the results must have played it).
        low: the lowest pass rate kept (0 keeps the never solved).
        high: the highest pass rate kept (1 keeps the always solved).

    Returns:
        (the question ids kept, counts: `questions` in the results, `kept`, `below` the range,
        `above` it).

    Raises:
        ValueError: the file is no results.json, or of another dataset, split or answer mode, or
            its replies were decoded greedily (every rate would be 0 or 1), or the range is not
            within [0, 1].
    """
    from sqlenv.evaluation.records import successes_by_question
    from sqlenv.evaluation.reports.files import read_results

    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"grpo.pass_rate_range: [{low}, {high}] is not a range within [0, 1]")
    saved = read_results(results)
    where = f"grpo.pass_rates_from: {saved.path}"
    if saved.dataset != dataset or saved.split != "train":
        raise ValueError(
            f"{where} played {saved.dataset}/{saved.split}; the run trains on {dataset}/train "
            f"(sqlenv eval --dataset {dataset} --split train --temperature T --samples K)"
        )
    modes = {e.answer_mode for e in saved.episodes}
    if modes - {answer_mode}:
        raise ValueError(f"{where} answered in mode {', '.join(sorted(modes))}; the run answers in {answer_mode}")
    if saved.decoding == "greedy":
        raise ValueError(
            f"{where} decoded greedily, so a question's episodes are alike and every rate is 0 or 1: "
            "sample them (sqlenv eval --temperature T --samples K, T the run's grpo.temperature)"
        )
    counts = successes_by_question(saved.episodes)
    rates = {question: solved / played for question, (solved, played) in counts.items()}
    kept = {question for question, rate in rates.items() if low <= rate <= high}
    return kept, {
        "questions": len(rates),
        "kept": len(kept),
        "below": sum(rate < low for rate in rates.values()),
        "above": sum(rate > high for rate in rates.values()),
    }
