#include "strata/io/idx.h"

#include <cstdio>
#include <limits>

#include "strata/base/errors.h"
#include "strata/io/internal/stream.h"

namespace strata::io {
namespace {

std::string read_all(internal::InputStream& in) {
  std::string out;
  while (in.append(&out, 1 << 20) == (1 << 20)) {
  }
  return out;
}

std::string type_hex(uint8_t code) {
  char s[5];
  std::snprintf(s, sizeof s, "0x%02x", code);
  return s;
}

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f &&
         static_cast<uint8_t>(bytes[1]) == 0x8b;
}

IdxArray parse_plain(std::string_view b, std::string_view name) {
  STRATA_CHECK(DATA_LOSS, b.size() >= 4, name, ": expected a 4-byte IDX magic, got a file of ",
               b.size(), " bytes");
  STRATA_CHECK(DATA_LOSS, b[0] == 0 && b[1] == 0, name,
               ": bad IDX magic: expected the first two bytes to be 00 00");
  const auto code = static_cast<uint8_t>(b[2]);
  switch (code) {
    case 0x08: break;
    case 0x09:
    case 0x0b:
    case 0x0c:
    case 0x0d:
    case 0x0e:
      throw UnimplementedError(str_cat(name, ": IDX type code ", type_hex(code),
                                       " is not supported; only unsigned byte (0x08) is"));
    default:
      throw DataLossError(
          str_cat(name, ": bad IDX type code ", type_hex(code), " (expected 0x08, unsigned byte)"));
  }
  const size_t rank = static_cast<uint8_t>(b[3]);
  STRATA_CHECK(DATA_LOSS, b.size() >= 4 + 4 * rank, name, ": truncated IDX header: ", rank,
               " dimensions need ", 4 + 4 * rank, " bytes, file has ", b.size());
  IdxArray out;
  uint64_t n = 1;
  for (size_t i = 0; i < rank; ++i) {
    const auto* p = reinterpret_cast<const uint8_t*>(b.data() + 4 + 4 * i);
    const uint64_t d =
        (uint64_t{p[0]} << 24) | (uint64_t{p[1]} << 16) | (uint64_t{p[2]} << 8) | p[3];
    out.dims.push_back(static_cast<int64_t>(d));
    // Any product above the file size is already wrong; stop before overflow.
    n = (d != 0 && n > b.size() / d + 1) ? std::numeric_limits<uint64_t>::max() : n * d;
  }
  const uint64_t body = b.size() - 4 - 4 * rank;
  STRATA_CHECK(DATA_LOSS, body == n, name, ": IDX dims ", out.dims, " need ",
               n == std::numeric_limits<uint64_t>::max() ? std::string("too many") : str_cat(n),
               " bytes of data, file has ", body);
  out.data.assign(b.begin() + static_cast<std::ptrdiff_t>(4 + 4 * rank), b.end());
  return out;
}

}  // namespace

IdxArray parse_idx(std::string_view bytes, std::string_view name) {
  if (!is_gzip(bytes)) return parse_plain(bytes, name);
  auto in = internal::InputStream::from_bytes(std::string(bytes), internal::Compression::GZIP,
                                              std::string(name));
  const std::string plain = read_all(*in);
  return parse_plain(plain, name);
}

IdxArray read_idx(const std::string& path) {
  auto in = internal::InputStream::open_file(path, internal::Compression::NONE);
  const std::string bytes = read_all(*in);
  return parse_idx(bytes, path);
}

}  // namespace strata::io
