#include "strata/collective/internal/gloo_failure_reports.h"

#include <arpa/inet.h>

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

namespace strata::collective::internal {
namespace {

// What Gloo's TCP address printing shows for `port`: the two bytes of the
// socket address's port field (network order) read as a host integer.
int as_gloo_prints(uint16_t port) { return htons(port); }

TEST(GlooMessages, PortsPrintInHostByteOrder) {
  // 12345 = 0x3039; its bytes swapped, 0x3930 = 14640 (on a little-endian host).
  const std::string gloo =
      "Connection closed by peer [127.0.0.1]:" + std::to_string(as_gloo_prints(12345)) +
      " while reading";
  EXPECT_EQ(with_host_order_ports(gloo),
            "Connection closed by peer [127.0.0.1]:12345 while reading");
  // Every address in the message, IPv6 too; the ends of the text.
  const std::string two = "[::1]:" + std::to_string(as_gloo_prints(80)) +
                          " and [10.0.0.2]:" + std::to_string(as_gloo_prints(65535));
  EXPECT_EQ(with_host_order_ports(two), "[::1]:80 and [10.0.0.2]:65535");
  // Text that is not a port is left alone.
  EXPECT_EQ(with_host_order_ports("a[b]:x [c]: 1 [d]:999999 done"),
            "a[b]:x [c]: 1 [d]:999999 done");
  EXPECT_EQ(with_host_order_ports("no address"), "no address");
}

}  // namespace
}  // namespace strata::collective::internal
