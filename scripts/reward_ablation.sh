#!/usr/bin/env bash
# The reward ablation docs/lab-notebook.md reports, from configs/cpu-qwen0.5b.yaml: the same GRPO run with
# the dense reward and with the correctness reward alone, on the same questions, then both held-out
# curves on one plot. Its stages, in order; each is skipped when its result exists, and each
# continues where a stop left it, so the same command, in every sitting, carries it to the end:
#
#   1. sft         the SFT warm-up (runs/cpu-qwen0.5b/sft/final; the base model fetched first)
#   2. pass-rates  its pass rates on the train questions (4 samples at temperature 1.0, journal
#                  runs/journal-qwen05-sft-train-T1x4), written as the table
#                  docs/results/qwen05-sft-pass-rates.json (TABLE)
#   3. dense       GRPO with the config's dense reward (runs/cpu-qwen0.5b-dense): the learning
#                  curve docs/lab-notebook.md leads with, so it trains first
#   4. correctness GRPO with the correctness reward alone (runs/cpu-qwen0.5b-correctness)
#                  Each arm's held-out points and per-step diagnostics are also written, as they
#                  are measured, to docs/results/qwen05-ablation-<arm>/ (live.keep_points_in): a
#                  machine that keeps no runs/ between sittings leaves them in the working tree
#   5. curves      both held-out curves on one plot (runs/reports/reward-ablation.png), and whether
#                  the two arms trained on the same questions at every step
#
# Both arms start from the stage-1 model and read their questions from TABLE (a committed table is
# used as it is: the kept questions then do not depend on the SFT model rebuilt in this sitting).
#
# With --answer-mode sql the same stages run in SQL-answer mode (the answer is a SELECT statement,
# scored by execution): the warm-up is taught both answer modes (sft.answer_modes, in
# runs/cpu-qwen0.5b-both-modes), the pass rates are played in SQL mode (journal
# runs/journal-qwen05-sft-both-train-sql-T1x4, table docs/results/qwen05-sft-both-sql-pass-rates.json),
# the arms train and are measured in SQL mode (runs/cpu-qwen0.5b-sql-dense, -sql-correctness; their
# points kept in docs/results/qwen05-sql-<arm>/), and the plot is runs/reports/reward-ablation-sql.png.
#
#   bash scripts/reward_ablation.sh [--dry-run] [--answer-mode value|sql] [ARM ...]
#
#   --dry-run       print each stage as done or as the command it would run next, and run nothing
#   --answer-mode   value (the default) or sql
#   ARM             dense, correctness: train only these arms, in this order (default: both, dense
#                   first); stage 5 draws the curves once both arms are done
#
# Run it in the background: nohup bash scripts/reward_ablation.sh > runs/reward-ablation.log 2>&1 &
# Environment: SQLENV_SPIDER_DIR (default ../shared/spider), SQLENV_PYTHON (default .venv/bin/python).
set -euo pipefail

usage() {
    echo "$1; usage:" >&2
    sed -n '30,35p' "$0" >&2
    exit 2
}

dry_run=false
answer_mode=value
arms=()
while [[ $# -gt 0 ]]; do
    argument=$1
    shift
    case $argument in
        --dry-run) dry_run=true ;;
        --answer-mode)
            [[ $# -gt 0 ]] || usage "--answer-mode needs a value (value or sql)"
            answer_mode=$1
            shift
            [[ $answer_mode == value || $answer_mode == sql ]] || usage "unknown answer mode '$answer_mode'"
            ;;
        dense | correctness)
            if [[ " ${arms[*]} " != *" $argument "* ]]; then arms+=("$argument"); fi
            ;;
        *) usage "unknown argument '$argument'" ;;
    esac
