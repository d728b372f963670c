#include "strata/io/text_line.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/base/errors.h"
#include "strata/io/internal/test_util.h"
#include "strata/testing/files.h"

namespace strata::io {
namespace {

std::vector<std::string> lines_of(TextLineReader r) {
  std::vector<std::string> out;
  while (auto l = r.read_next()) out.push_back(*l);
  return out;
}

using V = std::vector<std::string>;

TEST(TextLineReader, SplitsOnNewlineAndDropsACarriageReturnBeforeIt) {
  EXPECT_EQ(lines_of(TextLineReader::from_bytes("a\nbb\r\n\nlast")), (V{"a", "bb", "", "last"}));
  EXPECT_EQ(lines_of(TextLineReader::from_bytes("a\n")), (V{"a"}));
  EXPECT_EQ(lines_of(TextLineReader::from_bytes("\n")), (V{""}));
  EXPECT_EQ(lines_of(TextLineReader::from_bytes("")), V{});
  EXPECT_EQ(lines_of(TextLineReader::from_bytes("x\r")), (V{"x\r"}));
  EXPECT_EQ(lines_of(TextLineReader::from_bytes("in\rside\n")), (V{"in\rside"}));
}

TEST(TextLineReader, LongLinesCrossTheBufferBoundary) {
  const std::string big(700000, 'q');
  EXPECT_EQ(lines_of(TextLineReader::from_bytes(big + "\n" + big)), (V{big, big}));
}

TEST(TextLineReader, ReadsCompressedFilesAndFilesOnDisk) {
  testing::TempDir dir;
  const std::string text = "one\ntwo\r\nthree";
  testing::write_file(dir.file("t.txt"), text);
  testing::write_file(dir.file("t.gz"), internal::deflate_bytes(text, 31));
  testing::write_file(dir.file("t.z"), internal::deflate_bytes(text, 15));
  EXPECT_EQ(lines_of(TextLineReader(dir.file("t.txt"))), (V{"one", "two", "three"}));
  EXPECT_EQ(lines_of(TextLineReader(dir.file("t.gz"), "GZIP")), (V{"one", "two", "three"}));
  EXPECT_EQ(lines_of(TextLineReader(dir.file("t.z"), "ZLIB")), (V{"one", "two", "three"}));
  EXPECT_THROW(TextLineReader(dir.file("missing")), NotFoundError);
  EXPECT_THROW(TextLineReader(dir.file("t.txt"), "BZIP2"), InvalidArgumentError);
}

std::vector<std::string> records_of(FixedLengthRecordReader r) {
  std::vector<std::string> out;
  while (auto rec = r.read_next()) out.push_back(*rec);
  return out;
}

TEST(FixedLengthRecordReader, SkipsHeaderAndFooter) {
  auto r = FixedLengthRecordReader::from_bytes(
      "HHaaabbbcccFF", {.header_bytes = 2, .record_bytes = 3, .footer_bytes = 2});
  EXPECT_EQ(records_of(std::move(r)), (V{"aaa", "bbb", "ccc"}));
  EXPECT_EQ(records_of(FixedLengthRecordReader::from_bytes("abcd", {.record_bytes = 2})),
            (V{"ab", "cd"}));
  EXPECT_EQ(records_of(FixedLengthRecordReader::from_bytes(
                "HF", {.header_bytes = 1, .record_bytes = 4, .footer_bytes = 1})),
            V{});
}

TEST(FixedLengthRecordReader, TruncatedLastRecordIsDataLossNamingTheOffset) {
  auto r = FixedLengthRecordReader::from_bytes(
      "HaaabbF", {.header_bytes = 1, .record_bytes = 3, .footer_bytes = 1}, "f.bin");
  EXPECT_EQ(r.read_next(), std::optional<std::string>("aaa"));
  try {
    r.read_next();
    FAIL();
  } catch (const DataLossError& e) {
    EXPECT_NE(std::string(e.what()).find("f.bin: truncated record at offset 4"), std::string::npos)
        << e.what();
  }
}

TEST(FixedLengthRecordReader, FileShorterThanHeaderPlusFooterIsDataLoss) {
  auto r = FixedLengthRecordReader::from_bytes(
      "abc", {.header_bytes = 2, .record_bytes = 1, .footer_bytes = 2});
  EXPECT_THROW(r.read_next(), DataLossError);
}

TEST(FixedLengthRecordReader, ReadsGzippedFiles) {
  const std::string body = "HHaaabbbFF";
  auto r = FixedLengthRecordReader::from_bytes(
      internal::deflate_bytes(body, 31),
      {.header_bytes = 2, .record_bytes = 3, .footer_bytes = 2, .compression_type = "GZIP"});
  EXPECT_EQ(records_of(std::move(r)), (V{"aaa", "bbb"}));
}

TEST(FixedLengthRecordReader, InvalidOptionsAreInvalidArgument) {
  EXPECT_THROW(FixedLengthRecordReader::from_bytes("", {.record_bytes = 0}), InvalidArgumentError);
  EXPECT_THROW(FixedLengthRecordReader::from_bytes("", {.header_bytes = -1, .record_bytes = 1}),
               InvalidArgumentError);
}

}  // namespace
}  // namespace strata::io
