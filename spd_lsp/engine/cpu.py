"""What the engine knows of the CPU: its feature flags, and the vector level the kernels build for (`CpuProfile`).

The profile follows torch's own CPU capability (`torch.backends.cpu.get_cpu_capability()`, which `ATEN_CPU_CAPABILITY`
can lower: `engine/kernels/build.py`'s `profile()`): ATen, inductor and our kernels then agree on one ISA. `PROFILES` are named profiles of the CPUs users run
(tests resolve plans for each without that hardware).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags (x86 "flags", Arm "Features"); empty where the system does not list them."""
    try:
        lines = cpuinfo.read_text(errors="replace").splitlines()
    except OSError:
        return frozenset()
    listed = (line.split(":", 1)[-1] for line in lines if line.lower().startswith(("flags", "features")))
    return frozenset(flag for flags in listed for flag in flags.split())


@dataclass(frozen=True)
class CpuProfile:
    arch: str  # "x86_64", "aarch64"
    capability: str  # torch's: "AVX512", "AVX2", "DEFAULT", "SVE256", ...
    flags: frozenset[str]

    @property
    def isa(self) -> str:
        """The vector level our kernels are built for: "amx", "avx512-bf16", "avx512", "avx2", "neon" or "scalar"."""
        if self.arch == "x86_64":
            if self.capability == "AVX512":
                if {"amx_tile", "amx_bf16"} <= self.flags and "avx512_bf16" in self.flags:
                    return "amx"
                return "avx512-bf16" if "avx512_bf16" in self.flags else "avx512"
            return "avx2" if self.capability == "AVX2" else "scalar"
        if self.arch in ("aarch64", "arm64"):
            return "neon"
        return "scalar"

    @property
    def bf16_dot(self) -> bool:
        """AVX-512 BF16's dot products, which the tuned matvec, prompt-attention and fused-step kernels use."""
        return self.isa in ("amx", "avx512-bf16")

    @property
    def int8_dot(self) -> bool:
        """AVX-512 VNNI's int8 dot products beside AVX-512 BF16: the K-quants' decode kernels, and every kind of blocks'
        trees and batches (int8 activations)."""
        return self.bf16_dot and "avx512_vnni" in self.flags

    @property
    def amx(self) -> bool:
        return self.isa == "amx"

    @classmethod
    def of(cls, capability: str) -> "CpuProfile":
        """This machine's, where torch runs `capability` (`torch.backends.cpu.get_cpu_capability()`: the caller's, so
        that this module never imports torch: the front end's settings read it)."""
        return cls(arch=platform.machine(), capability=capability, flags=cpu_flags())


_X86 = frozenset({"avx", "avx2", "fma", "f16c"})
_AVX512 = _X86 | {"avx512f", "avx512bw", "avx512vl", "avx512dq"}
# Every CPU with AVX-512 BF16 users run has VNNI too (Intel Cooper Lake and later, AMD Zen 4 and 5).
PROFILES = {
    "amx": CpuProfile("x86_64", "AVX512", _AVX512 | {"avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8"}),
    "avx512-bf16": CpuProfile("x86_64", "AVX512", _AVX512 | {"avx512_bf16", "avx512_vnni"}),
    "avx2": CpuProfile("x86_64", "AVX2", _X86),
    "arm64": CpuProfile("aarch64", "DEFAULT", frozenset({"fp", "asimd", "bf16"})),
}
