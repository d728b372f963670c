#pragma once
// Private to the cluster layer: the TCP store's wire protocol
// (strata/cluster/tcp_store.h documents the grammar), shared by its server and
// client. Integers are little-endian (strata/base/coding.h).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::cluster::internal {

inline constexpr uint8_t kSet = 1, kGet = 2, kAdd = 3, kCheck = 4, kWait = 5;  // request ops
inline constexpr uint8_t kHello = 6;  // the first frame of every connection, never answered
inline constexpr const char* kHelloMagic = "strata-store/2";
// A HELLO frame (magic and a token of at most kMaxClusterTokenBytes) is this
// small; a first frame announcing more is not a client's.
inline constexpr uint32_t kMaxHelloFrame = 512;
inline constexpr uint8_t kOk = 0, kTimeout = 1, kError = 2, kExhausted = 3;  // reply statuses
inline constexpr size_t kFrameHeaderBytes = 4;
// The largest reply a client reads (a GET's value is limited by the server's
// max_frame_bytes when set; this only bounds a corrupt length).
inline constexpr uint32_t kMaxReplyFrame = 1u << 30;

// A malformed payload; the server drops the connection, the client reports DataLossError.
struct ProtocolError {
  std::string what;
};

void put_u8(std::string& out, uint8_t v);
// string := u32 n, then n bytes.
void put_bytes(std::string& out, const char* data, size_t n);
void put_string(std::string& out, const std::string& s);
// u32 count, count x string.
void put_keys(std::string& out, const std::vector<std::string>& keys);
// frame := u32 length, then the payload.
std::string frame(std::string_view payload);

// Reads the fields of one payload in order; throws ProtocolError past its end.
// One thread at a time.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  uint8_t u8();
  uint32_t u32();
  uint64_t u64();
  std::string str();
  std::vector<std::string> keys();
  // ProtocolError unless every byte was read.
  void finish() const;

 private:
  std::string_view take(size_t n);
  std::string_view data_;
};

// "['a', 'b']", for error messages.
std::string quoted(const std::vector<std::string>& keys);

}  // namespace strata::cluster::internal
