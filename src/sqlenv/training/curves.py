"""Learning curves of several training runs on one plot: the held-out points each run's live
callback wrote (`<run>/live/heldout.json`, `sqlenv.training.live`), side by side, so two runs of
one config that differ in one setting (the dense reward against correctness alone, say) are
compared on the same questions and steps. Points that keep the questions they solved are also
compared question by question (`paired_points`, `curve_comparisons`): each point against its run's
start, and each run against the first at the same step, with McNemar's exact test. Such a comparison
holds only if the runs trained on the same questions: `training_questions` reads what each step
played from the run's diagnostics and `question_agreement` compares two runs step by step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlenv.evaluation.patterns import PairedSuccesses

__all__ = [
    "curve_comparisons",
    "heldout_points",
    "live_points",
    "paired_points",
    "plot_heldout_curves",
    "question_agreement",
    "steps_in_common",
    "success_band",
    "training_questions",
]


def live_points(run: Path, filename: str, missing: str) -> list[dict[str, Any]]:
    """The points a run's live callback wrote to `<run>/live/<filename>`.

    Args:
        run: a GRPO run directory (`runs/x/grpo`), its `live` folder, or the file itself.
        filename: `heldout.json` or `diagnostics.json`.
        missing: why a run may lack the file, for the error.

    Returns:
        The points in step order.

    Raises:
        FileNotFoundError: no such file there.
    """
    for candidate in (run, run / filename, run / "live" / filename):
        if candidate.is_file():
            return sorted(json.loads(candidate.read_text(encoding="utf-8")), key=lambda p: p["step"])
    raise FileNotFoundError(f"no {filename} in {run} ({missing})")


def heldout_points(run: Path) -> list[dict[str, Any]]:
    """The held-out points of a run.

    Args:
        run: a GRPO run directory (`runs/x/grpo`), its `live` folder, or a `heldout.json` file.

    Returns:
        The points in step order.

    Raises:
        FileNotFoundError: no `heldout.json` there (the run measured no held-out set).
    """
    return live_points(run, "heldout.json", "set live.heldout_questions in the run's config")


def training_questions(run: Path) -> dict[int, list[str]] | None:
    """The questions a GRPO run trained on, step by step, from the `diagnostics.json` beside its
    held-out points (`sqlenv.training.diagnostics`: each step's groups' questions).

    Args:
        run: a GRPO run directory (`runs/x/grpo`), its `live` folder, or a file in that folder
            (its `heldout.json`, as `sqlenv train curves` is given, or `diagnostics.json`).

    Returns:
        step -> the step's questions, one per group in the order played; None where there are no
        diagnostics, or none of its steps kept its questions (diagnostics written before they did).
    """
    folder = run.parent if run.is_file() else run
    try:
        points = live_points(folder, "diagnostics.json", "")
    except FileNotFoundError:
        return None
    played = {int(p["step"]): list(p["questions"]) for p in points if p.get("questions")}
    return played or None


def question_agreement(first: dict[int, list[str]], second: dict[int, list[str]]) -> dict[str, list[int]]:
    """Whether two runs trained on the same questions, in the same order.

    Args:
        first, second: step -> questions (`training_questions`).

    Returns:
        `steps`: the steps both recorded, in order; `differing`: those of them whose questions (or
        their order) differ.
    """
    steps = sorted(set(first) & set(second))
    return {"steps": steps, "differing": [step for step in steps if first[step] != second[step]]}


def success_band(points: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """The 95 % Wilson interval of each held-out point's overall success, for a shaded band: at
    100 questions it is some +-8 points wide, which is what a step between two points must beat.

    Args:
        points: held-out points (`heldout_points`), each with `n` and `success`.

    Returns:
        (lows, highs), one per point.
    """
    from sqlenv.evaluation.records import wilson_interval

    bounds = [wilson_interval(round(p["success"] * p["n"]), int(p["n"])) for p in points]
    return [low for low, _ in bounds], [high for _, high in bounds]


def paired_points(first: dict[str, Any], second: dict[str, Any]) -> PairedSuccesses | None:
    """Two held-out points compared question by question.

    Args:
        first: a held-out point (`heldout_points`).
        second: another point on the same held-out set (the same run, or a run of the same
            `seed` and `live.heldout_questions`).

    Returns:
        How many questions both, only the first and only the second solved (with McNemar's
        p-value); None when either point lacks its `solved` questions (written before points kept
        them) or the two measured sets of different sizes.
    """
    if "solved" not in first or "solved" not in second or first["n"] != second["n"]:
        return None
    a, b = set(first["solved"]), set(second["solved"])
    return PairedSuccesses(shared=int(first["n"]), both=len(a & b), only_first=len(a - b), only_second=len(b - a))


def curve_comparisons(runs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every point of every run, with its change against the run's start and, for the runs after
    the first, against the first run at the same step.

    Args:
        runs: label -> its held-out points in step order (`heldout_points`); the first run is the
            one the others are compared with.

    Returns:
        One row per point: `run`, `step`, `n`, `success`, `success_new_sql`, `mean_reward`,
        `answer_rate` (None for points written before they kept it), `vs_start` and `vs_first`
        (each a `PairedSuccesses`, or None where there is nothing to pair: the start
        itself, the first run, a step the first run did not measure, or points without their
        solved questions).
    """
    labels = list(runs)
    first_by_step = {p["step"]: p for p in runs[labels[0]]} if labels else {}
    rows = []
    for label, points in runs.items():
        for point in points:
            start = points[0]
            other = first_by_step.get(point["step"]) if label != labels[0] else None
            rows.append({
                "run": label,
                "step": point["step"],
                "n": point["n"],
                "success": point["success"],
                "success_new_sql": point["success_new_sql"],
                "mean_reward": point["mean_reward"],
                "answer_rate": point.get("answer_rate"),
                "vs_start": paired_points(start, point) if point is not start else None,
                "vs_first": paired_points(other, point) if other is not None else None,
            })  # fmt: skip
    return rows


