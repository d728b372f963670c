#include "strata/testing/files.h"

namespace strata::testing {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

void write_file(const std::string& path, std::string_view bytes) {
  write_file_atomically(path, bytes);
}

std::string from_hex(std::string_view hex) {
  std::string out;
  int nibble = -1;
  for (char c : hex) {
    const int v = hex_value(c);
    if (v < 0) continue;
    if (nibble < 0) {
      nibble = v;
    } else {
      out.push_back(static_cast<char>(nibble * 16 + v));
      nibble = -1;
    }
  }
  return out;
}

}  // namespace strata::testing
