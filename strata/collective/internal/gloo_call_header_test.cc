#include "strata/collective/internal/gloo_call_header.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "strata/base/errors.h"

namespace strata::collective::internal {
namespace {

using ::testing::HasSubstr;

TEST(GlooCallHeader, EncodesFieldByFieldInLittleEndianOrder) {
  char wire[kHeaderBytes];
  encode_call_header({.kind = CollectiveKind::broadcast,
                      .call = 0x0102,
                      .hash = 0x1122334455667788ull,
                      .dim0 = -2,
                      .attached = true,
                      .payload_bytes = 300,
                      .description = "ab"},
                     wire);
  const std::string expected = std::string("STCG", 4)                                // magic, LE
                               + std::string("\x03", 1)                              // kind
                               + std::string("\x02\x01\0\0\0\0\0\0", 8)              // call
                               + std::string("\x88\x77\x66\x55\x44\x33\x22\x11", 8)  // hash
                               + std::string("\xfe\xff\xff\xff\xff\xff\xff\xff", 8)  // dim0
                               + std::string("\x01", 1)                              // attached
                               + std::string("\x2c\x01\0\0\0\0\0\0", 8)  // payload bytes
                               + std::string("\x02\x00", 2) + "ab";      // description
  ASSERT_EQ(expected.size(), kHeaderFixed + 2);
  EXPECT_EQ(std::string(wire, expected.size()), expected);
  EXPECT_EQ(std::string(wire + expected.size(), kHeaderBytes - expected.size()),
            std::string(kHeaderBytes - expected.size(), '\0'));

  const CallHeader h = decode_call_header(wire, 1);
  EXPECT_EQ(h.kind, CollectiveKind::broadcast);
  EXPECT_EQ(h.call, 0x0102u);
  EXPECT_EQ(h.hash, 0x1122334455667788ull);
  EXPECT_EQ(h.dim0, -2);
  EXPECT_TRUE(h.attached);
  EXPECT_EQ(h.payload_bytes, 300u);
  EXPECT_EQ(h.description, "ab");
}

TEST(GlooCallHeader, LongDescriptionsAreTruncatedToTheHeader) {
  char wire[kHeaderBytes];
  encode_call_header({.description = std::string(1000, 'x')}, wire);
  EXPECT_EQ(decode_call_header(wire, 0).description, std::string(kMaxHeaderDescription, 'x'));
}

TEST(GlooCallHeader, CorruptHeadersAreDataLossNamingTheSender) {
  char wire[kHeaderBytes];
  encode_call_header({}, wire);
  wire[0] = 'X';
  try {
    decode_call_header(wire, 3);
    FAIL() << "no error";
  } catch (const DataLossError& e) {
    EXPECT_THAT(e.what(), HasSubstr("corrupt call header from rank 3 (bad magic)"));
  }
  encode_call_header({}, wire);
  wire[kHeaderFixed - 2] = static_cast<char>(0xff);  // description length 0xffff
  wire[kHeaderFixed - 1] = static_cast<char>(0xff);
  try {
    decode_call_header(wire, 2);
    FAIL() << "no error";
  } catch (const DataLossError& e) {
    EXPECT_THAT(e.what(), HasSubstr("from rank 2 (description length 65535)"));
  }
}

TEST(GlooCallHeader, PayloadCapacitySplitsTheAreaAmongPeers) {
  EXPECT_EQ(payload_capacity(1), kPayloadAreaBytes);
  EXPECT_EQ(payload_capacity(2), kPayloadAreaBytes);
  EXPECT_EQ(payload_capacity(5), kPayloadAreaBytes / 4);
  EXPECT_EQ(payload_capacity(64), size_t{256} << 10);  // the floor
}

TEST(GlooCallHeader, TheHeaderMessageCarriesUpTo64KiBOfPayload) {
  EXPECT_EQ(inline_capacity(2), size_t{64} << 10);
  EXPECT_EQ(inline_capacity(64), size_t{64} << 10);  // still below the 256 KiB floor
}

}  // namespace
}  // namespace strata::collective::internal
