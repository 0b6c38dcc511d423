"""Live visualisation of a training run (a transformers `TrainerCallback`).

Under `<run dir>/live/`:
- every `plot_every` optimisation steps, `curves.png`: the reward (GRPO, with its parts) or the
  loss (SFT) per step;
- every `transcript_every` steps, `transcript-step<N>.md`: one whole episode played greedily by
  the current model on a fixed train question;
- every `eval_every` steps, success of the current model on `eval_questions` train and as many
  eval questions, appended to `success.json` and drawn train-vs-eval in `success.png`;
- with `heldout_questions` N, the learning curve: a fixed, stratified set of N eval questions
  (`sqlenv.training.heldout`) played at the start (the model the run starts from), every
  `heldout_every` steps and at the end; each point (success overall, on twin and new-SQL
  questions, mean reward, format-error rate, answer rate, mean steps, the questions solved) is
  appended to `heldout.json`, its episodes written to `heldout-step<step>.json`, and
  `learning_curve.png` draws held-out success and mean reward against the training reward;
- with `diagnostics` set (a GRPO run), per step: groups with all rewards equal, reward std within
  groups, KL, clipped ratios, completion length and truncation, tool calls and failed calls per
  rollout, answer rate (`sqlenv.training.diagnostics`), in `diagnostics.json` and `diagnostics.png`;
- at the end, `summary.png`: the curves and the success lines together.
With `keep_points_in` set, `heldout.json` and `diagnostics.json` are also written there each time
(`keep_points`): the points outlive a run folder lost with its machine.
Episodes are played with `LLMPolicy` on the model being trained, in the real environment: with
transformers, or, when `reply_generator` is set (a GRPO run on TRL's colocated vLLM:
`sqlenv.training.vllm_colocate.colocated_reply_generator`), on that engine with the current weights.
Under several processes (`accelerate launch`) the main process alone does all of this: the
transformers Trainer calls every process's callbacks, and the logs it passes are already the
processes' together.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from sqlenv.config import DEFAULT_PROMPT_CONFIG
from sqlenv.data.cache import write_bytes_atomic
from sqlenv.training.config import TrainConfig

if TYPE_CHECKING:
    from sqlenv.agents.engines import ReplyGenerator
    from sqlenv.training.diagnostics import RolloutDiagnostics


def _write_json(path: Path, value: Any) -> None:
    """Write `value` as JSON to `path`, replacing the file whole (`write_bytes_atomic`).

    A sitting ends with a kill, which can land in a write: the previous version then stays, whole,
    for the resumed run to read (`on_train_begin`), where a file rewritten in place would be left
    empty or cut. Sets (as in a report's JSON) are written as lists.
    """
    write_bytes_atomic(path, json.dumps(value, indent=1, default=list).encode("utf-8"))


def _last_step(path: Path) -> int | None:
    """The last step of the points kept in `path`; None where there is no such file or it holds
    no readable points (a file that cannot be read is one a run may replace)."""
    try:
        points = json.loads(path.read_text(encoding="utf-8"))
        return max(int(point["step"]) for point in points)
    except (OSError, ValueError, TypeError, KeyError):
        return None


REWARD_KEYS = {
    "reward": "total reward",
    "rewards/reward_correctness/mean": "correctness",
    "rewards/reward_progress/mean": "progress",
    "rewards/reward_operational/mean": "operational",
}


def _numbers(logs: dict[str, Any], step: int) -> dict[str, float]:
    """A log entry's numeric values, with the step it was logged at."""
    entry = {k: float(v) for k, v in logs.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    entry["step"] = step
    return entry


class LiveVisualizationCallback(TrainerCallback):
    def __init__(
        self,
        config: TrainConfig,
        run_dir: str | Path,
        *,
        tokenizer: Any,
        phase: str,
        play_episodes: bool = True,
    ) -> None:
        self.config = config
        self.live = config.live
        self.dir = Path(run_dir) / "live"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.tokenizer = tokenizer
        self.phase = phase
        self.play_episodes = play_episodes
        self.logs: list[dict[str, float]] = []
        self.success: list[dict[str, float]] = []
        self.heldout: list[dict[str, float]] = []
        self._heldout_ids: list[str] | None = None
        self._dataset: Any = None
        self._solved: Any = None  # the solved-examples index, built on the first check
        # Where the run's episodes generate: None for transformers on the model being trained.
        self.reply_generator: Callable[[], ReplyGenerator] | None = None
        self.diagnostics: RolloutDiagnostics | None = None  # a GRPO run's rollouts, per step
        # The episodes' context, as evaluation's unless the run's engine holds less
        # (`grpo.vllm_max_model_length`).
        self.max_context_tokens = DEFAULT_PROMPT_CONFIG.max_context_tokens
        self.diagnostic_points: list[dict[str, Any]] = []
        self._kept_further: set[str] = set()  # kept files already said to be further along

    # ---- trainer events ----------------------------------------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
        """A new run measures its start on the held-out set (the curve's first point). A resumed
        run (`--resume`) starts from the run so far: the checkpoint's log history and the success
        and held-out points measured up to it, so the plots cover every step, not only the new ones."""
        if not state.is_world_process_zero:  # one process writes and plays (module docstring)
            return
        if state.global_step == 0:
            if model is not None and self.play_episodes and self.live.heldout_questions:
                self.measure_heldout(model, 0)
            return
        saved_heldout = self.dir / "heldout.json"
        if not self.heldout and saved_heldout.is_file():
            earlier = json.loads(saved_heldout.read_text(encoding="utf-8"))
            self.heldout = [point for point in earlier if point.get("step", 0) <= state.global_step]
        if not self.logs:
            self.logs = [_numbers(e, e["step"]) for e in state.log_history if "step" in e]
        saved_diagnostics = self.dir / "diagnostics.json"
        if not self.diagnostic_points and saved_diagnostics.is_file():
            earlier = json.loads(saved_diagnostics.read_text(encoding="utf-8"))
            self.diagnostic_points = [point for point in earlier if point.get("step", 0) <= state.global_step]
        saved = self.dir / "success.json"
        if not self.success and saved.is_file():
            earlier = json.loads(saved.read_text(encoding="utf-8"))
            self.success = [point for point in earlier if point.get("step", 0) <= state.global_step]

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any
    ) -> None:
        if not state.is_world_process_zero:
            return
        if logs:
            self.logs.append(_numbers(logs, state.global_step))
            if self.diagnostics is not None and "reward" in logs:  # a training step's log
                self.record_diagnostics(logs, state.global_step)
            # Plotted here, not in on_step_end: the Trainer logs a step after its on_step_end, so
            # a plot drawn there would always lack the step just finished.
            if self.live.plot_every and state.global_step % self.live.plot_every == 0:
                self.plot_curves(self.dir / "curves.png")

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
        step = state.global_step
        if model is None or not self.play_episodes or not state.is_world_process_zero:
            return
        if self.live.transcript_every and step % self.live.transcript_every == 0:
            self.write_transcript(model, step)
        if self.live.eval_every and step % self.live.eval_every == 0:
            self.measure_success(model, step)
        if self.live.heldout_questions and self.live.heldout_every and step % self.live.heldout_every == 0:
            self.measure_heldout(model, step)

    def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
        """The last held-out point (unless this step has one), the plots, and the log."""
        if not state.is_world_process_zero:
            return
        measured = {point["step"] for point in self.heldout}
        if model is not None and self.play_episodes and self.live.heldout_questions and state.global_step not in measured:
            self.measure_heldout(model, state.global_step)
        self.plot_curves(self.dir / "curves.png")
        self.plot_summary(self.dir / "summary.png")
        _write_json(self.dir / "log.json", self.logs)

    def record_diagnostics(self, logs: dict[str, Any], step: int) -> dict[str, Any]:
        """The step's diagnostics: the rollouts' (`self.diagnostics`) and TRL's logged ones;
        appended to `diagnostics.json`, and plotted every `plot_every` steps.

        Args:
            logs: TRL's log of the step.
            step: the step.

        Returns:
            The step's point.
        """
        from sqlenv.training.diagnostics import TRL_DIAGNOSTIC_KEYS, TRL_STEP_KEYS

        assert self.diagnostics is not None
        point: dict[str, Any] = {"step": step, **self.diagnostics.take()}
        point.update({key: float(logs[key]) for key in TRL_DIAGNOSTIC_KEYS + TRL_STEP_KEYS if key in logs})
        self.diagnostic_points = [p for p in self.diagnostic_points if p["step"] != step] + [point]
        self._write_points("diagnostics.json", self.diagnostic_points)
        if self.live.plot_every and step % self.live.plot_every == 0:
            self.plot_diagnostics(self.dir / "diagnostics.png")
        return point

    def _write_points(self, name: str, points: list[dict[str, Any]]) -> None:
        """The run's points to `live/<name>`, and to `live.keep_points_in` (`keep_points`)."""
        _write_json(self.dir / name, points)
        self.keep_points(name, points)

    def keep_points(self, name: str, points: list[dict[str, Any]]) -> Path | None:
        """Write the run's points to `live.keep_points_in` as well, unless the file there reaches a
        later step than they do (another run's, further along: this run replaces it once it passes
        that step, so a rerun from the start does not wipe a longer curve that docs cite).

        Args:
            name: `heldout.json` or `diagnostics.json`.
            points: the run's points so far, each with its `step`.

        Returns:
            The file written, or None (no folder set, no points yet, or a kept file further along).
        """
        if not self.live.keep_points_in or not points:
            return None
        path = Path(self.live.keep_points_in) / name
        reached = max(point["step"] for point in points)
        kept_reached = _last_step(path)
        if kept_reached is not None and kept_reached > reached:
            if name not in self._kept_further:
                self._kept_further.add(name)
                print(
                    f"live.keep_points_in: {path} reaches step {kept_reached}, further than this run "
                    f"(step {reached}); it is left as it is until this run passes that step",
                    file=sys.stderr,
                )
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_json(path, points)
        return path

    # ---- episodes with the current model -----------------------------------------------------

    def _data(self) -> Any:
        if self._dataset is None:
            from sqlenv.data import load_dataset

            self._dataset = load_dataset(self.config.dataset, self.config.spider_dir)
        return self._dataset

    def _solved_examples(self) -> Any:
        """What the check's policy is given as `solved_examples`: 0, or one index built on the first
        check and reused (fitting TF-IDF at every check is wasted work)."""
        if self.config.solved_examples and self._solved is None:
            from sqlenv.agents.solved_examples import SolvedExamples

            self._solved = SolvedExamples(self._data(), self.config.solved_examples)
        return self._solved or 0

    def _evaluate(
        self, model: Any, split: str, n: int | None, question_ids: list[str] | None = None, parallel: int = 1
    ) -> Any:
        from sqlenv.agents.local_policy import LLMPolicy
        from sqlenv.env.environment import SQLEnvironment
        from sqlenv.evaluation import evaluate

        policy = LLMPolicy.from_model(
            self.tokenizer,
            model,
            name=f"{self.phase}-live",
            generator=self.reply_generator() if self.reply_generator is not None else None,
            max_new_tokens=self.live.max_new_tokens,
            max_context_tokens=self.max_context_tokens,
            example_dataset=self._data(),
            solved_examples=self._solved_examples(),
        )
        env = SQLEnvironment(dataset=self._data(), split=split, config=self.config.env_config)
        was_training = model.training
        model.eval()
        try:
            return evaluate(
                env, policy, n_episodes=n, seed=self.config.seed, question_ids=question_ids, parallel=parallel
            )
        finally:
            if was_training:
                model.train()

    def write_transcript(self, model: Any, step: int) -> Path:
        from sqlenv.evaluation.reports import episode_markdown

        result = self._evaluate(model, "train", 1)
        path = self.dir / f"transcript-step{step}.md"
        path.write_text(
            f"# Step {step} ({self.phase})\n\n" + episode_markdown(result.episodes[0]), encoding="utf-8"
        )
        return path

    def measure_success(self, model: Any, step: int) -> dict[str, float]:
        n = self.live.eval_questions
        point = {"step": step}
        for split in ("train", "eval"):
            point[split] = self._evaluate(model, split, n).success_rate
        self.success.append(point)
        _write_json(self.dir / "success.json", self.success)
        self.plot_success(self.dir / "success.png")
        return point

    def heldout_ids(self) -> list[str]:
        """The held-out questions: the same for every point of the run (and of a resumed run)."""
        if self._heldout_ids is None:
            from sqlenv.training.heldout import heldout_questions

            self._heldout_ids = heldout_questions(
                self._data(), self.live.heldout_questions, split=self.live.heldout_split, seed=self.config.seed
            )
        return self._heldout_ids

    def measure_heldout(self, model: Any, step: int) -> dict[str, float]:
        """Play the held-out set greedily with the current model; append and plot the point.

        Args:
            model: the model being trained.
            step: the optimisation step it has reached (0: the start).

        Returns:
            The point: step, n, success, success on twin and on new-SQL questions, mean reward,
            format-error rate, the share of episodes that answered before the step budget ran out,
            mean steps, and the questions solved (so two points, or two runs at one step, are
            compared question by question: `sqlenv.training.curves.paired_points`). The point's
            episodes, transcripts included, go to `heldout-step<step>.json` (as `sqlenv eval
            --json` writes them), so a point that moves can be read episode by episode.
        """
        from sqlenv.evaluation import NO_ANSWER_VERDICTS, NOT_IN_TRAIN, SEEN_IN_TRAIN

        result = self._evaluate(
            model,
            self.live.heldout_split,
            None,
            question_ids=self.heldout_ids(),
            parallel=self.live.heldout_parallel,
        )
        overlap = result.by_train_overlap  # success on twin (seen SQL) and new-SQL questions
        point = {
            "step": step,
            "n": result.n_episodes,
            "success": result.success_rate,
            "success_twin": overlap.get(SEEN_IN_TRAIN, {}).get("success_rate", 0.0),
            "success_new_sql": overlap.get(NOT_IN_TRAIN, {}).get("success_rate", 0.0),
            "mean_reward": result.avg_reward,
            "format_error_rate": result.format_error_rate,
            "answer_rate": sum(e.verdict not in NO_ANSWER_VERDICTS for e in result.episodes)
            / max(result.n_episodes, 1),
            "mean_steps": result.avg_steps,
            "solved": sorted(e.question_id for e in result.episodes if e.success),
        }
        _write_json(self.dir / f"heldout-step{step}.json", result.to_json())
        self.heldout = [p for p in self.heldout if p["step"] != step] + [point]
        self._write_points("heldout.json", self.heldout)
        self.plot_learning_curve(self.dir / "learning_curve.png")
        return point

    # ---- plots -------------------------------------------------------------------------------

    def plot_learning_curve(self, path: Path) -> Path | None:
        """Held-out success (overall with its 95 % band, twin, new SQL) by step, and held-out mean
        reward beside the training reward by step."""
        if not self.heldout:
            return None
        import matplotlib

        from sqlenv.training.curves import success_band

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5), dpi=110)
        steps = [p["step"] for p in self.heldout]
        n = self.heldout[-1]["n"]
        for key, label in (("success", "all"), ("success_twin", "twin in train"), ("success_new_sql", "new SQL")):
            left.plot(steps, [p[key] for p in self.heldout], marker="o", label=label)
        left.fill_between(steps, *success_band(self.heldout), color="C0", alpha=0.12, label="all: 95 % interval")
        left.set_ylim(-0.02, 1.02)
        left.set_xlabel("optimisation step")
        left.set_ylabel("success rate")
        left.set_title(f"Held-out success ({int(n)} eval questions, step 0 = start)")
        right.plot(steps, [p["mean_reward"] for p in self.heldout], marker="o", label="held-out mean reward")
        train = self._curve_series().get("total reward")
        if train is not None:
            right.plot(*train, marker=".", alpha=0.6, label="training reward (rollouts)")
        right.set_xlabel("optimisation step")
        right.set_ylabel("mean episode reward")
        right.set_title("Reward: held-out episodes vs training rollouts")
        for axes in (left, right):
            axes.xaxis.get_major_locator().set_params(integer=True)
            axes.grid(alpha=0.3)
            axes.legend()
        figure.tight_layout()
        figure.savefig(path)
        plt.close(figure)
        return path

    def plot_diagnostics(self, path: Path) -> Path | None:
        """One small panel per diagnostic (`sqlenv.training.diagnostics.DIAGNOSTIC_PANELS`) by step."""
        if not self.diagnostic_points:
            return None
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from sqlenv.training.diagnostics import DIAGNOSTIC_PANELS

        columns = 4
        rows = -(-len(DIAGNOSTIC_PANELS) // columns)
        figure, grid = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.2 * rows), dpi=100, squeeze=False)
        for axes, (title, series) in zip(grid.flat, DIAGNOSTIC_PANELS, strict=False):
            drawn = 0
            for key, label in series:
                points = [(p["step"], p[key]) for p in self.diagnostic_points if key in p]
                if points:
                    axes.plot([s for s, _ in points], [v for _, v in points], marker=".", label=label)
                    drawn += 1
            axes.set_title(title, fontsize=10)
            axes.set_xlabel("optimisation step", fontsize=8)
            axes.xaxis.get_major_locator().set_params(integer=True)
            axes.grid(alpha=0.3)
            if drawn > 1:
                axes.legend(fontsize=7)
        for axes in list(grid.flat)[len(DIAGNOSTIC_PANELS) :]:
            axes.set_visible(False)
        figure.suptitle("GRPO diagnostics per step")
        figure.tight_layout()
        figure.savefig(path)
        plt.close(figure)
        return path

    def _curve_series(self) -> dict[str, tuple[list[int], list[float]]]:
        keys = REWARD_KEYS if self.phase == "grpo" else {"loss": "loss"}
        series = {}
        for key, label in keys.items():
            points = [(e["step"], e[key]) for e in self.logs if key in e]
            if points:
                series[label] = ([p[0] for p in points], [p[1] for p in points])
        return series

    def plot_curves(self, path: Path, axes: Any = None) -> Path | None:
        series = self._curve_series()
        if not series:
            return None
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        own = axes is None
        if own:
            figure, axes = plt.subplots(figsize=(8, 4.5), dpi=110)
        for label, (steps, values) in series.items():
            axes.plot(steps, values, marker="o", markersize=3, label=label)
        axes.xaxis.get_major_locator().set_params(integer=True)
        axes.set_xlabel("optimisation step")
        axes.set_ylabel("mean reward per rollout" if self.phase == "grpo" else "training loss")
        axes.set_title(f"{self.phase.upper()}: {'reward' if self.phase == 'grpo' else 'loss'} by step")
        axes.grid(alpha=0.3)
        axes.legend()
        if own:
            figure.tight_layout()
            figure.savefig(path)
            plt.close(figure)
        return path

    def plot_success(self, path: Path, axes: Any = None) -> Path | None:
        if not self.success:
            return None
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        own = axes is None
        if own:
            figure, axes = plt.subplots(figsize=(8, 4.5), dpi=110)
        steps = [p["step"] for p in self.success]
        for split in ("train", "eval"):
            axes.plot(steps, [p[split] for p in self.success], marker="o", label=f"{split} questions")
        axes.set_ylim(-0.05, 1.05)
        axes.xaxis.get_major_locator().set_params(integer=True)
        axes.set_xlabel("optimisation step")
        axes.set_ylabel(f"success on {self.live.eval_questions} questions")
        axes.set_title("Success of the current model: train vs eval")
        axes.grid(alpha=0.3)
        axes.legend()
        if own:
            figure.tight_layout()
            figure.savefig(path)
            plt.close(figure)
        return path

    def plot_summary(self, path: Path) -> Path | None:
        if not self._curve_series() and not self.success:
            return None
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        # Only the panels with something to draw (an SFT run measures no success).
        panels = [self.plot_curves] if self._curve_series() else []
        if self.success:
            panels.append(self.plot_success)
        figure, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.5), dpi=110, squeeze=False)
        for draw, ax in zip(panels, axes[0], strict=True):
            draw(path, axes=ax)
        figure.suptitle(f"{self.phase.upper()} run summary")
        figure.tight_layout()
        figure.savefig(path)
        plt.close(figure)
        return path
