#!/usr/bin/env bash
# Sets up (if needed) and runs the whole test suite, slow tests included: the Python environment
# (scripts/setup.sh), then what the tests start (scripts/install_test_tools.sh: Chromium, a Docker
# engine, the TypeScript MCP SDK), then pytest with any arguments given.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install_test_tools.sh
.venv/bin/python -m pytest "$@"
