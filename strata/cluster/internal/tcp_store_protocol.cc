#include "strata/cluster/internal/tcp_store_protocol.h"

#include "strata/base/coding.h"
#include "strata/base/str_cat.h"

namespace strata::cluster::internal {

void put_u8(std::string& out, uint8_t v) { out.push_back(static_cast<char>(v)); }

void put_bytes(std::string& out, const char* data, size_t n) {
  coding::put_fixed32(out, static_cast<uint32_t>(n));
  out.append(data, n);
}

void put_string(std::string& out, const std::string& s) { put_bytes(out, s.data(), s.size()); }

void put_keys(std::string& out, const std::vector<std::string>& keys) {
  coding::put_fixed32(out, static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) put_string(out, k);
}

std::string frame(std::string_view payload) {
  std::string out;
  out.reserve(kFrameHeaderBytes + payload.size());
  coding::put_fixed32(out, static_cast<uint32_t>(payload.size()));
  out += payload;
  return out;
}

uint8_t Reader::u8() { return static_cast<uint8_t>(take(1)[0]); }
uint32_t Reader::u32() { return coding::decode_fixed32(take(4).data()); }
uint64_t Reader::u64() { return coding::decode_fixed64(take(8).data()); }
std::string Reader::str() { return std::string(take(u32())); }

std::vector<std::string> Reader::keys() {
  const uint32_t n = u32();
  if (n > data_.size()) throw ProtocolError{"key count past the end of the frame"};
  std::vector<std::string> out;
  for (uint32_t i = 0; i < n; ++i) out.push_back(str());
  return out;
}

void Reader::finish() const {
  if (!data_.empty()) throw ProtocolError{"trailing bytes in frame"};
}

std::string_view Reader::take(size_t n) {
  if (n > data_.size()) throw ProtocolError{"frame too short"};
  auto out = data_.substr(0, n);
  data_.remove_prefix(n);
  return out;
}

std::string quoted(const std::vector<std::string>& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i) out += str_cat(i ? ", '" : "'", keys[i], "'");
  return out + "]";
}

}  // namespace strata::cluster::internal
