#include "strata/cluster/cluster_token.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "strata/base/errors.h"

namespace strata::cluster {

void validate_cluster_token(std::string_view token, std::string_view where) {
  STRATA_CHECK_ARG(token.size() <= kMaxClusterTokenBytes, where, ": the cluster token has ",
                   token.size(), " bytes; at most ", kMaxClusterTokenBytes, " are accepted");
  for (const char c : token) {
    STRATA_CHECK_ARG(c > ' ' && c < 0x7f, where,
                     ": the cluster token must be printable ASCII without spaces, found byte ",
                     static_cast<int>(static_cast<unsigned char>(c)));
  }
}

std::string cluster_token() {
  const char* value = std::getenv(kClusterTokenEnv);
  if (value == nullptr) return {};
  std::string token(value);
  validate_cluster_token(token, kClusterTokenEnv);
  return token;
}

std::string generate_cluster_token() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    STRATA_CHECK(UNAVAILABLE, n > 0,
                 "generate_cluster_token: getrandom() failed: ", std::strerror(errno));
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  token.reserve(2 * sizeof(bytes));
  for (const unsigned char b : bytes) {
    token += kHex[b >> 4];
    token += kHex[b & 0xf];
  }
  return token;
}

bool tokens_equal(std::string_view a, std::string_view b) {
  // Every byte of the longer one is visited whatever the contents, and the
  // difference is accumulated without a data-dependent branch.
  const size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  // Keep the compiler from turning the loop into an early-exit comparison.
  volatile unsigned result = diff;
  return result == 0;
}

bool bind_all_interfaces() {
  const char* value = std::getenv("STRATA_BIND_ALL_INTERFACES");
  if (value == nullptr) return false;
  const std::string v(value);
  STRATA_CHECK_ARG(v.empty() || v == "0" || v == "1" || v == "false" || v == "true",
                   "STRATA_BIND_ALL_INTERFACES: expected 1/true or 0/false, got '", v, "'");
  return v == "1" || v == "true";
}

}  // namespace strata::cluster
