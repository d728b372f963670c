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

// Every call sends each peer one message on the header slot: the header,
// followed, when this rank's data for the call ("the payload") is at most
// inline_capacity() bytes, by that payload. A larger payload that still fits
// the peer's receive area (payload_capacity()) follows as a second message on
// the payload slot. Each rank keeps its receives for the next call posted
// before the peers can send (GlooCollectives posts them at the start of the
// call before, in two alternating sets), so a message goes out as soon as it
// is sent, without waiting for the receiver's readiness notice: the data
// travels in the same one-way trip as the header. The receive areas are the
// same size on every rank (they depend only on the group size), so no message
// can exceed what its receiver posted, whatever the peers' calls are.
inline constexpr size_t kPayloadAreaBytes = size_t{4} << 20;  // across all peers
inline constexpr size_t kInlinePayloadBytes = size_t{64} << 10;

// The bytes of one peer's payload that fit its share of the receive area: 4 MiB
// / (size - 1), rounded down to 64 bytes, and at least 256 KiB.
size_t payload_capacity(int size);

// The bytes of payload the header message itself carries: 64 KiB, at most
// payload_capacity(size).
size_t inline_capacity(int size);

struct CallHeader {
  CollectiveKind kind = CollectiveKind::barrier;
  uint64_t call = 0;
  uint64_t hash = 0;
  int64_t dim0 = 0;
  bool attached = false;       // the payload travels with the header (inline or after it)
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
