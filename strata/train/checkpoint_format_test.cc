// The checkpoint file format (docs/formats/checkpoint.md) at the byte level:
// its layout, and that no damaged file restores anything.

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "strata/base/coding.h"
#include "strata/base/crc32c.h"
#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/testing/expect_error.h"
#include "strata/train/checkpoint.h"
#include "strata/train/checkpoint_reader.h"

namespace strata::train {
namespace {

using testing::expect_error;

TEST(CheckpointFormatTest, ASmallCheckpointHasTheDocumentedLayout) {
  TempDir dir("ckpt_format");
  Variable x(constant(1.5f));
  const std::string path = Checkpoint({{"x", x}}).write(dir.file("c"));
  const std::string b = read_file(path);
  // Worked out from the format document:
  //   header 16; data 4 (one float32);
  //   index 4 + (4 + 28 key) + 4 dtype + 4 rank + 8 offset + 8 length + 4 crc = 64;
  //   graph 4 + root (4 + (4 + 1 + 4) + 4 + 4 = 21) + x (4 + 4 + (4 + 14) + (4 + 28) + 4 = 62) =
  //   87; footer 48.
  ASSERT_EQ(b.size(), 16u + 4 + 64 + 87 + 48);
  EXPECT_EQ(b.substr(0, 8), std::string("\x89STC\r\n\x1a\n", 8));
  EXPECT_EQ(coding::decode_fixed32(b.data() + 8), 1u);            // version
  EXPECT_EQ(coding::decode_fixed32(b.data() + 16), 0x3fc00000u);  // 1.5f, little-endian
  const size_t f = b.size() - 48;
  EXPECT_EQ(coding::decode_fixed64(b.data() + f), 20u);       // index offset
  EXPECT_EQ(coding::decode_fixed64(b.data() + f + 8), 64u);   // index length
  EXPECT_EQ(coding::decode_fixed64(b.data() + f + 16), 87u);  // graph length
  EXPECT_EQ(b.substr(f + 40), b.substr(0, 8));                // closing magic
  EXPECT_EQ(b.substr(20 + 8, 28), "x/.ATTRIBUTES/VARIABLE_VALUE");
}

// A checkpoint of a few dtypes and a nested object, and a restore into fresh
// objects that must either succeed completely or change nothing.
class DamagedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Variable a(constant(std::vector<float>{1.f, 2.f, 3.f}, {3}), {.name = "a"});
    Variable n(constant(int64_t{7}), {.name = "n"});
    Variable inner_v(constant(std::vector<int32_t>{4, 5}, {2}), {.name = "v"});
    Checkpoint ckpt({{"a", a}, {"n", n}, {"inner", Checkpoint({{"v", inner_v}})}});
    ckpt.save(dir_.file("ckpt"));  // with a save_counter, as usual
    good_ = read_file(dir_.file("ckpt-1"));
  }
  // Writes `bytes` as the checkpoint and restores it into fresh variables;
  // returns the error code (OK when it restored) and checks that a failed
  // restore left every variable at its initial value.
  ErrorCode restore(const std::string& bytes, std::string* message) {
    // A plain write: thousands of these, and none needs to survive a crash.
    std::ofstream(dir_.file("damaged"), std::ios::binary | std::ios::trunc) << bytes;
    Variable a(constant(std::vector<float>{0.f, 0.f, 0.f}, {3}));
    Variable n(constant(int64_t{0}));
    Variable inner_v(constant(std::vector<int32_t>{0, 0}, {2}));
    Checkpoint ckpt({{"a", a}, {"n", n}, {"inner", Checkpoint({{"v", inner_v}})}});
    try {
      ckpt.restore(dir_.file("damaged")).expect_partial();
      return ErrorCode::OK;
    } catch (const Error& e) {
      *message = e.what();
      EXPECT_EQ(a.value().to_vector<float>(), (std::vector<float>{0.f, 0.f, 0.f}));
      EXPECT_EQ(n.value().item<int64_t>(), 0);
      EXPECT_EQ(inner_v.value().to_vector<int32_t>(), (std::vector<int32_t>{0, 0}));
      EXPECT_EQ(ckpt.save_counter().value().item<int64_t>(), 0);
      return e.code();
    }
  }
  TempDir dir_{"ckpt_format"};
  std::string good_;
};

TEST_F(DamagedFileTest, TheUndamagedFileRestores) {
  std::string message;
  EXPECT_EQ(restore(good_, &message), ErrorCode::OK) << message;
}

// Every byte is covered by a check (magic, a CRC, or a field the CRC covers),
// so flipping any bit of any byte is a DataLossError and nothing is assigned.
TEST_F(DamagedFileTest, FlippingAnyBitOfAnyByteIsDataLoss) {
  for (size_t i = 0; i < good_.size(); ++i) {
    for (int bit : {0, 7}) {
      std::string bad = good_;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      std::string message;
      ASSERT_EQ(restore(bad, &message), ErrorCode::DATA_LOSS)
          << "byte " << i << " bit " << bit << ": " << message;
      EXPECT_NE(message.find(dir_.file("damaged")), std::string::npos) << message;
    }
  }
}

TEST_F(DamagedFileTest, TruncationAtEveryLengthIsDataLoss) {
  for (size_t n = 0; n < good_.size(); ++n) {
    std::string message;
    ASSERT_EQ(restore(good_.substr(0, n), &message), ErrorCode::DATA_LOSS) << "length " << n;
  }
  std::string message;
  EXPECT_EQ(restore(good_ + "x", &message), ErrorCode::DATA_LOSS);
}

TEST_F(DamagedFileTest, ADamagedTensorIsNamedInTheError) {
  // The data section starts at byte 16 with the first tensor in key order of
  // the graph walk: "a" (three floats).
  std::string bad = good_;
  bad[17] = static_cast<char>(bad[17] ^ 0x10);
  std::string message;
  EXPECT_EQ(restore(bad, &message), ErrorCode::DATA_LOSS);
  EXPECT_NE(message.find("tensor 'a/.ATTRIBUTES/VARIABLE_VALUE'"), std::string::npos) << message;
  EXPECT_NE(message.find("CRC-32C"), std::string::npos) << message;
  expect_error([&] { load_checkpoint(dir_.file("damaged")); }, ErrorCode::DATA_LOSS,
               {dir_.file("damaged"), "a/.ATTRIBUTES/VARIABLE_VALUE"});
}

TEST_F(DamagedFileTest, ANewerVersionIsUnimplementedNotDataLoss) {
  // A consistent file (CRCs recomputed) of format version 2.
  std::string newer = good_;
  coding::encode_fixed32(newer.data() + 8, 2);
  const size_t f = newer.size() - 48;
  // The footer CRC covers the header, so the writer of version 2 would have
  // computed it anew; this reader must refuse the version, not call it damage.
  const std::string covered = newer.substr(0, 16) + newer.substr(f, 36);
  coding::encode_fixed32(newer.data() + f + 36, crc32c::mask(crc32c::value(covered)));
  std::string message;
  EXPECT_EQ(restore(newer, &message), ErrorCode::UNIMPLEMENTED) << message;
  EXPECT_NE(message.find("version 2"), std::string::npos) << message;
}

}  // namespace
}  // namespace strata::train
