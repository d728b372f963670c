#include "strata/base/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace strata::crc32c {
namespace {

struct Impl {
  const char* name;
  uint32_t (*fn)(uint32_t, const void*, size_t) noexcept;
};

std::vector<Impl> implementations() {
  std::vector<Impl> impls = {{"portable", &internal::extend_portable}};
  if (internal::hardware_available()) impls.push_back({"sse42", &internal::extend_sse42});
  return impls;
}

uint32_t crc_of(const Impl& impl, const std::string& s) { return impl.fn(0, s.data(), s.size()); }

TEST(Crc32c, KnownVectorsMatchForEveryImplementation) {
  for (const Impl& impl : implementations()) {
    SCOPED_TRACE(impl.name);
    EXPECT_EQ(crc_of(impl, ""), 0x00000000u);
    EXPECT_EQ(crc_of(impl, "123456789"), 0xE3069283u);
    EXPECT_EQ(crc_of(impl, std::string(32, '\0')), 0x8A9136AAu);
    EXPECT_EQ(crc_of(impl, std::string(32, '\xff')), 0x62A8AB43u);
    EXPECT_EQ(crc_of(impl, std::string(8, '\0')), 0x8C28B28Au);
    std::string ascending(32, '\0'), descending(32, '\0');
    for (int i = 0; i < 32; ++i) {
      ascending[i] = static_cast<char>(i);
      descending[i] = static_cast<char>(31 - i);
    }
    EXPECT_EQ(crc_of(impl, ascending), 0x46DD794Eu);
    EXPECT_EQ(crc_of(impl, descending), 0x113FDB5Cu);
    EXPECT_EQ(crc_of(impl, "a"), 0xC1D04330u);
  }
}

TEST(Crc32c, ThisX86MachineSelectsTheHardwarePath) {
#if defined(__x86_64__)
  // Every x86-64 CPU this project runs on has SSE4.2; if this fails the fast
  // path silently went missing.
  EXPECT_TRUE(internal::hardware_available());
#else
  EXPECT_FALSE(internal::hardware_available());
#endif
}

TEST(Crc32c, ImplementationsAgreeOnRandomBuffersAtEveryAlignmentAndLength) {
  std::mt19937 rng(42);
  std::vector<uint8_t> buf(4096 + 16);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  const auto impls = implementations();
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t len : {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4096}) {
      const uint32_t expected = internal::extend_portable(0, buf.data() + offset, len);
      for (const Impl& impl : impls) {
        EXPECT_EQ(impl.fn(0, buf.data() + offset, len), expected)
            << impl.name << " offset " << offset << " len " << len;
      }
      EXPECT_EQ(value(buf.data() + offset, len), expected);
    }
  }
}

TEST(Crc32c, ExtendEqualsTheCrcOfTheConcatenation) {
  const std::string a = "hello, ", b = "world and more bytes to cross an 8-byte word";
  for (const Impl& impl : implementations()) {
    SCOPED_TRACE(impl.name);
    EXPECT_EQ(impl.fn(impl.fn(0, a.data(), a.size()), b.data(), b.size()), crc_of(impl, a + b));
  }
  EXPECT_EQ(extend(value(a), b), value(a + b));
  EXPECT_EQ(extend(0, "123456789"), 0xE3069283u);
}

TEST(Crc32c, MaskMatchesTheTFRecordFixturesAndUnmaskInvertsIt) {
  // From the TFRecord spec: the empty record's length CRC and data CRC.
  EXPECT_EQ(mask(value(std::string(8, '\0'))), 0x07980329u);
  EXPECT_EQ(mask(0), 0xA282EAD8u);
  EXPECT_NE(mask(0xE3069283u), 0xE3069283u);
  for (uint32_t c : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu, 0x80000000u}) EXPECT_EQ(unmask(mask(c)), c);
  static_assert(unmask(mask(12345u)) == 12345u);
}

}  // namespace
}  // namespace strata::crc32c
