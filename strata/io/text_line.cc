#include "strata/io/text_line.h"

#include "strata/base/errors.h"
#include "strata/io/internal/stream.h"

namespace strata::io {

TextLineReader::TextLineReader(std::unique_ptr<internal::InputStream> in) : in_(std::move(in)) {}

TextLineReader::TextLineReader(const std::string& path, const std::string& compression_type)
    : in_(internal::InputStream::open_file(
          path, internal::parse_compression(compression_type, "TextLineReader"))) {}

TextLineReader TextLineReader::from_bytes(std::string bytes, const std::string& compression_type,
                                          std::string name) {
  return TextLineReader(internal::InputStream::from_bytes(
      std::move(bytes), internal::parse_compression(compression_type, "TextLineReader"),
      std::move(name)));
}

TextLineReader::~TextLineReader() = default;
TextLineReader::TextLineReader(TextLineReader&&) noexcept = default;
TextLineReader& TextLineReader::operator=(TextLineReader&&) noexcept = default;

std::optional<std::string> TextLineReader::read_next() {
  std::string line;
  const uint64_t before = in_->offset();
  if (!in_->read_line(&line)) return std::nullopt;
  // TF drops a '\r' only when it precedes the '\n' (Windows line endings).
  const bool had_newline = in_->offset() - before > line.size();
  if (had_newline && !line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

// ---------------------------------------------------------------------------

namespace {
void check_options(const FixedLengthRecordOptions& o) {
  STRATA_CHECK_ARG(o.record_bytes > 0, "FixedLengthRecordOptions.record_bytes must be > 0, got ",
                   o.record_bytes);
  STRATA_CHECK_ARG(o.header_bytes >= 0, "FixedLengthRecordOptions.header_bytes must be >= 0, got ",
                   o.header_bytes);
  STRATA_CHECK_ARG(o.footer_bytes >= 0, "FixedLengthRecordOptions.footer_bytes must be >= 0, got ",
                   o.footer_bytes);
}
}  // namespace

FixedLengthRecordReader::FixedLengthRecordReader(std::unique_ptr<internal::InputStream> in,
                                                 FixedLengthRecordOptions options)
    : in_(std::move(in)), options_(std::move(options)) {}

FixedLengthRecordReader::FixedLengthRecordReader(const std::string& path,
                                                 FixedLengthRecordOptions options)
    : options_(std::move(options)) {
  check_options(options_);
  in_ = internal::InputStream::open_file(
      path, internal::parse_compression(options_.compression_type, "FixedLengthRecordReader"));
}

FixedLengthRecordReader FixedLengthRecordReader::from_bytes(std::string bytes,
                                                            FixedLengthRecordOptions options,
                                                            std::string name) {
  check_options(options);
  auto c = internal::parse_compression(options.compression_type, "FixedLengthRecordReader");
  return FixedLengthRecordReader(
      internal::InputStream::from_bytes(std::move(bytes), c, std::move(name)), std::move(options));
}

FixedLengthRecordReader::~FixedLengthRecordReader() = default;
FixedLengthRecordReader::FixedLengthRecordReader(FixedLengthRecordReader&&) noexcept = default;
FixedLengthRecordReader& FixedLengthRecordReader::operator=(FixedLengthRecordReader&&) noexcept =
    default;

std::optional<std::string> FixedLengthRecordReader::read_next() {
  const auto header = static_cast<size_t>(options_.header_bytes);
  const auto record = static_cast<size_t>(options_.record_bytes);
  const auto footer = static_cast<size_t>(options_.footer_bytes);
  if (!started_) {
    std::string skipped;
    const size_t got = in_->append(&skipped, header);
    // The footer must fit too: keep it as look-ahead.
    in_->append(&lookahead_, footer);
    STRATA_CHECK(DATA_LOSS, got == header && lookahead_.size() == footer, in_->name(), ": file of ",
                 got + lookahead_.size(), " bytes is shorter than header_bytes (", header,
                 ") + footer_bytes (", footer, ")");
    started_ = true;
  }
  // lookahead_ holds `footer` bytes that might be the footer; read one record's
  // worth more: if none exist, lookahead_ was the footer.
  const uint64_t start = in_->offset() - lookahead_.size();
  const size_t got = in_->append(&lookahead_, record);
  if (got == 0) return std::nullopt;
  STRATA_CHECK(DATA_LOSS, got == record, in_->name(), ": truncated record at offset ", start,
               ": expected ", record, " bytes (record_bytes) before the ", footer,
               "-byte footer, got ", got);
  std::string out = lookahead_.substr(0, record);
  lookahead_.erase(0, record);
  return out;
}

}  // namespace strata::io
