#!/usr/bin/env bash
# VS Code extension: install from the lock file, compile with tsc, run the Node
# tests (pure client logic + a real session with the fake and the real server),
# and package the .vsix. Exits non-zero on the first failure.
# First it installs (once) what tests/editors/test_vscode_e2e.py runs the .vsix in:
# code-server and chromium (scripts/install-vscode-e2e.sh); `make test` runs
# this script before pytest, so that test gets this run's .vsix.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-vscode-e2e.sh
cd editor-integrations/vscode
npm ci --no-audit --no-fund
npm run compile
npm run bundle  # before the tests: the package test lists what `vsce ls` would ship, dist/ included
npm test
npm run package
