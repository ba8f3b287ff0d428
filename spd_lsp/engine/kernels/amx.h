// AMX's tile state, shared by amx.cpp (a projection's rows) and prompt.cpp (a prompt's attention): Linux's permission
// for it and the one tile layout both use. Built where the CPU has AMX (build.py adds -mamx-tile -mamx-bf16).
#pragma once

#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
#define SPD_AMX_TILES 1
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace spd_kernels {

// Linux hands out the tiles' state only on request (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); oneDNN asks
// too, but our kernels may run before any oneDNN AMX kernel has. Asked once a process.
inline bool tiles_allowed() {
  static const bool allowed = [] { return syscall(SYS_arch_prctl, 0x1023, 18) == 0; }();
  return allowed;
}

// All eight tiles as 16 rows of 64 bytes (16 fp32 or 32 bf16 a row), in this thread.
inline void configure_tiles() {
  struct alignas(64) {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
    uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
  } config;
  _tile_loadconfig(&config);
}

}  // namespace spd_kernels

#endif  // AMX tiles
