#include "strata/base/coding.h"

namespace strata::coding {
namespace {

template <typename T>
void put_varint(std::string& dst, T v) {
  while (v >= 0x80) {
    dst.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  dst.push_back(static_cast<char>(v));
}

// `bits` is 32 or 64. The last possible byte (the 5th or the 10th) may carry
// only the bits left of the width: 4 for 32, 1 for 64.
DecodedVarint decode_varint(std::string_view in, int bits) noexcept {
  const size_t max_bytes = bits == 32 ? kMaxVarint32Bytes : kMaxVarint64Bytes;
  const int last_shift = 7 * static_cast<int>(max_bytes - 1);
  const auto last_mask = static_cast<uint8_t>(0x7f & ~((1u << (bits - last_shift)) - 1));
  DecodedVarint out;
  uint64_t v = 0;
  for (size_t i = 0; i < max_bytes; ++i) {
    if (i >= in.size()) return out;  // truncated
    const auto byte = static_cast<uint8_t>(in[i]);
    const int shift = 7 * static_cast<int>(i);
    if (shift == last_shift && (byte & last_mask) != 0) {
      out.status = VarintStatus::overflow;
      return out;
    }
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      out.status = VarintStatus::ok;
      out.value = v;
      out.length = i + 1;
      return out;
    }
  }
  out.status = VarintStatus::too_long;
  return out;
}

}  // namespace

void put_varint32(std::string& dst, uint32_t v) { put_varint(dst, v); }
void put_varint64(std::string& dst, uint64_t v) { put_varint(dst, v); }

size_t varint_length(uint64_t v) noexcept {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

DecodedVarint decode_varint64(std::string_view in) noexcept { return decode_varint(in, 64); }
DecodedVarint decode_varint32(std::string_view in) noexcept { return decode_varint(in, 32); }

}  // namespace strata::coding
