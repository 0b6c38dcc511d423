#!/usr/bin/env bash
# Re-evaluates the published models (models/, or $SQLENV_PUBLISHED_MODELS; models/README.md) on
# Spider dev, the spider preset's eval split (972 questions), in both answer modes (sql: execution
# accuracy; value), greedy, seed 0, 0-shot, and prints the results table. Each model's adapter
# files are checked against its manifest and merged into its base first (`sqlenv models fetch
# NAME`). Each evaluation keeps a journal, so the same command again continues where it stopped;
# finished ones are read back, not played again.
#
#   bash scripts/reproduce_published.sh [NAME ...]     evaluate, then print the table
#   bash scripts/reproduce_published.sh --table [NAME ...]   print the table of what has finished
#
#   NAME   published models (default: every one in the folder)
#
# Environment: SQLENV_SPIDER_DIR (default ../shared/spider), SQLENV_PYTHON (default .venv/bin/python),
# SQLENV_PARALLEL (episodes at once, default 16), SQLENV_REPRODUCE_DIR (journals and results,
# default runs/reproduce).
set -euo pipefail

table_only=0
if [[ ${1:-} == --table ]]; then
    table_only=1
    shift
fi
if [[ ${1:-} == -* ]]; then
    sed -n '9,16p' "$0" >&2
    exit 2
fi
spider_dir=${SQLENV_SPIDER_DIR:-../shared/spider}
python=${SQLENV_PYTHON:-.venv/bin/python}
parallel=${SQLENV_PARALLEL:-16}
out=${SQLENV_REPRODUCE_DIR:-runs/reproduce}
modes=(sql value)

# The published models: those named (each must be one), else all of them. One name a line.
names=$("$python" - "$@" <<'EOF'
import sys

from sqlenv.agents.published_models import published_models, published_root

found = published_models()
asked = sys.argv[1:] or list(found)
unknown = [name for name in asked if name not in found]
if unknown:
    sys.exit(f"not a published model in {published_root()}: {', '.join(unknown)} (sqlenv models list)")
if not asked:
    sys.exit(f"no published models in {published_root()}")
print("\n".join(asked))
EOF
)

if [[ $table_only == 0 ]]; then
    for name in $names; do  # every model checked and merged before anything plays
        "$python" -m sqlenv.cli models fetch "$name"
    done
    for name in $names; do
        for mode in "${modes[@]}"; do
            echo "== $name: Spider dev, $mode mode ($(date -u +%H:%M:%S))"
            "$python" -m sqlenv.cli eval --policy "$name" --dataset spider --split eval \
                --spider-dir "$spider_dir" --answer-mode "$mode" --parallel "$parallel" \
                --journal "$out/journal-$name-dev-$mode" --json "$out/$name-dev-$mode.json"
        done
    done
fi

"$python" - "$out" $names <<'EOF'
import json
import sys
from pathlib import Path

from sqlenv.agents.published_models import published_model
from sqlenv.evaluation.records import wilson_interval

out, names = Path(sys.argv[1]), sys.argv[2:]
MODES = ("sql", "value")


# ---- HOOK: committed per-episode outcomes (issue 77, item 5) -------------------------------------
# `sqlenv results` will commit each reported run's per-episode outcomes (question id, success,
# steps, format errors, answer mode) as compact JSON beside the reports. Until its file layout and
# format land, this reads `<published folder>/<name>/outcomes-dev-<mode>.json` where present: a
# list of episodes (or {"episodes": [...]}) each with `question_id` and `success`. Point this
# function at the committed files once they exist; the table's last columns are empty without them.
def committed_outcomes(name: str, mode: str) -> dict[str, bool] | None:
    model = published_model(name)
    path = model.folder / f"outcomes-dev-{mode}.json" if model is not None else None
    if path is None or not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    episodes = data["episodes"] if isinstance(data, dict) else data
    return {str(e["question_id"]): bool(e["success"]) for e in episodes}
# ---- end of HOOK -----------------------------------------------------------------------------------


print()
print("| model | answer mode | solved | success | 95 % interval | committed | outcomes that differ |")
print("|---|---|---|---|---|---|---|")
for name in names:
    for mode in MODES:
        path = out / f"{name}-dev-{mode}.json"
        if not path.is_file():
            print(f"| {name} | {mode} | not played | | | | |")
            continue
        result = json.loads(path.read_text(encoding="utf-8"))
        mine = {e["question_id"]: bool(e["success"]) for e in result["episodes"]}
        solved, n = sum(mine.values()), len(mine)
        low, high = wilson_interval(solved, n)
        committed = committed_outcomes(name, mode)
        if committed is None:
            then = differ = ""
        else:
            then = f"{sum(committed.values())}/{len(committed)}"
            shared = mine.keys() & committed.keys()
            differ = f"{sum(mine[q] != committed[q] for q in shared)} of {len(shared)}"
        label = "execution accuracy" if mode == "sql" else "success rate"
        print(
            f"| {name} | {mode} ({label}) | {solved}/{n} | {solved / n:.1%} | "
            f"{low:.1%}–{high:.1%} | {then} | {differ} |"
        )
EOF
