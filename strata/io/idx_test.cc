#include "strata/io/idx.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "strata/base/errors.h"
#include "strata/io/internal/test_util.h"
#include "strata/testing/files.h"

namespace strata::io {
namespace {

using testing::from_hex;

// A 2x3 uint8 IDX file.
const std::string kIdx = from_hex("00 00 08 02 | 00 00 00 02 | 00 00 00 03 | 01 02 03 04 05 06");

TEST(Idx, ParsesDimsAndBytes) {
  const IdxArray a = parse_idx(kIdx);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.data, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
}

TEST(Idx, ReadsPlainAndGzippedFilesAlike) {
  testing::TempDir dir;
  testing::write_file(dir.file("a.idx"), kIdx);
  testing::write_file(dir.file("a.idx.gz"), internal::deflate_bytes(kIdx, 31));
  EXPECT_EQ(read_idx(dir.file("a.idx")).data, read_idx(dir.file("a.idx.gz")).data);
  EXPECT_EQ(read_idx(dir.file("a.idx.gz")).dims, (std::vector<int64_t>{2, 3}));
  EXPECT_THROW(read_idx(dir.file("missing")), NotFoundError);
}

TEST(Idx, RankZeroHoldsOneValue) {
  EXPECT_EQ(parse_idx(from_hex("00 00 08 00 2a")).data, std::vector<uint8_t>{42});
}

TEST(Idx, BadMagicTypeOrSizeIsDataLoss) {
  EXPECT_THROW(parse_idx(from_hex("01 00 08 01 00 00 00 01 07")), DataLossError);
  EXPECT_THROW(parse_idx(from_hex("00 00 07 01 00 00 00 01 07")), DataLossError);
  EXPECT_THROW(parse_idx(from_hex("00 00 0d 01 00 00 00 01 07 07 07 07")), UnimplementedError);
  EXPECT_THROW(parse_idx(kIdx.substr(0, kIdx.size() - 1)), DataLossError);  // short body
  EXPECT_THROW(parse_idx(kIdx + "x"), DataLossError);                       // trailing byte
  EXPECT_THROW(parse_idx(from_hex("00 00 08 03 ff ff ff ff ff ff ff ff ff ff ff ff")),
               DataLossError);
  for (size_t cut = 0; cut < 12; ++cut)
    EXPECT_THROW(parse_idx(kIdx.substr(0, cut)), DataLossError) << cut;
}

TEST(Idx, TruncatedGzipIsDataLoss) {
  const std::string gz = internal::deflate_bytes(kIdx, 31);
  EXPECT_THROW(parse_idx(gz.substr(0, gz.size() - 5)), DataLossError);
}

TEST(Idx, ErrorsNameTheFile) {
  try {
    parse_idx(kIdx + "x", "labels.idx");
    FAIL();
  } catch (const DataLossError& e) {
    EXPECT_NE(std::string(e.what()).find("labels.idx"), std::string::npos);
  }
}

#ifdef STRATA_FASHION_MNIST_LABELS
// Registered only where Debian's Fashion-MNIST package is installed (checked at configure time).
TEST(Idx, ReadsTheRealFashionMnistTestLabels) {
  const IdxArray labels = read_idx(STRATA_FASHION_MNIST_LABELS);
  EXPECT_EQ(labels.dims, std::vector<int64_t>{10000});
  ASSERT_EQ(labels.data.size(), 10000u);
  EXPECT_TRUE(
      std::all_of(labels.data.begin(), labels.data.end(), [](uint8_t v) { return v < 10; }));
  EXPECT_EQ(labels.data[0], 9);  // the first test image is an ankle boot
}
#endif

}  // namespace
}  // namespace strata::io
