#include "strata/collective/internal/gloo_call_header.h"

#include <algorithm>
#include <cstring>

#include "strata/base/coding.h"
#include "strata/base/errors.h"

namespace strata::collective::internal {

size_t payload_capacity(int size) {
  const size_t per_peer = kPayloadAreaBytes / static_cast<size_t>(std::max(1, size - 1));
  return std::max<size_t>(size_t{256} << 10, per_peer / 64 * 64);
}

size_t inline_capacity(int size) { return std::min(kInlinePayloadBytes, payload_capacity(size)); }

void encode_call_header(const CallHeader& h, char* out) {
  std::memset(out, 0, kHeaderBytes);
  char* p = out;
  coding::encode_fixed32(p, kHeaderMagic);
  p += 4;
  *p++ = static_cast<char>(h.kind);
  coding::encode_fixed64(p, h.call);
  p += 8;
  coding::encode_fixed64(p, h.hash);
  p += 8;
  coding::encode_fixed64(p, static_cast<uint64_t>(h.dim0));
  p += 8;
  *p++ = static_cast<char>(h.attached ? 1 : 0);
  coding::encode_fixed64(p, h.payload_bytes);
  p += 8;
  const size_t len = std::min(h.description.size(), kMaxHeaderDescription);
  coding::encode_fixed16(p, static_cast<uint16_t>(len));
  p += 2;
  // The description is a length-prefixed field, not a C string: no terminator by design.
  std::memcpy(p, h.description.data(), len);  // NOLINT(bugprone-not-null-terminated-result)
}

CallHeader decode_call_header(const char* in, int from_rank) {
  const char* p = in;
  STRATA_CHECK(DATA_LOSS, coding::decode_fixed32(p) == kHeaderMagic,
               "GlooCollectives: corrupt call header from rank ", from_rank, " (bad magic)");
  p += 4;
  CallHeader h;
  h.kind = static_cast<CollectiveKind>(static_cast<uint8_t>(*p++));
  h.call = coding::decode_fixed64(p);
  p += 8;
  h.hash = coding::decode_fixed64(p);
  p += 8;
  h.dim0 = static_cast<int64_t>(coding::decode_fixed64(p));
  p += 8;
  h.attached = *p++ != 0;
  h.payload_bytes = coding::decode_fixed64(p);
  p += 8;
  const size_t len = coding::decode_fixed16(p);
  p += 2;
  STRATA_CHECK(DATA_LOSS, len <= kMaxHeaderDescription,
               "GlooCollectives: corrupt call header from rank ", from_rank,
               " (description length ", len, ")");
  h.description.assign(p, len);
  return h;
}

}  // namespace strata::collective::internal
