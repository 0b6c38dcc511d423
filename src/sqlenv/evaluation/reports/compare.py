"""Comparing policies played on the same questions with the same seeds: `compare.json` (each
policy's summary and, per episode, every policy's outcome) and `compare.png`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlenv.evaluation.records import EvaluationResult
from sqlenv.evaluation.reports.files import ReportFiles
from sqlenv.evaluation.reports.plots import REWARD_COLOR, SUCCESS_COLOR, _figure, _save, _style


def comparison_json(results: Sequence[EvaluationResult]) -> dict[str, Any]:
    """Per-policy summaries and, per episode, each policy's outcome side by side.

    Raises:
        ValueError: the results played other questions, or some were shown the schema and some
            were not (the schema-shown control is compared with a hidden-schema run by `sqlenv
            patterns`, which labels each).
    """
    first = results[0]
    order = [e.question_id for e in first.episodes]
    shown = [r.policy for r in results if r.show_schema]
    if shown and len(shown) < len(results):
        raise ValueError(
            f"{', '.join(shown)} played with the schema shown and the others without: a comparison "
            "plays every policy in one environment"
        )
    for r in results[1:]:
        if [e.question_id for e in r.episodes] != order:
            raise ValueError(
                f"{r.policy} played other questions than {first.policy}: use the same seed and episodes"
            )
    per_episode = []
    for i, episode in enumerate(first.episodes):
        row: dict[str, Any] = {
            "question_id": episode.question_id,
            "db_id": episode.db_id,
            "difficulty": episode.difficulty,
            "answer_type": episode.answer_type,
            "seen_in_train": episode.seen_in_train,
        }
        for r in results:
            other = r.episodes[i]
            row[r.policy] = {
                "success": other.success,
                "total_reward": other.total_reward,
                "steps": other.steps,
                "format_errors": other.format_errors,
            }
        per_episode.append(row)
    return {
        "dataset": first.dataset,
        "split": first.split,
        "answer_mode": first.answer_mode,
        "show_schema": first.show_schema,
        "seed": first.seed,
        "n_episodes": first.n_episodes,
        "policies": {r.policy: r.to_json(include_episodes=False) for r in results},
        "per_episode": per_episode,
    }


def write_comparison(results: Sequence[EvaluationResult], directory: str | Path) -> ReportFiles:
    """compare.json and compare.png (success rate and mean reward per policy) in `directory`."""
    if not results:
        raise ValueError("nothing to compare: no results")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    files = ReportFiles(out)
    path = out / "compare.json"
    path.write_text(
        json.dumps(comparison_json(results), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    files.written.append(path)
    try:
        files.written.append(_plot_comparison(results, out / "compare.png"))
    except ImportError:
        files.skipped.append("compare.png (matplotlib missing: pip install 'sqlenv[eval]')")
    return files


def _plot_comparison(results: Sequence[EvaluationResult], path: Path) -> Path:
    import matplotlib  # noqa: F401

    first = results[0]
    names = [r.policy for r in results]
    figure = _figure(width=max(8.0, 1.6 * len(results) + 4), height=5.0)
    left, right = figure.subplots(1, 2)
    bars = left.bar(names, [r.success_rate for r in results], color=SUCCESS_COLOR, width=0.6)
    left.bar_label(bars, labels=[f"{r.success_rate:.0%}" for r in results], fontsize=11, padding=3)
    left.set_ylim(0, 1.15)
    left.set_yticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
    label = first.success_label
    _style(left, label.capitalize(), "policy", label)
    rewards = [r.avg_reward for r in results]
    bars = right.bar(names, rewards, color=REWARD_COLOR, width=0.6)
    right.bar_label(bars, labels=[f"{v:.3f}" for v in rewards], fontsize=11, padding=3)
    top = max([*rewards, 0.0])
    bottom = min([*rewards, 0.0])
    right.set_ylim(bottom * 1.2, max(top * 1.2, 0.1))
    right.axhline(0, color="#888", linewidth=0.8)
    _style(right, "Mean episode reward", "policy", "reward")
    for axes in (left, right):
        if len(names) > 3 or max(len(n) for n in names) > 12:
            axes.tick_params(axis="x", labelrotation=20)
    figure.suptitle(
        f"{first.dataset}/{first.split}: {first.n_episodes} episodes per policy, seed {first.seed}",
        fontsize=15,
    )
    return _save(figure, path)
