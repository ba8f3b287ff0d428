#!/usr/bin/env bash
# Install the benchmark's anchor, llama.cpp through PyPI's `llama-cpp-python` (the
# optional extra `anchor` of pyproject.toml), into .venv: pip builds it from its sdist
# (about 7 minutes on 2 cores). Used only by bench/bench_vs_llamacpp.py; not by `make test`.
#
# CPU flags are named one by one from what this CPU reports, never GGML_NATIVE
# (-march=native): a native build died with SIGILL on one of the project's VMs.
# AMX stays off (the issue's llama.cpp figures were measured without it); set
# ANCHOR_CMAKE_ARGS to override the whole flag set, e.g. for a machine to copy the
# wheel to: ANCHOR_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON".
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${ANCHOR_VERSION:-0.3.36}
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
has() { [[ " $flags " == *" $1 "* ]]; }
on() { if has "$1"; then echo "-D$2=ON"; else echo "-D$2=OFF"; fi; }
args="-DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_BACKEND_DL=OFF"
args+=" $(on avx GGML_AVX) $(on avx2 GGML_AVX2) $(on fma GGML_FMA) $(on f16c GGML_F16C)"
args+=" $(on bmi2 GGML_BMI2) $(on avx_vnni GGML_AVX_VNNI)"
args+=" $(on avx512f GGML_AVX512) $(on avx512vbmi GGML_AVX512_VBMI)"
args+=" $(on avx512_vnni GGML_AVX512_VNNI) $(on avx512_bf16 GGML_AVX512_BF16)"
args+=" -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
# The bindings only: no multimodal helper, examples, tools or tests of llama.cpp.
args+=" -DLLAVA_BUILD=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
args=${ANCHOR_CMAKE_ARGS:-$args}
echo "llama-cpp-python==$VERSION, CMAKE_ARGS=$args"
# --no-cache-dir: pip's wheel cache is keyed by the sdist, not by CMAKE_ARGS.
CMAKE_ARGS="$args" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
  nice -n "${NICE:-10}" .venv/bin/python -m pip install --no-cache-dir "llama-cpp-python==$VERSION"
.venv/bin/python -c "import llama_cpp; print('llama_cpp', llama_cpp.__version__, llama_cpp.llama_print_system_info().decode())"
