#include "strata/base/coding.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace strata::coding {
namespace {

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

TEST(Coding, FixedWidthIntegersAreLittleEndianWhateverTheHost) {
  std::string out;
  put_fixed32(out, 0x04030201u);
  put_fixed64(out, 0x0807060504030201ull);
  EXPECT_EQ(out, bytes({1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(decode_fixed32(out.data()), 0x04030201u);
  EXPECT_EQ(decode_fixed64(out.data() + 4), 0x0807060504030201ull);

  char buf[8];
  encode_fixed16(buf, 0xbeef);
  EXPECT_EQ(std::string(buf, 2), bytes({0xef, 0xbe}));
  EXPECT_EQ(decode_fixed16(buf), 0xbeef);
  encode_fixed32(buf, 0xffffffffu);
  EXPECT_EQ(decode_fixed32(buf), 0xffffffffu);  // bytes >= 0x80 do not sign-extend
  encode_fixed64(buf, 0x8000000000000001ull);
  EXPECT_EQ(std::string(buf, 8), bytes({1, 0, 0, 0, 0, 0, 0, 0x80}));
  EXPECT_EQ(decode_fixed64(buf), 0x8000000000000001ull);
}

TEST(Coding, VarintsMatchHandWorkedBytes) {
  struct Case {
    uint64_t value;
    std::string encoded;
  };
  const std::vector<Case> cases = {
      {0, bytes({0x00})},
      {1, bytes({0x01})},
      {127, bytes({0x7f})},
      {128, bytes({0x80, 0x01})},
      {300, bytes({0xac, 0x02})},  // protobuf's documentation example
      {16384, bytes({0x80, 0x80, 0x01})},
      {0xffffffffu, bytes({0xff, 0xff, 0xff, 0xff, 0x0f})},
      {std::numeric_limits<uint64_t>::max(),
       bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.value);
    std::string out;
    put_varint64(out, c.value);
    EXPECT_EQ(out, c.encoded);
    EXPECT_EQ(varint_length(c.value), c.encoded.size());
    const DecodedVarint d = decode_varint64(c.encoded + "trailing");
    ASSERT_EQ(d.status, VarintStatus::ok);
    EXPECT_EQ(d.value, c.value);
    EXPECT_EQ(d.length, c.encoded.size());
    if (c.value <= std::numeric_limits<uint32_t>::max()) {
      std::string out32;
      put_varint32(out32, static_cast<uint32_t>(c.value));
      EXPECT_EQ(out32, c.encoded);
      EXPECT_EQ(decode_varint32(c.encoded).value, c.value);
    }
  }
}

TEST(Coding, VarintDecodingReportsTruncationAtEveryByte) {
  std::string full;
  put_varint64(full, std::numeric_limits<uint64_t>::max());
  for (size_t n = 0; n < full.size(); ++n) {
    SCOPED_TRACE(n);
    EXPECT_EQ(decode_varint64(std::string_view(full).substr(0, n)).status, VarintStatus::truncated);
  }
  EXPECT_EQ(decode_varint64(full).status, VarintStatus::ok);
}

TEST(Coding, VarintDecodingRejectsBitsBeyondTheWidth) {
  // 2^64 would need bit 1 of the tenth byte.
  EXPECT_EQ(
      decode_varint64(bytes({0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02})).status,
      VarintStatus::overflow);
  // 2^32 would need bit 4 of the fifth byte.
  EXPECT_EQ(decode_varint32(bytes({0x80, 0x80, 0x80, 0x80, 0x10})).status, VarintStatus::overflow);
  // The same bytes are a fine 64-bit varint.
  const DecodedVarint wide = decode_varint64(bytes({0x80, 0x80, 0x80, 0x80, 0x10}));
  ASSERT_EQ(wide.status, VarintStatus::ok);
  EXPECT_EQ(wide.value, uint64_t{1} << 32);
}

TEST(Coding, VarintDecodingRejectsMoreThanTheMaximumBytes) {
  EXPECT_EQ(
      decode_varint64(bytes({0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x81, 0x00}))
          .status,
      VarintStatus::too_long);
  EXPECT_EQ(decode_varint32(bytes({0x80, 0x80, 0x80, 0x80, 0x80, 0x00})).status,
            VarintStatus::too_long);
}

}  // namespace
}  // namespace strata::coding
