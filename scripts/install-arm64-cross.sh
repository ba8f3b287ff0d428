#!/usr/bin/env bash
# Debian's arm64 cross compiler, for tests/engine/test_portable_builds.py: every kernel source compiled for
# arm64 (NEON) on this x86 machine, since none of the project's machines is arm64. Idempotent; ~30 s the first time.
set -euo pipefail
command -v aarch64-linux-gnu-g++ >/dev/null && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q g++-aarch64-linux-gnu >/dev/null \
    || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q g++-aarch64-linux-gnu >/dev/null; }
else
  echo "install-arm64-cross: need g++-aarch64-linux-gnu (apt-get as root)" >&2
  exit 1
fi