done
[[ ${#arms[@]} -gt 0 ]] || arms=(dense correctness)

repo=$(cd "$(dirname "$0")/.." && pwd)
config=$repo/configs/cpu-qwen0.5b.yaml
spider_dir=${SQLENV_SPIDER_DIR:-../shared/spider}
python=${SQLENV_PYTHON:-.venv/bin/python}
# Each answer mode's paths, and the overrides its warm-up, its play and its arms add to the config.
if [[ $answer_mode == sql ]]; then
    table=docs/results/qwen05-sft-both-sql-pass-rates.json
    sft=runs/cpu-qwen0.5b-both-modes/sft
    journal=runs/journal-qwen05-sft-both-train-sql-T1x4
    report=runs/reports/qwen05-sft-both-train-sql-T1x4
    arm_prefix=runs/cpu-qwen0.5b-sql-
    kept_prefix=docs/results/qwen05-sql-
    plot=runs/reports/reward-ablation-sql.png
    sft_overrides=(--set "sft.answer_modes=[value, sql]" --set output_dir=runs/cpu-qwen0.5b-both-modes)
    play_options=(--answer-mode sql)
    arm_overrides=(--set answer_mode=sql)
else
    table=docs/results/qwen05-sft-pass-rates.json
    sft=runs/cpu-qwen0.5b/sft
    journal=runs/journal-qwen05-sft-train-T1x4
    report=runs/reports/qwen05-sft-train-T1x4
    arm_prefix=runs/cpu-qwen0.5b-
    kept_prefix=docs/results/qwen05-ablation-
    plot=runs/reports/reward-ablation.png
    sft_overrides=()
    play_options=()
    arm_overrides=()
fi
sqlenv=("$python" -m sqlenv.cli)

# The allocator the GRPO runs were measured with (docs/training.md, "Configs"): Ray's jemalloc,
# where Ray is installed.
jemalloc=$("$python" -c 'import pathlib, ray
lib = pathlib.Path(ray.__file__).parent / "core" / "libjemalloc.so"
print(lib if lib.is_file() else "")' 2> /dev/null || true)
preload=()
[[ -n $jemalloc ]] && preload=(env "LD_PRELOAD=$jemalloc")

say() { echo "== $* ($(date -u +%H:%M:%S))"; }

# Run a stage's command, or print it under --dry-run (words quoted where the shell needs it).
run() {
    if $dry_run; then
        local word words=()
        for word in "$@"; do
            if [[ $word =~ ^[A-Za-z0-9_./=:,+@%-]+$ ]]; then words+=("$word"); else words+=("${word@Q}"); fi
        done
        echo "   would run: ${words[*]}"
    else
        "$@"
    fi
}

# Whether a stopped run left a finished checkpoint-N folder in DIR (then it continues from the last
# finished one). The trainer writes trainer_state.json last: a run stopped while saving its first
# checkpoint has none finished, and starts again.
has_checkpoint() { compgen -G "$1/checkpoint-*/trainer_state.json" > /dev/null; }

# A training run is done when it has written its log history: the last thing it writes, after its
# final model (a run stopped while saving that model is not done, and continues from a checkpoint).
if [[ -f $sft/log_history.json ]]; then
    say "1 sft: done ($sft/final)"
else
    say "1 sft: training $sft/final"
    resume=()
    has_checkpoint "$sft" && resume=(--resume)
    run "${sqlenv[@]}" models fetch qwen2.5-coder-0.5b
    run "${sqlenv[@]}" train sft --config "$config" --spider-dir "$spider_dir" "${sft_overrides[@]}" "${resume[@]}"
fi

if [[ -f $table ]]; then
    say "2 pass-rates: done ($table)"
else
    played=0
    [[ -d $journal ]] && played=$(cat "$journal"/*.jsonl 2> /dev/null | grep -c '"index"' || true)
    say "2 pass-rates: playing the train questions ($played episodes in $journal), then writing $table"
    # 32 episodes at once: on a 2-core Intel Xeon (AVX-512 BF16, no AMX) this play ran at 5-7
    # episodes a minute at 32 (two sittings) against ~5.4 over 67 minutes at 16 (other questions of
    # the same plan; the journal does not depend on it)
    run "${sqlenv[@]}" eval --policy "$sft/final" --dataset spider10 --split train --spider-dir "$spider_dir" \
        --temperature 1.0 --samples 4 --parallel 32 --journal "$journal" --report "$report" \
        --json "$report.json" "${play_options[@]}"
    run mkdir -p "$(dirname "$table")"
    run "${sqlenv[@]}" train pass-rates "$report" --out "$table"
fi

# One GRPO arm: LABEL, its run folder, the folder its points are kept in, then its --set overrides
# beyond the shared ones.
arm() {
    local stage=$1 out=$2 kept=$3
    shift 3
    if [[ -f $out/grpo/log_history.json ]]; then
        say "$stage: done ($out/grpo/final)"
        return
    fi
    local resume=()
    has_checkpoint "$out/grpo" && resume=(--resume)
    say "$stage: training $out/grpo${resume:+ (continuing from its last checkpoint)}"
    run "${preload[@]}" "${sqlenv[@]}" train grpo --config "$config" \
        --spider-dir "$spider_dir" --set "output_dir=$out" --set "grpo.init_from=$sft/final" \
        --set "grpo.pass_rates_from=$table" --set "live.keep_points_in=$kept" "${arm_overrides[@]}" "$@" "${resume[@]}"
}

for name in "${arms[@]}"; do
    case $name in
        dense) arm "3 dense" "${arm_prefix}dense" "${kept_prefix}dense" ;;
        correctness)
            arm "4 correctness" "${arm_prefix}correctness" "${kept_prefix}correctness" \
                --set "grpo.reward_weights={correctness: 1.0, progress: 0.0, operational: 0.0}"
            ;;
    esac
done

# The curves need both arms finished (under --dry-run, an arm planned above counts as finished).
for name in dense correctness; do
    out=$arm_prefix$name
    if [[ ! -f $out/grpo/log_history.json ]] && ! { $dry_run && [[ " ${arms[*]} " == *" $name "* ]]; }; then
        say "5 curves: waiting for the $name arm ($out/grpo)"
        exit 0
    fi
done
say "5 curves: $plot"
run mkdir -p runs/reports
run "${sqlenv[@]}" train curves "dense=${arm_prefix}dense/grpo" \
    "correctness only=${arm_prefix}correctness/grpo" --out "$plot"
