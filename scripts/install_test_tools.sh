#!/usr/bin/env bash
# Installs what the tests start besides Python packages: Debian's headless Chromium (the /web
# browser tests), a Docker engine with a locally made base image (the image tests), and the
# TypeScript MCP SDK from npm (the non-Python MCP client tests). Each part is skipped where it is
# already there; the system parts need root or sudo (scripts/install_browser.sh,
# scripts/install_docker.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_browser.sh
bash scripts/install_docker.sh
if command -v npm >/dev/null; then
  if [ ! -d tests/mcp_ts_client/node_modules/@modelcontextprotocol/sdk ]; then
    # --no-bin-links: no symbolic links in the tree (openenv validate refuses a package that has any)
    npm ci --prefix tests/mcp_ts_client --no-bin-links --no-audit --no-fund --loglevel=error >/dev/null
  fi
else
  echo "install_test_tools.sh: no npm here; the TypeScript MCP client tests will skip" >&2
fi
