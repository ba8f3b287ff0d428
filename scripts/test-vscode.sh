#!/usr/bin/env bash
# VS Code extension: install from the lock file, compile with tsc, run the Node
# tests (pure client logic + a real session with the fake and the real server),
# and package the .vsix. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/../editor-integrations/vscode"
npm ci --no-audit --no-fund
npm run compile
npm test
npm run package
