#include "strata/io/tfrecord.h"

#include <cstdio>
#include <exception>
#include <limits>

#include "strata/base/coding.h"
#include "strata/base/crc32c.h"
#include "strata/base/errors.h"
#include "strata/io/internal/stream.h"

namespace strata::io {
namespace {

std::string hex32(uint32_t v) {
  char s[11];
  std::snprintf(s, sizeof s, "0x%08x", v);
  return s;
}

// Records of compressed files longer than this are checked to exist before they
// are buffered (RecordReader::read_next). Below it, the buffer grows with the
// bytes actually read, so it never exceeds twice the record.
constexpr uint64_t kLookAheadAbove = uint64_t{16} << 20;

// Lengths beyond this cannot be held in memory; TF calls them "record size too large".
constexpr uint64_t kMaxRecordLength =
    std::numeric_limits<uint64_t>::max() / 2 - kTFRecordHeaderBytes - kTFRecordFooterBytes;

}  // namespace

std::string tfrecord_frame(std::string_view payload) {
  std::string out(kTFRecordHeaderBytes + payload.size() + kTFRecordFooterBytes, '\0');
  coding::encode_fixed64(out.data(), payload.size());
  coding::encode_fixed32(out.data() + 8, crc32c::mask(crc32c::value(out.data(), 8)));
  out.replace(kTFRecordHeaderBytes, payload.size(), payload);
  coding::encode_fixed32(out.data() + kTFRecordHeaderBytes + payload.size(),
                         crc32c::mask(crc32c::value(payload)));
  return out;
}

// ---------------------------------------------------------------------------
// Writer

TFRecordWriter::TFRecordWriter(std::string path, const TFRecordOptions& options)
    : path_(std::move(path)), uncaught_at_construction_(std::uncaught_exceptions()) {
  const auto compression = internal::parse_compression(options.compression_type, "TFRecordWriter");
  file_ = std::make_unique<internal::OutputFile>(path_, compression, options.compression_level);
}

TFRecordWriter::~TFRecordWriter() {
  if (!file_ || !file_->open()) return;
  if (std::uncaught_exceptions() > uncaught_at_construction_) {
    file_->abandon();  // unwinding: the records written so far are not a finished file
    return;
  }
  try {
    file_->commit();
  } catch (...) {
    // Destructors never throw; close() is the way to see this error.
  }
}

TFRecordWriter::TFRecordWriter(TFRecordWriter&&) noexcept = default;
TFRecordWriter& TFRecordWriter::operator=(TFRecordWriter&& other) noexcept {
  if (this != &other) {
    if (file_) file_->abandon();
    path_ = std::move(other.path_);
    file_ = std::move(other.file_);
    uncaught_at_construction_ = other.uncaught_at_construction_;
  }
  return *this;
}

void TFRecordWriter::write(std::string_view record) {
  STRATA_CHECK(FAILED_PRECONDITION, file_ && file_->open(), "TFRecordWriter(", path_,
               "): write after close()");
  char header[kTFRecordHeaderBytes];
  coding::encode_fixed64(header, record.size());
  coding::encode_fixed32(header + 8, crc32c::mask(crc32c::value(header, 8)));
  char footer[kTFRecordFooterBytes];
  coding::encode_fixed32(footer, crc32c::mask(crc32c::value(record)));
  file_->write(std::string_view(header, sizeof header));
  file_->write(record);
  file_->write(std::string_view(footer, sizeof footer));
}

void TFRecordWriter::flush() {
  STRATA_CHECK(FAILED_PRECONDITION, file_ && file_->open(), "TFRecordWriter(", path_,
               "): flush after close()");
  file_->flush();
}

void TFRecordWriter::close() {
  STRATA_CHECK(FAILED_PRECONDITION, file_ && file_->open(), "TFRecordWriter(", path_,
               "): close() called twice");
  file_->commit();
}

// ---------------------------------------------------------------------------
// Reader

TFRecordReader::TFRecordReader(std::unique_ptr<internal::InputStream> in) : in_(std::move(in)) {}

TFRecordReader::TFRecordReader(const std::string& path, const TFRecordOptions& options)
    : in_(internal::InputStream::open_file(
          path, internal::parse_compression(options.compression_type, "TFRecordReader"))) {}

TFRecordReader TFRecordReader::from_bytes(std::string bytes, const TFRecordOptions& options,
                                          std::string name) {
  return TFRecordReader(internal::InputStream::from_bytes(
      std::move(bytes), internal::parse_compression(options.compression_type, "TFRecordReader"),
      std::move(name)));
}

TFRecordReader::~TFRecordReader() = default;
TFRecordReader::TFRecordReader(TFRecordReader&&) noexcept = default;
TFRecordReader& TFRecordReader::operator=(TFRecordReader&&) noexcept = default;

uint64_t TFRecordReader::offset() const { return in_->offset(); }
void TFRecordReader::seek(uint64_t offset) { in_->seek(offset); }
const std::string& TFRecordReader::name() const { return in_->name(); }

std::optional<std::string> TFRecordReader::read_next() {
  const uint64_t start = in_->offset();
  auto fail = [&](const std::string& what) -> std::optional<std::string> {
    in_->seek(start);
    throw DataLossError(str_cat(in_->name(), ": ", what));
  };
  char header[kTFRecordHeaderBytes];
  size_t got;
  try {
    got = in_->read(header, sizeof header);
  } catch (const DataLossError&) {
    in_->seek(start);
    throw;
  }
  if (got == 0) return std::nullopt;
  if (got < sizeof header) {
    return fail(str_cat("truncated record at offset ", start, ": header needs ", sizeof header,
                        " bytes, file has ", got));
  }
  const uint32_t stored_len_crc = crc32c::unmask(coding::decode_fixed32(header + 8));
  const uint32_t len_crc = crc32c::value(header, 8);
  if (stored_len_crc != len_crc) {
    return fail(str_cat("corrupted record at offset ", start, ": length checksum mismatch (stored ",
                        hex32(stored_len_crc), ", computed ", hex32(len_crc), ")"));
  }
  const uint64_t length = coding::decode_fixed64(header);
  if (length > kMaxRecordLength) {
    return fail(str_cat("record size too large at offset ", start, ": length ", length));
  }
  if (auto rest = in_->remaining(); rest && *rest < length + kTFRecordFooterBytes) {
    return fail(str_cat("truncated record at offset ", start, ": payload of ", length,
                        " bytes plus 4-byte checksum needs ", length + kTFRecordFooterBytes,
                        " bytes, file has ", *rest));
  }
  std::string data;
  char footer[kTFRecordFooterBytes];
  size_t footer_got = 0;
  try {
    // In a compressed file the bytes left are unknown: a small file can declare a
    // record of any length and inflate to gigabytes. Past a few MiB, the reader
    // first checks that the record's bytes exist (inflating ahead without keeping
    // them), then holds exactly the record, never more than the record.
    if (!in_->remaining() && length > kLookAheadAbove) {
      if (!in_->has_at_least(length + kTFRecordFooterBytes)) {
        in_->seek(start);
        return fail(str_cat("truncated record at offset ", start, ": payload of ", length,
                            " bytes plus 4-byte checksum is longer than the rest of the file"));
      }
      data.reserve(static_cast<size_t>(length));
    } else {
      data.reserve(static_cast<size_t>(std::min<uint64_t>(length, 1 << 20)));
    }
    const size_t data_got = in_->append(&data, static_cast<size_t>(length));
    if (data_got < length) {
      return fail(str_cat("truncated record at offset ", start, ": payload needs ", length,
                          " bytes, file has ", data_got));
    }
    footer_got = in_->read(footer, sizeof footer);
  } catch (const DataLossError&) {
    in_->seek(start);
    throw;
  }
  if (footer_got < sizeof footer) {
    return fail(str_cat("truncated record at offset ", start,
                        ": data checksum needs 4 bytes, file has ", footer_got));
  }
  const uint32_t stored_crc = crc32c::unmask(coding::decode_fixed32(footer));
  const uint32_t crc = crc32c::value(data);
  if (stored_crc != crc) {
    return fail(str_cat("corrupted record at offset ", start, ": data checksum mismatch (stored ",
                        hex32(stored_crc), ", computed ", hex32(crc), ")"));
  }
  return data;
}

}  // namespace strata::io
