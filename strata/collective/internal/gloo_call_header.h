#pragma once
// Private to GlooCollectives: the fixed-size header every rank sends every peer
// at the start of each call, and the receive-area sizing that lets a call's
// data travel right behind it (gloo_collectives.h describes the protocol).
//
// Byte layout, little-endian (STYLE §11), kHeaderBytes in all:
//   u32 magic "STCG" | u8 kind | u64 call | u64 fingerprint hash | i64 dim0 |
//   u8 payload attached | u64 payload bytes |
//   u16 description length | description bytes (truncated) | zero padding
//
//   char wire[kHeaderBytes];
//   encode_call_header({.kind = CollectiveKind::barrier, .call = 7}, wire);
//   CallHeader h = decode_call_header(wire, /*from_rank=*/1);   // h.call == 7
//
// Pure functions; thread-safe.

#include <cstddef>
#include <cstdint>
#include <string>

#include "strata/collective/internal/signature.h"

namespace strata::collective::internal {

inline constexpr size_t kHeaderBytes = 512;
inline constexpr uint32_t kHeaderMagic = 0x47435453;  // "STCG"
inline constexpr size_t kHeaderFixed = 4 + 1 + 8 + 8 + 8 + 1 + 8 + 2;
// The longest description a header carries; longer ones are truncated.
inline constexpr size_t kMaxHeaderDescription = kHeaderBytes - kHeaderFixed;

// Every call sends each peer two messages on the header slot: the header, then
// either this rank's data for the call ("the payload", when it fits in the
// peer's receive area) or a few dummy bytes. Each rank posts both receives
// before it sends, so the payload travels in the same round trip as the
// header instead of a second one after the headers agree. The receive area is
// the same size on every rank (it depends only on the group size), so no
// message can exceed what its receiver posted, whatever the peers' calls are.
inline constexpr size_t kPayloadAreaBytes = size_t{4} << 20;  // across all peers
inline constexpr size_t kDummyBytes = 8;

// The bytes of one peer's payload that fit its share of the receive area: 4 MiB
// / (size - 1), rounded down to 64 bytes, and at least 256 KiB.
size_t payload_capacity(int size);

struct CallHeader {
  CollectiveKind kind = CollectiveKind::barrier;
  uint64_t call = 0;
  uint64_t hash = 0;
  int64_t dim0 = 0;
  bool attached = false;       // the second message carries the payload
  uint64_t payload_bytes = 0;  // its length when attached
  std::string description;
};

// Writes `h` to out[0..kHeaderBytes).
void encode_call_header(const CallHeader& h, char* out);

// Reads the header at in[0..kHeaderBytes) that rank `from_rank` sent.
// DataLossError naming that rank on a bad magic or a description length past
// the header's end.
CallHeader decode_call_header(const char* in, int from_rank);

}  // namespace strata::collective::internal
