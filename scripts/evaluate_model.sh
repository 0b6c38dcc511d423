#!/usr/bin/env bash
# The evaluations docs/lab-notebook.md reports for one model: spider10's 203 eval questions and Spider
# dev's usable questions, each in both answer modes (value; sql = execution accuracy), greedy, seed
# 0, zero-shot, 16 episodes at once. Each evaluation keeps a journal, so running the same command
# again (after a stop, or in a later sitting) continues where it stopped and ends as one
# uninterrupted run would; finished ones are read back from their journals, not played again.
#
#   bash scripts/evaluate_model.sh LABEL POLICY [SET ...]
#
#   LABEL   names the journals (runs/journal-LABEL-SET) and reports (runs/reports/LABEL-SET)
#   POLICY  a pinned model (qwen2.5-coder-0.5b) or a trained model's folder (runs/.../final)
#   SET     any of spider10-value spider10-sql dev-sql dev-value val-sql val-value, run in the
#           order given (default: the first four, the spider10 ones first: they take minutes, dev
#           takes hours); dev is Spider dev (the spider preset's eval split, 972 questions), val
#           the spider preset's validation split (552, ten train databases withheld from
#           training). A set ending in -shown (dev-sql-shown, ...) plays with the schema shown in
#           the first observation (--show-schema), the control papers' zero-shot numbers match
#
# Environment: SQLENV_SPIDER_DIR (default ../shared/spider), SQLENV_PYTHON (default .venv/bin/python).
set -euo pipefail

if [[ $# -lt 2 ]]; then
    sed -n '8,20p' "$0" >&2
    exit 2
fi
label=$1
policy=$2
shift 2
sets=("$@")
[[ ${#sets[@]} -gt 0 ]] || sets=(spider10-value spider10-sql dev-sql dev-value)
spider_dir=${SQLENV_SPIDER_DIR:-../shared/spider}
python=${SQLENV_PYTHON:-.venv/bin/python}

for set in "${sets[@]}"; do  # every name checked before anything plays
    case ${set%-shown} in
        spider10-value | spider10-sql | dev-value | dev-sql | val-value | val-sql) ;;
        *)
            echo "unknown set '$set': use spider10-value, spider10-sql, dev-value, dev-sql, val-value or val-sql, each optionally ending in -shown" >&2
            exit 2
            ;;
    esac
done

for set in "${sets[@]}"; do
    split=eval
    case $set in
        spider10-*) dataset=spider10 ;;
        dev-*) dataset=spider ;;  # Spider's dev questions are the spider preset's eval split
        val-*) dataset=spider split=validation ;;
    esac
    base=${set%-shown}
    mode=${base##*-}
    shown=()
    [[ $set == *-shown ]] && shown=(--show-schema)
    echo "== $label: $set ($(date -u +%H:%M:%S))"
    "$python" -m sqlenv.cli eval --policy "$policy" --dataset "$dataset" --split "$split" \
        --spider-dir "$spider_dir" --answer-mode "$mode" --parallel 16 "${shown[@]}" \
        --journal "runs/journal-$label-$set" --report "runs/reports/$label-$set" \
        --json "runs/reports/$label-$set.json"
done
