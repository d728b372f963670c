#pragma once
// Test helpers for the io tests: zlib compression of a buffer with zlib's own
// tools, independently of the io layer's streams. Temporary directories and
// fixture files come from strata/testing/files.h.

#include <zlib.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace strata::io::internal {

// Compresses with zlib's own tools, independently of the io layer's writer.
// window_bits 15 = ZLIB container, 31 = GZIP.
inline std::string deflate_bytes(std::string_view in, int window_bits) {
  z_stream s{};
  deflateInit2(&s, Z_DEFAULT_COMPRESSION, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&s, static_cast<uLong>(in.size())) + 64, '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  s.avail_in = static_cast<uInt>(in.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  deflate(&s, Z_FINISH);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

inline std::string inflate_bytes(std::string_view in, int window_bits) {
  z_stream s{};
  inflateInit2(&s, window_bits);
  std::string out;
  char buf[65536];
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  s.avail_in = static_cast<uInt>(in.size());
  int ret = Z_OK;
  while (ret == Z_OK) {
    s.next_out = reinterpret_cast<Bytef*>(buf);
    s.avail_out = sizeof buf;
    ret = inflate(&s, Z_NO_FLUSH);
    out.append(buf, sizeof buf - s.avail_out);
    if (ret == Z_BUF_ERROR) break;
  }
  inflateEnd(&s);
  if (ret != Z_STREAM_END) throw std::runtime_error("inflate_bytes: bad stream");
  return out;
}

}  // namespace strata::io::internal
