#!/usr/bin/env bash
# Sets up (if needed) and runs the whole test suite, slow tests included: the Python environment
# (scripts/setup.sh), then what the tests start (scripts/install_test_tools.sh: Chromium, a Docker
# engine, the TypeScript MCP SDK), then pytest with any arguments given, on two workers
# (pytest-xdist; tests/conftest.py's scheduler keeps each file on one worker and the language-model
# files on one worker, one after the other; `-n 0` runs everything in one process).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install_test_tools.sh
.venv/bin/python -m pytest -n "${SQLENV_TEST_WORKERS:-2}" "$@"
