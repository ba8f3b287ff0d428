#!/usr/bin/env bash
# docs/neovim-ghost-text.png: the real nvim (TUI, in tmux) with the plugin and the real server, typing into a
# Python file; the pane (with its colours) becomes HTML (Debian `aha`) and a headless Chromium screenshot.
# Needs tmux, aha, chromium (apt-get install tmux aha chromium). Usage: bash scripts/screenshot-nvim.sh [OUT.png]
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD OUT=${1:-docs/neovim-ghost-text.png} WORK=$(mktemp -d)
trap 'tmux kill-session -t spd-shot 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/ws/.git" "$WORK/store"
printf 'import os\n\n\ndef list_python_files(root):\n    """Return every .py file below root."""\n    result = []\n    for dirpath, dirnames, filenames in os.walk(root):\n        for name in filenames:\n' > "$WORK/ws/walk.py"
cat > "$WORK/init.lua" <<LUA
vim.opt.runtimepath:prepend('$REPO/editor-integrations/neovim')
vim.opt.swapfile = false
vim.opt.termguicolors = true
vim.opt.number = true
require('spd').setup({ cmd = { '$REPO/.venv/bin/spd-lsp', '--stdio' }, k = 3, max_tokens = 10,
  ngrams = { db = '$WORK/store' }, engine = 'in-process' })
LUA
cd "$WORK/ws"
tmux new-session -d -s spd-shot -x 100 -y 16 "$REPO/.venv/bin/nvim -u $WORK/init.lua walk.py"
sleep 4; tmux send-keys -t spd-shot G o; sleep 1; tmux send-keys -t spd-shot 'if name.end'
for _ in $(seq 60); do  # until the ghost text's counter (1/3) is drawn
  sleep 1; tmux capture-pane -t spd-shot -p | grep -q '1/3' && break
done
tmux capture-pane -t spd-shot -p -e | aha --black --title "Neovim + spd-lsp" \
  | sed 's#<pre>#<pre style="font-size:15px;font-family:DejaVu Sans Mono,monospace;margin:8px">#' > "$WORK/pane.html"
cd "$REPO"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=960,330 \
  --screenshot="$OUT" "file://$WORK/pane.html" 2>/dev/null
echo "wrote $OUT"
