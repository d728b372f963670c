#pragma once
// Byte-level integer codecs for Strata's formats and wire protocols (STYLE §11):
// fixed-width little-endian integers and base-128 varints (protobuf's and
// leveldb's encoding). Every value is assembled byte by byte, so the bytes are
// the same on any host; compilers turn the fixed-width forms into single loads
// and stores on little-endian machines.
//
//   std::string out;
//   strata::coding::put_fixed32(out, 0x04030201);    // out == "\x01\x02\x03\x04"
//   strata::coding::put_varint64(out, 300);          // appends "\xac\x02"
//   uint32_t v = strata::coding::decode_fixed32(out.data());          // 0x04030201
//   auto d = strata::coding::decode_varint64(std::string_view(out).substr(4));
//   if (d.status == strata::coding::VarintStatus::ok) use(d.value, d.length);  // 300, 2
//
// Fixed-width decoders read exactly N bytes: the caller checks the bounds (a
// format's reader knows which record or field it is in and names it in its
// error). Varint decoders check their own bounds and report a truncated or
// over-long varint through VarintStatus, never reading past the view.
// Everything here is pure and thread-safe.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata::coding {

inline constexpr size_t kMaxVarint32Bytes = 5;
inline constexpr size_t kMaxVarint64Bytes = 10;

// --- fixed width, little-endian ---------------------------------------------

// Writes the N bytes of `v`, least significant first, to dst[0..N).
inline void encode_fixed16(char* dst, uint16_t v) noexcept {
  for (int i = 0; i < 2; ++i) dst[i] = static_cast<char>((v >> (8 * i)) & 0xffu);
}
inline void encode_fixed32(char* dst, uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<char>((v >> (8 * i)) & 0xffu);
}
inline void encode_fixed64(char* dst, uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) dst[i] = static_cast<char>((v >> (8 * i)) & 0xffu);
}

// Reads N bytes from src[0..N), least significant first.
inline uint16_t decode_fixed16(const char* src) noexcept {
  return static_cast<uint16_t>(static_cast<uint8_t>(src[0]) |
                               (static_cast<uint16_t>(static_cast<uint8_t>(src[1])) << 8));
}
inline uint32_t decode_fixed32(const char* src) noexcept {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(src[i])) << (8 * i);
  return v;
}
inline uint64_t decode_fixed64(const char* src) noexcept {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(src[i])) << (8 * i);
  return v;
}

// Appends the N little-endian bytes of `v` to `dst`.
inline void put_fixed32(std::string& dst, uint32_t v) {
  char buf[4];
  encode_fixed32(buf, v);
  dst.append(buf, sizeof buf);
}
inline void put_fixed64(std::string& dst, uint64_t v) {
  char buf[8];
  encode_fixed64(buf, v);
  dst.append(buf, sizeof buf);
}

// --- varints ------------------------------------------------------------------

// Appends `v` as a varint: 7 bits per byte, least significant group first, the
// high bit set on every byte but the last (1 to 5 bytes for 32 bits, 1 to 10
// for 64).
void put_varint32(std::string& dst, uint32_t v);
void put_varint64(std::string& dst, uint64_t v);

// The number of bytes put_varint64(v) appends (1..10).
size_t varint_length(uint64_t v) noexcept;

enum class VarintStatus {
  ok,
  truncated,  // the view ends before the varint's last byte (one without the high bit)
  overflow,   // the last byte carries bits beyond the decoded width
  too_long,   // no last byte within kMaxVarint{32,64}Bytes
};

struct DecodedVarint {
  VarintStatus status = VarintStatus::truncated;
  uint64_t value = 0;  // valid when status == ok
  size_t length = 0;   // bytes the varint occupies at the front of the view, when ok
};

// Decodes the varint at the front of `in`, reading no byte past in.size().
// Checks in the order a reader meets them, byte by byte: the view ending
// (truncated), then bits beyond the width in the last possible byte
// (overflow), then a last possible byte that still has the high bit set
// (too_long). decode_varint32 treats the width as 32 bits.
DecodedVarint decode_varint64(std::string_view in) noexcept;
DecodedVarint decode_varint32(std::string_view in) noexcept;

}  // namespace strata::coding
