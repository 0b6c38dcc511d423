"""The held-out set of a learning curve: eval questions only, stratified by difficulty and by
twin / new SQL, the same every time; and the curve's plot and resume."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from sqlenv.training.heldout import NEW_SQL, TWIN, heldout_questions, stratum

REPO = Path(__file__).resolve().parents[1]


def test_the_heldout_set_keeps_the_eval_splits_mix_and_never_a_train_question(spider10) -> None:
    ids = heldout_questions(spider10, 60)
    assert len(ids) == len(set(ids)) == 60
    eval_ids = {r.question_id for r in spider10.split("eval")}
    assert set(ids) <= eval_ids
    usable = [r.question_id for r in spider10.split("eval") if not r.empty_gold]
    whole = Counter(stratum(spider10, q) for q in usable)
    chosen = Counter(stratum(spider10, q) for q in ids)
    for key, count in whole.items():  # each stratum within one question of its proportional share
        assert abs(chosen[key] - 60 * count / len(usable)) < 1, key
    kinds = Counter(kind for _, kind in chosen.elements())
    assert kinds[TWIN] > 0 and kinds[NEW_SQL] > 0
    assert heldout_questions(spider10, 60) == ids  # deterministic
    assert heldout_questions(spider10, 60, seed=1) != ids


def test_a_heldout_set_larger_than_the_split_is_refused(spider10) -> None:
    with pytest.raises(ValueError, match="usable questions"):
        heldout_questions(spider10, 10_000)
    with pytest.raises(ValueError, match="usable questions"):
        heldout_questions(spider10, 0)


def test_the_learning_curve_is_drawn_and_a_resumed_run_keeps_its_points(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from transformers import TrainerState

    from sqlenv.training.config import load_config
    from sqlenv.training.live import LiveVisualizationCallback

    config = load_config(REPO / "configs" / "smoke.yaml")
    points = [
        {"step": s, "n": 4, "success": v, "success_twin": v, "success_new_sql": 0.0, "mean_reward": v / 2,
         "format_error_rate": 0.1}
        for s, v in ((0, 0.25), (2, 0.5), (4, 0.75))
    ]  # fmt: skip
    (tmp_path / "live").mkdir()
    (tmp_path / "live" / "heldout.json").write_text(json.dumps(points))
    callback = LiveVisualizationCallback(config, tmp_path, tokenizer=None, phase="grpo")
    callback.on_train_begin(None, TrainerState(global_step=2), None)
    assert [p["step"] for p in callback.heldout] == [0, 2]  # past the checkpoint: not kept
    callback.on_log(None, TrainerState(global_step=1), None, logs={"reward": 0.2})
    assert callback.plot_learning_curve(tmp_path / "curve.png") == tmp_path / "curve.png"
    assert (tmp_path / "curve.png").stat().st_size > 10_000


def test_kept_points_follow_the_run_but_never_replace_a_curve_further_along(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("transformers")
    from sqlenv.training.config import load_config
    from sqlenv.training.live import LiveVisualizationCallback

    config = load_config(REPO / "configs" / "smoke.yaml")
    kept = tmp_path / "docs" / "kept"
    config.live.keep_points_in = str(kept)
    callback = LiveVisualizationCallback(config, tmp_path / "run", tokenizer=None, phase="grpo")
    run = [{"step": s, "success": 0.1 * s} for s in (0, 10)]
    assert callback.keep_points("heldout.json", run) == kept / "heldout.json"  # the folder is made
    assert json.loads((kept / "heldout.json").read_text()) == run
    assert callback.keep_points("heldout.json", []) is None  # nothing measured yet: nothing written

    longer = [{"step": s, "success": 0.5} for s in (0, 10, 20, 30)]  # another run's, further along
    (kept / "heldout.json").write_text(json.dumps(longer))
    for _ in range(2):
        assert callback.keep_points("heldout.json", run) is None
    assert json.loads((kept / "heldout.json").read_text()) == longer
    said = capsys.readouterr().err
    assert said.count("reaches step 30, further than this run (step 10)") == 1  # said once
    passed = run + [{"step": s, "success": 0.2} for s in (20, 30)]  # this run reaches step 30 too
    callback.keep_points("heldout.json", passed)
    assert json.loads((kept / "heldout.json").read_text()) == passed

    (kept / "diagnostics.json").write_text('{"cut short')  # unreadable: replaced
    assert callback.keep_points("diagnostics.json", run) == kept / "diagnostics.json"
    assert json.loads((kept / "diagnostics.json").read_text()) == run

    config.live.keep_points_in = None  # unset: only the run folder
    assert LiveVisualizationCallback(config, tmp_path / "other", tokenizer=None, phase="grpo").keep_points(
        "heldout.json", [*passed, {"step": 40}]
    ) is None
    assert json.loads((kept / "heldout.json").read_text()) == passed


def test_the_success_band_is_each_points_wilson_interval() -> None:
    from sqlenv.evaluation.records import wilson_interval
    from sqlenv.training.curves import success_band

    points = [{"step": 0, "n": 100, "success": 0.19}, {"step": 10, "n": 100, "success": 0.23}, {"step": 20, "n": 4, "success": 0.0}]
    lows, highs = success_band(points)
    assert list(zip(lows, highs, strict=True)) == [wilson_interval(19, 100), wilson_interval(23, 100), (0.0, highs[2])]
    assert lows[0] == pytest.approx(0.1251, abs=1e-4) and highs[0] == pytest.approx(0.2778, abs=1e-4)
    assert highs[2] == pytest.approx(0.4899, abs=1e-4)  # 0 of 4 still allows half


def test_an_unknown_loss_type_is_refused() -> None:
    pytest.importorskip("yaml")
    from sqlenv.training.config import load_config

    with pytest.raises(ValueError, match=r"grpo\.loss_type: 'ppo' is not one of"):
        load_config(REPO / "configs" / "smoke.yaml", {"grpo.loss_type": "ppo"})
    assert load_config(REPO / "configs" / "smoke.yaml").grpo.loss_type == "dapo"


def test_an_unknown_advantage_scaling_is_refused() -> None:
    pytest.importorskip("yaml")
    from sqlenv.training.config import load_config

    with pytest.raises(ValueError, match=r"grpo\.scale_rewards: 'std' is not one of group, batch, none"):
        load_config(REPO / "configs" / "smoke.yaml", {"grpo.scale_rewards": "std"})
    assert load_config(REPO / "configs" / "smoke.yaml", {"grpo.scale_rewards": "none"}).grpo.scale_rewards == "none"


def test_two_runs_curves_are_drawn_on_one_plot_and_a_run_without_one_is_named(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from typer.testing import CliRunner

    from sqlenv.cli import app

    for name, values in (("dense", (0.2, 0.4)), ("correctness", (0.2, 0.25))):
        live = tmp_path / name / "grpo" / "live"
        live.mkdir(parents=True)
        live.joinpath("heldout.json").write_text(json.dumps([
            {"step": s, "n": 60, "success": v, "success_twin": v, "success_new_sql": v / 2, "mean_reward": v,
             "format_error_rate": 0.0}
            for s, v in zip((0, 10), values, strict=True)
        ]))  # fmt: skip
    out = tmp_path / "both.png"
    runner = CliRunner()
    result = runner.invoke(
        app, ["train", "curves", f"dense={tmp_path / 'dense' / 'grpo'}", f"correctness={tmp_path / 'correctness' / 'grpo'}", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 10_000
    result = runner.invoke(app, ["train", "curves", f"none={tmp_path}", "--out", str(out)])
    assert result.exit_code == 2 and "no heldout.json" in result.output
    result = runner.invoke(app, ["train", "curves", "justapath", "--out", str(out)])
    assert result.exit_code == 2 and "LABEL=RUN" in result.output


def test_equal_steps_keeps_only_the_steps_every_run_measured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ablation's arms are compared at equal steps while one is still behind: --equal-steps drops
    the points of steps the other run has not measured, from the table and the plot."""
    pytest.importorskip("matplotlib")
    from typer.testing import CliRunner

    from sqlenv.cli import app
    from sqlenv.training.curves import heldout_points, steps_in_common

    monkeypatch.setenv("COLUMNS", "200")
    for name, steps in (("dense", (0, 10, 20, 30)), ("correctness", (0, 10, 20)), ("late", (5,))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "heldout.json").write_text(json.dumps([
            {"step": s, "n": 60, "success": 0.123 + s / 1000, "success_twin": 0.0, "success_new_sql": 0.0,
             "mean_reward": 0.0, "format_error_rate": 0.0}
            for s in steps
        ]))  # fmt: skip
    points = {name: heldout_points(tmp_path / name) for name in ("dense", "correctness")}
    assert steps_in_common(points) == [0, 10, 20]
    assert steps_in_common({**points, "late": heldout_points(tmp_path / "late")}) == []
    assert steps_in_common({}) == []

    def curves(*names: str, equal: bool) -> str:
        arguments = [f"{n}={tmp_path / n}" for n in names] + ["--out", str(tmp_path / "c.png")]
        result = CliRunner().invoke(app, ["train", "curves", *arguments, *(["--equal-steps"] if equal else [])])
        return f"{result.exit_code}: {result.output}"

    assert "15%" in curves("dense", "correctness", equal=False)  # dense's step 30: 0.153
    equal = curves("dense", "correctness", equal=True)
    assert equal.startswith("0: ") and "15%" not in equal and "14%" in equal  # step 20 kept, step 30 not
    assert (tmp_path / "c.png").stat().st_size > 10_000
    refused = curves("dense", "late", equal=True)
    assert refused.startswith("2: ") and "measured no step in common" in refused


