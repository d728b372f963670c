#include "strata/base/crc32c.h"

#include <array>
#include <cstring>

#include "strata/base/coding.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define STRATA_CRC32C_X86 1
#include <nmmintrin.h>
#endif

namespace strata::crc32c {
namespace {

constexpr uint32_t kPoly = 0x82f63b78u;

// kTables[k][b]: CRC contribution of byte b followed by k zero bytes, for slice-by-8.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1u) ? kPoly : 0u);
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b) {
    for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xffu];
  }
  return t;
}

constexpr Tables kTables = make_tables();

using ExtendFn = uint32_t (*)(uint32_t, const void*, size_t) noexcept;

ExtendFn choose() noexcept {
  return internal::hardware_available() ? &internal::extend_sse42 : &internal::extend_portable;
}

}  // namespace

namespace internal {

uint32_t extend_portable(uint32_t crc, const void* data, size_t n) noexcept {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7u) != 0) {
    c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xffu];
    --n;
  }
  while (n >= 8) {
    const uint32_t lo = coding::decode_fixed32(reinterpret_cast<const char*>(p)) ^ c;
    const uint32_t hi = coding::decode_fixed32(reinterpret_cast<const char*>(p + 4));
    c = kTables[7][lo & 0xffu] ^ kTables[6][(lo >> 8) & 0xffu] ^ kTables[5][(lo >> 16) & 0xffu] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xffu] ^ kTables[2][(hi >> 8) & 0xffu] ^
        kTables[1][(hi >> 16) & 0xffu] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xffu];
  return ~c;
}

#if STRATA_CRC32C_X86

bool hardware_available() noexcept { return __builtin_cpu_supports("sse4.2"); }

// The target attribute compiles only this function for SSE4.2, so the rest of
// the build keeps the baseline instruction set and the choice is made at run time.
__attribute__((target("sse4.2"))) uint32_t extend_sse42(uint32_t crc, const void* data,
                                                        size_t n) noexcept {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~crc;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7u) != 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);  // x86-64 is little-endian, which crc32 assumes.
    c = _mm_crc32_u64(c, word);
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
  return ~static_cast<uint32_t>(c);
}

#else

bool hardware_available() noexcept { return false; }

uint32_t extend_sse42(uint32_t crc, const void* data, size_t n) noexcept {
  return extend_portable(crc, data, n);
}

#endif

}  // namespace internal

uint32_t extend(uint32_t crc, const void* data, size_t n) noexcept {
  static const ExtendFn fn = choose();
  return fn(crc, data, n);
}

}  // namespace strata::crc32c
