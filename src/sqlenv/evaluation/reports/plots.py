"""The plots of a report, drawn with matplotlib on Agg figures without touching pyplot's global
state: success by difficulty, the reward distribution and the steps histogram of a run."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from sqlenv.evaluation.records import EvaluationResult
from sqlenv.evaluation.reports.names import report_title

SUCCESS_COLOR = "#2a9d8f"
FAILURE_COLOR = "#e76f51"
REWARD_COLOR = "#264653"


def _figure(width: float = 8.0, height: float = 5.0) -> Any:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=110, layout="constrained")
    return figure


_TITLE_LINE_CHARS = 56  # what fits across a plot at the title's font size


def _wrapped_title(title: str) -> str:
    """A long title on several lines: what is plotted, then the run (a model path can be long)."""
    if len(title) <= _TITLE_LINE_CHARS:
        return title
    what, dash, run = title.partition(" — ")
    lines = (
        [what, *textwrap.wrap(run, _TITLE_LINE_CHARS)] if dash else textwrap.wrap(title, _TITLE_LINE_CHARS)
    )
    return "\n".join(lines)


def _style(axes: Any, title: str, xlabel: str, ylabel: str) -> None:
    axes.set_title(_wrapped_title(title), fontsize=15, pad=12)
    axes.set_xlabel(xlabel, fontsize=13)
    axes.set_ylabel(ylabel, fontsize=13)
    axes.tick_params(labelsize=12)
    axes.grid(axis="y", alpha=0.3)
    axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)


def plot_run(result: EvaluationResult, out: Path) -> list[Path]:
    import matplotlib  # noqa: F401  (ImportError here means: no plots)

    written = []
    figure = _figure()
    axes = figure.add_subplot()
    names = list(result.by_difficulty)
    rates = [result.by_difficulty[d]["success_rate"] for d in names]
    bars = axes.bar(names, rates, color=SUCCESS_COLOR, width=0.6)
    axes.bar_label(
        bars,
        labels=[
            f"{r:.0%}\n(n={int(result.by_difficulty[d]['n'])})" for d, r in zip(names, rates, strict=True)
        ],
        fontsize=11,
        padding=3,
    )
    axes.set_ylim(0, 1.25)
    axes.set_yticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
    label = result.success_label
    _style(axes, f"{label.capitalize()} by difficulty — {report_title(result)}", "difficulty", label)
    written.append(_save(figure, out / "success_by_difficulty.png"))

    figure = _figure()
    axes = figure.add_subplot()
    wins = [e.total_reward for e in result.episodes if e.success]
    losses = [e.total_reward for e in result.episodes if not e.success]
    rewards = wins + losses
    low, high = (min(rewards), max(rewards)) if rewards else (0.0, 1.0)
    if high - low < 0.05:
        low, high = low - 0.05, high + 0.05
    axes.hist(
        [losses, wins],
        bins=30,
        range=(low, high),
        stacked=True,
        color=[FAILURE_COLOR, SUCCESS_COLOR],
        label=[f"not solved ({len(losses)})", f"solved ({len(wins)})"],
        edgecolor="white",
        linewidth=0.5,
    )
    axes.axvline(
        result.avg_reward,
        color=REWARD_COLOR,
        linestyle="--",
        linewidth=1.5,
        label=f"mean {result.avg_reward:.3f}",
    )
    axes.legend(fontsize=11, frameon=False, loc="best")
    _style(axes, f"Episode reward — {report_title(result)}", "total episode reward", "episodes")
    written.append(_save(figure, out / "reward_distribution.png"))

    figure = _figure()
    axes = figure.add_subplot()
    most = max((e.steps for e in result.episodes), default=1)
    edges = [s - 0.5 for s in range(1, most + 2)]
    axes.hist(
        [
            [e.steps for e in result.episodes if not e.success],
            [e.steps for e in result.episodes if e.success],
        ],
        bins=edges,
        stacked=True,
        color=[FAILURE_COLOR, SUCCESS_COLOR],
        label=["not solved", "solved"],
        edgecolor="white",
        linewidth=0.5,
    )
    axes.set_xticks(range(1, most + 1))
    axes.axvline(
        result.avg_steps,
        color=REWARD_COLOR,
        linestyle="--",
        linewidth=1.5,
        label=f"mean {result.avg_steps:.2f}",
    )
    axes.legend(fontsize=11, frameon=False, loc="best")
    _style(axes, f"Steps per episode — {report_title(result)}", "steps", "episodes")
    written.append(_save(figure, out / "steps_histogram.png"))
    return written


def _save(figure: Any, path: Path) -> Path:
    figure.savefig(path, format="png", facecolor="white")
    return path


# ---- transcripts ------------------------------------------------------------------------------