def test_points_that_keep_their_solved_questions_are_paired_with_the_start_and_the_first_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    from typer.testing import CliRunner

    from sqlenv.cli import app

    monkeypatch.setenv("COLUMNS", "200")  # the table's cells unwrapped
    from sqlenv.training.curves import curve_comparisons, heldout_points

    def point(step: int, solved: list[int]) -> dict:
        ids = [f"q{i}" for i in solved]
        return {"step": step, "n": 60, "success": len(ids) / 60, "success_twin": 0.0, "success_new_sql": 0.0,
                "mean_reward": 0.0, "format_error_rate": 0.0, "solved": ids}  # fmt: skip

    start = list(range(1, 13))
    runs = {
        "dense": [point(0, start), point(10, [*range(1, 11), *range(20, 34)])],  # lost 11, 12; gained 20-33
        "correctness": [point(0, start), point(10, list(range(1, 16))), point(20, [1])],
    }
    for name, points in runs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "heldout.json").write_text(json.dumps(points))
    rows = {(r["run"], r["step"]): r for r in curve_comparisons({k: heldout_points(tmp_path / k) for k in runs})}
    assert rows["dense", 0]["answer_rate"] is None and rows["dense", 0]["mean_reward"] == 0.0  # not recorded
    assert rows["dense", 0]["vs_start"] is None and rows["dense", 10]["vs_first"] is None  # nothing to pair
    dense = rows["dense", 10]["vs_start"]
    assert (dense.shared, dense.both, dense.only_first, dense.only_second) == (60, 10, 2, 14)
    assert dense.mcnemar_p_value == pytest.approx(2 * (1 + 16 + 120) / 2**16)
    alone = rows["correctness", 10]
    assert (alone["vs_start"].only_first, alone["vs_start"].only_second) == (0, 3)
    assert (alone["vs_first"].only_first, alone["vs_first"].only_second) == (14, 5)  # dense's 20-33; its 11-15
    assert rows["correctness", 20]["vs_first"] is None  # dense has no step 20
    assert rows["correctness", 0]["vs_first"].only_first == rows["correctness", 0]["vs_first"].only_second == 0
    del runs["dense"][1]["solved"]  # a point written before points kept their questions: not paired
    (tmp_path / "dense" / "heldout.json").write_text(json.dumps(runs["dense"]))
    rows = {(r["run"], r["step"]): r for r in curve_comparisons({k: heldout_points(tmp_path / k) for k in runs})}
    assert rows["dense", 10]["vs_start"] is None and rows["correctness", 10]["vs_first"] is None
    result = CliRunner().invoke(
        app, ["train", "curves", f"dense={tmp_path / 'dense'}", f"correctness={tmp_path / 'correctness'}",
              "--out", str(tmp_path / "both.png")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "+3 (0/3, p 0.25)" in result.output and "-11 (11/0, p 0.00098)" in result.output
    assert "mean reward" in result.output and "answered" in result.output


def test_curves_say_whether_the_runs_trained_on_the_same_questions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison of two curves holds only if both runs played the same training questions:
    the command reads each step's questions from the diagnostics beside the held-out points."""
    pytest.importorskip("matplotlib")
    from typer.testing import CliRunner

    from sqlenv.cli import app
    from sqlenv.training.curves import question_agreement, training_questions

    monkeypatch.setenv("COLUMNS", "400")  # each message on one line
    held = [{"step": s, "n": 10, "success": 0.1, "success_twin": 0.1, "success_new_sql": 0.1, "mean_reward": 0.0,
             "format_error_rate": 0.0} for s in (0, 2)]  # fmt: skip
    played = {1: ["train-3", "train-9"], 2: ["train-4", "train-7"], 3: ["train-1", "train-2"]}

    def run(name: str, questions: dict[int, list[str]] | None, *, diagnostics: bool = True) -> Path:
        live = tmp_path / name / "live"
        live.mkdir(parents=True)
        (live / "heldout.json").write_text(json.dumps(held))
        if diagnostics:
            points = [{"step": s, "kl": 0.0, **({"questions": questions[s]} if questions else {})} for s in (1, 2, 3)]
            (live / "diagnostics.json").write_text(json.dumps(points))
        return live / "heldout.json"  # as the lab notebook cites a kept run: its heldout.json

    dense = run("dense", played)
    same = run("same", dict(played))
    swapped = run("swapped", {**played, 2: ["train-7", "train-4"], 3: ["train-1", "train-5"]})
    older = run("older", None)  # diagnostics written before they kept the questions
    bare = run("bare", None, diagnostics=False)
    assert training_questions(dense) == training_questions(dense.parent.parent) == played
    assert training_questions(older) is None and training_questions(bare) is None
    assert question_agreement(played, training_questions(swapped)) == {"steps": [1, 2, 3], "differing": [2, 3]}
    assert question_agreement(played, {2: played[2], 5: ["x"]}) == {"steps": [2], "differing": []}

    def curves(*runs: Path) -> str:
        labelled = [f"{path.parent.parent.name}={path}" for path in runs]
        result = CliRunner().invoke(app, ["train", "curves", *labelled, "--out", str(tmp_path / "c.png")])
        assert result.exit_code == 0, result.output
        return result.output

    output = curves(dense, same, swapped, older, bare)
    assert "same played the same questions as dense, in the same order, at each of the 3 steps both recorded (1–3)" in output
    assert "swapped and dense differ at 2 of the 3 steps both recorded, first at step 2 (train-7, train-4 against train-4, train-7)" in output
    assert "older against dense unknown: older kept no per-step questions" in output
    assert "bare against dense unknown: bare kept no per-step questions" in output
    assert "dense against older unknown: older kept no per-step questions" in curves(older, dense)


def test_sqlenv_eval_plays_exactly_the_heldout_set(tmp_path: Path, spider_dir: Path, spider10) -> None:
    from typer.testing import CliRunner

    from sqlenv.cli import app

    out = tmp_path / "oracle.json"
    result = CliRunner().invoke(
        app,
        ["eval", "--policy", "oracle", "--dataset", "spider10", "--spider-dir", str(spider_dir),
         "--heldout", "60", "--json", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    played = json.loads(out.read_text())
    assert [e["question_id"] for e in played["episodes"]] == heldout_questions(spider10, 60)
    assert played["success_rate"] == 1.0
    refused = CliRunner().invoke(
        app, ["eval", "--policy", "oracle", "--dataset", "spider10", "--spider-dir", str(spider_dir), "--heldout", "9999"]
    )
    assert refused.exit_code == 2 and "usable questions" in refused.output
