#include "strata/io/tfrecord.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "strata/base/crc32c.h"
#include "strata/base/errors.h"
#include "strata/io/internal/stream.h"
#include "strata/io/internal/test_util.h"
#include "strata/testing/files.h"

namespace strata::io {
namespace {

using testing::from_hex;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

const std::string kEmptyRecord = from_hex("00 00 00 00 00 00 00 00 | 29 03 98 07 | d8 ea 82 a2");
const std::string kHelloRecord =
    from_hex("05 00 00 00 00 00 00 00 | ea b2 04 3e | 68 65 6c 6c 6f | bb 1f 1c 19");

std::vector<std::string> read_all(TFRecordReader& r) {
  std::vector<std::string> out;
  while (auto rec = r.read_next()) out.push_back(*rec);
  return out;
}

std::string error_of(TFRecordReader& r) {
  try {
    while (r.read_next()) {
    }
  } catch (const DataLossError& e) {
    return e.what();
  }
  return "";
}

TEST(TFRecordFraming, EmptyAndHelloRecordsMatchTheSpecBytes) {
  EXPECT_EQ(tfrecord_frame(""), kEmptyRecord);
  EXPECT_EQ(tfrecord_frame("hello"), kHelloRecord);
}

TEST(TFRecordWriter, WritesTheSpecBytesToDisk) {
  TempDir dir;
  const std::string path = dir.file("a.tfrecord");
  TFRecordWriter w(path);
  w.write("");
  w.write("hello");
  w.close();
  EXPECT_EQ(read_file(path), kEmptyRecord + kHelloRecord);
}

TEST(TFRecordReader, ReadsTheSpecFixtures) {
  auto r = TFRecordReader::from_bytes(kEmptyRecord + kHelloRecord);
  EXPECT_EQ(r.offset(), 0u);
  EXPECT_EQ(r.read_next(), std::optional<std::string>(""));
  EXPECT_EQ(r.offset(), 16u);
  EXPECT_EQ(r.read_next(), std::optional<std::string>("hello"));
  EXPECT_EQ(r.offset(), 37u);
  EXPECT_EQ(r.read_next(), std::nullopt);
  EXPECT_EQ(r.read_next(), std::nullopt);
}

TEST(TFRecordReader, EmptyFileHasNoRecords) {
  auto r = TFRecordReader::from_bytes("");
  EXPECT_EQ(r.read_next(), std::nullopt);
}

class TFRecordRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(TFRecordRoundTrip, WriterOutputReadsBackRecordForRecord) {
  TempDir dir;
  const std::string path = dir.file("r.tfrecord");
  std::vector<std::string> records = {"", "a", "hello", std::string(100000, 'x'),
                                      std::string(3, '\0')};
  // Records larger than the reader's 256 KiB buffer and its 1 MiB growth step.
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  records.push_back(big);
  for (int i = 0; i < 500; ++i)
    records.push_back(std::string(static_cast<size_t>(i), static_cast<char>(i)));
  {
    TFRecordWriter w(path, {.compression_type = GetParam()});
    for (size_t i = 0; i < records.size(); ++i) {
      w.write(records[i]);
      if (i % 100 == 0) w.flush();  // a sync flush mid-stream must not change what reads back
    }
    w.close();
  }
  TFRecordReader r(path, {.compression_type = GetParam()});
  EXPECT_EQ(read_all(r), records);
}

TEST_P(TFRecordRoundTrip, SeekReturnsToARecordStartForwardAndBackward) {
  TempDir dir;
  const std::string path = dir.file("s.tfrecord");
  {
    TFRecordWriter w(path, {.compression_type = GetParam()});
    for (int i = 0; i < 10; ++i) w.write("record " + std::to_string(i));
  }
  TFRecordReader r(path, {.compression_type = GetParam()});
  std::vector<uint64_t> offsets;
  for (int i = 0; i < 10; ++i) {
    offsets.push_back(r.offset());
    ASSERT_TRUE(r.read_next());
  }
  r.seek(offsets[3]);
  EXPECT_EQ(r.read_next(), std::optional<std::string>("record 3"));
  r.seek(offsets[8]);
  EXPECT_EQ(r.read_next(), std::optional<std::string>("record 8"));
  r.seek(offsets[0]);
  EXPECT_EQ(r.read_next(), std::optional<std::string>("record 0"));
}

INSTANTIATE_TEST_SUITE_P(Compression, TFRecordRoundTrip, ::testing::Values("", "ZLIB", "GZIP"),
                         [](const auto& param_info) {
                           return param_info.param.empty() ? std::string("NONE") : param_info.param;
                         });

TEST(TFRecordCompression, GzipAndZlibFilesAreStandardContainers) {
  TempDir dir;
  for (auto [type, bits] : {std::pair{"ZLIB", 15}, std::pair{"GZIP", 31}}) {
    const std::string path = dir.file(std::string("c.") + type);
    TFRecordWriter w(path, {.compression_type = type});
    w.write("hello");
    w.close();
    const std::string bytes = read_file(path);
    if (std::string(type) == "GZIP") {
      ASSERT_GE(bytes.size(), 2u);
      EXPECT_EQ(bytes.substr(0, 2), from_hex("1f 8b"));
    }
    EXPECT_EQ(internal::inflate_bytes(bytes, bits), kHelloRecord) << type;
  }
}

TEST(TFRecordCompression, ReadsStreamsCompressedByZlibItself) {
  const std::string plain = kHelloRecord + kEmptyRecord;
  auto z =
      TFRecordReader::from_bytes(internal::deflate_bytes(plain, 15), {.compression_type = "ZLIB"});
  EXPECT_EQ(read_all(z), (std::vector<std::string>{"hello", ""}));
  auto g =
      TFRecordReader::from_bytes(internal::deflate_bytes(plain, 31), {.compression_type = "GZIP"});
  EXPECT_EQ(read_all(g), (std::vector<std::string>{"hello", ""}));
}

TEST(TFRecordCompression, ConcatenatedGzipMembersReadAsOneStream) {
  const std::string bytes =
      internal::deflate_bytes(kHelloRecord, 31) + internal::deflate_bytes(kEmptyRecord, 31);
  auto r = TFRecordReader::from_bytes(bytes, {.compression_type = "GZIP"});
  EXPECT_EQ(read_all(r), (std::vector<std::string>{"hello", ""}));
}

TEST(TFRecordCompression, TruncatedCompressedStreamIsDataLoss) {
  const std::string full = internal::deflate_bytes(kHelloRecord + kHelloRecord, 31);
  for (size_t cut = 1; cut < full.size(); ++cut) {
    auto r =
        TFRecordReader::from_bytes(full.substr(0, cut), {.compression_type = "GZIP"}, "cut.gz");
    EXPECT_THROW(read_all(r), DataLossError) << "cut at " << cut;
  }
}

TEST(TFRecordCompression, CorruptCompressedBytesAreDataLossNotACrash) {
  std::string bytes = internal::deflate_bytes(kHelloRecord + std::string(200, 'z'), 15);
  bytes[bytes.size() / 2] ^= 0x55;
  auto r = TFRecordReader::from_bytes(bytes, {.compression_type = "ZLIB"});
  EXPECT_THROW(read_all(r), DataLossError);
}

TEST(TFRecordOptions, UnknownCompressionTypeIsInvalidArgument) {
  TempDir dir;
  EXPECT_THROW(TFRecordWriter(dir.file("x"), {.compression_type = "gzip"}), InvalidArgumentError);
  EXPECT_THROW(TFRecordReader::from_bytes("", {.compression_type = "LZ4"}), InvalidArgumentError);
  EXPECT_THROW(TFRecordReader::from_bytes("", {.compression_type = "SNAPPY"}), UnimplementedError);
  EXPECT_FALSE(std::filesystem::exists(dir.file("x")));
}

TEST(TFRecordOptions, CompressionLevelOutOfRangeIsInvalidArgument) {
  TempDir dir;
  EXPECT_THROW(TFRecordWriter(dir.file("x"), {.compression_type = "ZLIB", .compression_level = 10}),
               InvalidArgumentError);
}

TEST(TFRecordCorruption, FlippedLengthChecksumBitIsDataLossNamingFileOffsetAndCheck) {
  for (int bit = 0; bit < 32; ++bit) {
    std::string bytes = kEmptyRecord + kHelloRecord;
    bytes[16 + 8 + bit / 8] ^= static_cast<char>(1 << (bit % 8));
    auto r = TFRecordReader::from_bytes(bytes, {}, "bad.tfrecord");
    ASSERT_EQ(r.read_next(), std::optional<std::string>(""));
    const std::string msg = error_of(r);
    EXPECT_NE(msg.find("bad.tfrecord"), std::string::npos) << msg;
    EXPECT_NE(msg.find("corrupted record at offset 16"), std::string::npos) << msg;
    EXPECT_NE(msg.find("length checksum"), std::string::npos) << msg;
  }
}

TEST(TFRecordCorruption, FlippedLengthBitIsCaughtByTheLengthChecksum) {
  std::string bytes = kHelloRecord;
  bytes[0] ^= 0x02;  // length 7
  auto r = TFRecordReader::from_bytes(bytes);
  EXPECT_NE(error_of(r).find("length checksum"), std::string::npos);
}

TEST(TFRecordCorruption, FlippedDataOrDataChecksumBitIsDataLoss) {
  for (size_t byte = 12; byte < kHelloRecord.size(); ++byte) {
    std::string bytes = kHelloRecord;
    bytes[byte] ^= 0x10;
    auto r = TFRecordReader::from_bytes(bytes, {}, "f");
    const std::string msg = error_of(r);
    EXPECT_NE(msg.find("corrupted record at offset 0: data checksum mismatch"), std::string::npos)
        << byte << ": " << msg;
  }
}

TEST(TFRecordCorruption, TruncationAtEveryByteIsDataLossExceptAtRecordBoundaries) {
  const std::string full = kHelloRecord + kEmptyRecord + kHelloRecord;
  const std::vector<size_t> boundaries = {0, 21, 37, 58};
  for (size_t cut = 0; cut <= full.size(); ++cut) {
    auto r = TFRecordReader::from_bytes(full.substr(0, cut), {}, "t.tfrecord");
    const bool boundary = std::find(boundaries.begin(), boundaries.end(), cut) != boundaries.end();
    if (boundary) {
      EXPECT_NO_THROW(read_all(r)) << cut;
    } else {
      const std::string msg = error_of(r);
      EXPECT_NE(msg.find("truncated record at offset"), std::string::npos) << cut << ": " << msg;
      EXPECT_NE(msg.find("t.tfrecord"), std::string::npos) << msg;
    }
  }
}

TEST(TFRecordCorruption, TruncatedFileOnDiskIsDataLoss) {
  TempDir dir;
  const std::string path = dir.file("trunc.tfrecord");
  write_file(path, (kHelloRecord + kHelloRecord).substr(0, 30));
  TFRecordReader r(path);
  EXPECT_EQ(r.read_next(), std::optional<std::string>("hello"));
  const std::string msg = error_of(r);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated record at offset 21"), std::string::npos) << msg;
}

TEST(TFRecordCorruption, AbsurdLengthWithAValidChecksumIsDataLossWithoutAllocating) {
  // Headers claiming 2^62 and 2^64-1 bytes, each with a correct length CRC.
  for (uint8_t top : {uint8_t{0x40}, uint8_t{0xff}}) {
    std::string header(8, top == 0xff ? '\xff' : '\0');
    header[7] = static_cast<char>(top);
    const uint32_t masked = crc32c::mask(crc32c::value(header));
    for (int i = 0; i < 4; ++i) header.push_back(static_cast<char>((masked >> (8 * i)) & 0xff));
    auto plain = TFRecordReader::from_bytes(header + "abc", {}, "huge");
    const std::string msg = error_of(plain);
    EXPECT_TRUE(msg.find("record size too large") != std::string::npos ||
                msg.find("truncated record at offset 0") != std::string::npos)
        << msg;
    // Through a compressed stream the size is unknown up front: still no huge allocation.
    auto z = TFRecordReader::from_bytes(internal::deflate_bytes(header + "abc", 15),
                                        {.compression_type = "ZLIB"}, "huge.z");
    EXPECT_THROW(read_all(z), DataLossError);
  }
}

// Peak resident memory of this process so far, in bytes (ctest runs each test in
// its own process, so it is this test's peak).
int64_t peak_rss_bytes() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return int64_t{usage.ru_maxrss} * 1024;
}

TEST(TFRecordCorruption, ACompressedBombClaimingAHugeRecordIsRefusedWithoutHoldingIt) {
  // 256 MiB of zeros behind a header claiming 1 TiB, gzipped to about 256 KiB:
  // the record cannot be there, and the reader must find that out without
  // holding what the file inflates to.
  testing::TempDir dir;
  const std::string path = dir.file("bomb.tfrecord.gz");
  {
    internal::OutputFile out(path, internal::Compression::GZIP, 9);
    std::string header(8, '\0');
    header[5] = 1;  // 2^40
    const uint32_t masked = crc32c::mask(crc32c::value(header));
    for (int i = 0; i < 4; ++i) header.push_back(static_cast<char>((masked >> (8 * i)) & 0xff));
    out.write(header);
    const std::string zeros(1 << 20, '\0');
    for (int i = 0; i < 256; ++i) out.write(zeros);
    out.commit();
  }
  ASSERT_LT(std::filesystem::file_size(path), 2u << 20);
  const int64_t before = peak_rss_bytes();
  TFRecordReader reader(path, {.compression_type = "GZIP"});
  try {
    reader.read_next();
    ADD_FAILURE() << "the bomb was read";
  } catch (const DataLossError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("truncated record at offset 0"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(peak_rss_bytes() - before, int64_t{32} << 20);
  EXPECT_EQ(reader.offset(), 0u);
}

TEST(TFRecordCompression, ARecordLongerThanTheLookAheadThresholdReadsBackWhole) {
  // 20 MiB (over the 16 MiB above which a compressed record is checked before it
  // is buffered), then a small record: both come back exactly.
  testing::TempDir dir;
  const std::string path = dir.file("big.tfrecord.gz");
  std::string big(20 << 20, '\0');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>(i / 4096);
  {
    TFRecordWriter w(path, {.compression_type = "GZIP"});
    w.write(big);
    w.write("tail");
    w.close();
  }
  TFRecordReader reader(path, {.compression_type = "GZIP"});
  const std::optional<std::string> first = reader.read_next();
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(*first == big);
  EXPECT_EQ(reader.read_next(), std::optional<std::string>("tail"));
  EXPECT_EQ(reader.read_next(), std::nullopt);
}

TEST(TFRecordCorruption, ReaderStaysAtTheBadRecordSoSeekingPastItRecovers) {
  std::string bytes = kHelloRecord + kHelloRecord + kEmptyRecord;
  bytes[21 + 14] ^= 1;  // corrupt the second record's payload
  auto r = TFRecordReader::from_bytes(bytes);
  ASSERT_TRUE(r.read_next());
  EXPECT_THROW(r.read_next(), DataLossError);
  EXPECT_EQ(r.offset(), 21u);
  r.seek(42);
  EXPECT_EQ(r.read_next(), std::optional<std::string>(""));
}

TEST(TFRecordReader, MissingFileIsNotFound) {
  TempDir dir;
  EXPECT_THROW(TFRecordReader(dir.file("nope")), NotFoundError);
}

TEST(TFRecordWriter, FileAppearsOnlyAtCloseAndNoTemporaryIsLeft) {
  TempDir dir;
  const std::string path = dir.file("atomic.tfrecord");
  TFRecordWriter w(path);
  w.write("hello");
  w.flush();
  EXPECT_FALSE(std::filesystem::exists(path));
  w.close();
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
  EXPECT_THROW(w.write("more"), FailedPreconditionError);
  EXPECT_THROW(w.close(), FailedPreconditionError);
}

TEST(TFRecordWriter, DestructorWithoutCloseCommitsTheFile) {
  TempDir dir;
  const std::string path = dir.file("d.tfrecord");
  { TFRecordWriter(path).write("hello"); }
  EXPECT_EQ(read_file(path), kHelloRecord);
}

TEST(TFRecordWriter, DestructionDuringAnExceptionDiscardsTheFile) {
  TempDir dir;
  const std::string path = dir.file("e.tfrecord");
  try {
    TFRecordWriter w(path);
    w.write("hello");
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 0);
}

TEST(TFRecordWriter, ReplacesAnExistingFileWhole) {
  TempDir dir;
  const std::string path = dir.file("r.tfrecord");
  write_file(path, "old contents");
  TFRecordWriter w(path);
  w.write("");
  w.close();
  EXPECT_EQ(read_file(path), kEmptyRecord);
}

TEST(TFRecordWriter, MissingDirectoryIsNotFound) {
  TempDir dir;
  EXPECT_THROW(TFRecordWriter(dir.file("no/such/dir.tfrecord")), NotFoundError);
}

}  // namespace
}  // namespace strata::io
