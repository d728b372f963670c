#pragma once
// CRC-32C (Castagnoli), the checksum of TFRecord files and Strata's own formats.
//
// Reflected polynomial 0x82F63B78, initial value 0xFFFFFFFF, final XOR 0xFFFFFFFF;
// value("123456789") == 0xE3069283. On x86-64 CPUs with SSE4.2 the hardware crc32
// instruction is used (chosen once, at run time); elsewhere a portable slice-by-8
// table implementation gives the same results.
//
//   uint32_t c = strata::crc32c::value(bytes);            // whole buffer
//   c = strata::crc32c::extend(c, more);                  // == value(bytes + more)
//   uint32_t stored = strata::crc32c::mask(c);            // what TFRecord stores
//   assert(strata::crc32c::unmask(stored) == c);
//
// All functions are pure and thread-safe.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace strata::crc32c {

// Returns the CRC-32C of `data` appended to a buffer whose CRC-32C is `crc`
// (extend(0, x) == value(x); extend(value(a), b) == value(a + b)).
uint32_t extend(uint32_t crc, const void* data, size_t n) noexcept;
inline uint32_t extend(uint32_t crc, std::string_view data) noexcept {
  return extend(crc, data.data(), data.size());
}

// Returns the CRC-32C of `data`.
inline uint32_t value(const void* data, size_t n) noexcept { return extend(0, data, n); }
inline uint32_t value(std::string_view data) noexcept {
  return extend(0, data.data(), data.size());
}

inline constexpr uint32_t kMaskDelta = 0xa282ead8u;

// The masked form stored in TFRecord files: rotate right by 15 bits, then add
// kMaskDelta (mod 2^32). Masking keeps the CRC of data that itself contains CRCs
// from being trivially related to them.
constexpr uint32_t mask(uint32_t crc) noexcept { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

// Inverse of mask().
constexpr uint32_t unmask(uint32_t masked) noexcept {
  const uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

namespace internal {
// The two implementations behind extend(), exposed so tests can check both.
uint32_t extend_portable(uint32_t crc, const void* data, size_t n) noexcept;
// Requires hardware_available(); otherwise the behaviour is undefined.
uint32_t extend_sse42(uint32_t crc, const void* data, size_t n) noexcept;
// True when this CPU has the SSE4.2 crc32 instruction (and this build can use it).
bool hardware_available() noexcept;
}  // namespace internal

}  // namespace strata::crc32c