def steps_in_common(runs: dict[str, list[dict[str, Any]]]) -> list[int]:
    """The steps every run measured: where runs of unequal length are compared at equal steps (one
    arm of an ablation still training while the other is done).

    Args:
        runs: label -> its held-out points (`heldout_points`).

    Returns:
        The steps in order; empty when there are no runs or no step they all share.
    """
    measured = [{int(p["step"]) for p in points} for points in runs.values()]
    return sorted(set.intersection(*measured)) if measured else []


def plot_heldout_curves(runs: dict[str, list[dict[str, Any]]], out: Path) -> Path:
    """Held-out success (all with its 95 % band, and new-SQL dashed) and mean reward of several
    runs against steps.

    Args:
        runs: label -> the held-out points to draw, in step order (`heldout_points`, or only
            the `steps_in_common` of them, for equal steps).
        out: the PNG to write.

    Returns:
        `out`.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5), dpi=110)
    sizes = set()
    for index, (label, points) in enumerate(runs.items()):
        sizes |= {p["n"] for p in points}
        steps = [p["step"] for p in points]
        color = f"C{index}"
        left.plot(steps, [p["success"] for p in points], marker="o", color=color, label=f"{label}: all")
        left.fill_between(steps, *success_band(points), color=color, alpha=0.12, label=f"{label}: 95 % interval")
        left.plot(
            steps, [p["success_new_sql"] for p in points], marker="x", ls="--", color=color, label=f"{label}: new SQL"
        )
        right.plot(steps, [p["mean_reward"] for p in points], marker="o", color=color, label=label)
    questions = ", ".join(str(int(n)) for n in sorted(sizes))
    left.set_ylim(-0.02, 1.02)
    left.set_ylabel("held-out success rate")
    left.set_title(f"Held-out success ({questions} eval questions, step 0 = start)")
    right.set_ylabel("held-out mean episode reward")
    right.set_title("Held-out mean reward")
    for axes in (left, right):
        axes.set_xlabel("optimisation step")
        axes.xaxis.get_major_locator().set_params(integer=True)
        axes.grid(alpha=0.3)
        axes.legend()
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out)
    plt.close(figure)
    return out
