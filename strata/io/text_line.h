#pragma once
// Line and fixed-length record readers behind TextLineDataset and
// FixedLengthRecordDataset. Both read plain, ZLIB or GZIP files (the compression
// applies to the whole file, as in TensorFlow).
//
//   strata::io::TextLineReader lines(path);
//   while (std::optional<std::string> line = lines.read_next()) use(*line);
//
//   strata::io::FixedLengthRecordReader r(path, {.header_bytes = 16, .record_bytes = 784});
//   while (auto rec = r.read_next()) use(*rec);   // 784 bytes each

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace strata::io {

namespace internal {
class InputStream;
}  // namespace internal

// Reads a text file line by line. Lines end at '\n', which is not returned; a
// '\r' right before the '\n' is dropped too (as TF's TextLineDataset does). A last
// line without '\n' is returned; an empty file has no lines. One thread at a time.
class TextLineReader {
 public:
  // NotFoundError if missing; compression_type as TFRecordOptions.
  explicit TextLineReader(const std::string& path, const std::string& compression_type = "");
  static TextLineReader from_bytes(std::string bytes, const std::string& compression_type = "",
                                   std::string name = "<memory>");
  ~TextLineReader();
  TextLineReader(TextLineReader&&) noexcept;
  TextLineReader& operator=(TextLineReader&&) noexcept;

  // The next line, or nullopt at end of file. DataLossError for a corrupt
  // compressed stream.
  std::optional<std::string> read_next();

 private:
  explicit TextLineReader(std::unique_ptr<internal::InputStream> in);
  std::unique_ptr<internal::InputStream> in_;
};

// tf.data.FixedLengthRecordDataset's arguments, in TF's order.
struct FixedLengthRecordOptions {
  int64_t header_bytes = 0;  // skipped at the start of the file
  int64_t record_bytes = 0;  // must be > 0
  int64_t footer_bytes = 0;  // ignored at the end of the file
  std::string compression_type = "";
};

// Reads header_bytes, then records of record_bytes until only footer_bytes
// remain. A file whose body is not a whole number of records raises DataLossError
// at the truncated last record (naming the file and offset), as TF does; a file
// shorter than header + footer raises DataLossError too. One thread at a time.
class FixedLengthRecordReader {
 public:
  FixedLengthRecordReader(const std::string& path, FixedLengthRecordOptions options);
  static FixedLengthRecordReader from_bytes(std::string bytes, FixedLengthRecordOptions options,
                                            std::string name = "<memory>");
  ~FixedLengthRecordReader();
  FixedLengthRecordReader(FixedLengthRecordReader&&) noexcept;
  FixedLengthRecordReader& operator=(FixedLengthRecordReader&&) noexcept;

  // The next record (record_bytes long), or nullopt when only the footer is left.
  std::optional<std::string> read_next();

 private:
  FixedLengthRecordReader(std::unique_ptr<internal::InputStream> in,
                          FixedLengthRecordOptions options);
  std::unique_ptr<internal::InputStream> in_;
  FixedLengthRecordOptions options_;
  bool started_ = false;
  std::string lookahead_;  // bytes read past the last record (the footer candidate)
};

}  // namespace strata::io
