#pragma once
// TFRecord files, byte-compatible with TensorFlow's tf.io.TFRecordWriter and
// tf.data.TFRecordDataset (format: docs/formats/tfrecord.md).
//
// Each record is: uint64 length (little-endian) | uint32 masked CRC-32C of those 8
// bytes | `length` payload bytes | uint32 masked CRC-32C of the payload. With
// compression "ZLIB" or "GZIP" the whole file stream is compressed.
//
//   strata::io::TFRecordWriter w(path, {.compression_type = "GZIP"});
//   w.write("hello");
//   w.close();                                   // fsync + rename: the file appears whole
//
//   strata::io::TFRecordReader r(path, {.compression_type = "GZIP"});
//   while (std::optional<std::string> rec = r.read_next()) use(*rec);

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace strata::io {

namespace internal {
class InputStream;
class OutputFile;
}  // namespace internal

// tf.io.TFRecordOptions (the subset Strata honours). Fields follow TF's order.
struct TFRecordOptions {
  // "" (none), "ZLIB" or "GZIP"; "SNAPPY" raises UnimplementedError and any
  // other value InvalidArgumentError.
  std::string compression_type = "";
  // zlib level 0..9, or -1 for zlib's default (TF's default). Writer only.
  int compression_level = -1;
};

// Bytes of framing around each payload: 12-byte header + 4-byte footer.
inline constexpr uint64_t kTFRecordHeaderBytes = 12;
inline constexpr uint64_t kTFRecordFooterBytes = 4;

// Returns the framed bytes of one record (header, payload, footer).
std::string tfrecord_frame(std::string_view payload);

// Writes records to a file. The file is written atomically: records go to a
// temporary file beside `path` ("<path>.tmp.<random>") that close() fsyncs and
// renames over `path`, so readers never see a half-written file.
//
// Destruction without close(): the writer closes best-effort (errors are
// swallowed, as destructors never throw) — unless it is destroyed while an
// exception unwinds the stack, in which case the temporary file is discarded and
// `path` is left untouched. Call close() to learn about write errors.
// Move-only; one thread at a time.
class TFRecordWriter {
 public:
  // Throws InvalidArgumentError/UnimplementedError for a bad compression type, and
  // NotFoundError/PermissionDeniedError when the temporary file cannot be created.
  explicit TFRecordWriter(std::string path, const TFRecordOptions& options = {});
  ~TFRecordWriter();
  TFRecordWriter(TFRecordWriter&&) noexcept;
  TFRecordWriter& operator=(TFRecordWriter&&) noexcept;

  // Appends one record. FailedPreconditionError after close().
  void write(std::string_view record);
  // Pushes buffered bytes to the temporary file (sync-flushing a compressed
  // stream); the file stays invisible at `path` until close().
  void flush();
  // Finishes compression, fsyncs and renames the file into place. Throws on I/O
  // errors (the temporary file is removed). FailedPreconditionError when called twice.
  void close();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<internal::OutputFile> file_;
  int uncaught_at_construction_ = 0;
};

// Reads records from a TFRecord file (or an in-memory image of one).
// Offsets are positions in the uncompressed record stream; offset() before a
// read_next() is that record's start, usable with seek(). One thread at a time.
class TFRecordReader {
 public:
  // Opens `path`. NotFoundError if it does not exist; compression errors as
  // TFRecordOptions says.
  explicit TFRecordReader(const std::string& path, const TFRecordOptions& options = {});
  // Reads from `bytes` (the file's contents); `name` appears in error messages.
  static TFRecordReader from_bytes(std::string bytes, const TFRecordOptions& options = {},
                                   std::string name = "<memory>");
  ~TFRecordReader();
  TFRecordReader(TFRecordReader&&) noexcept;
  TFRecordReader& operator=(TFRecordReader&&) noexcept;

  // Returns the next record's payload, or std::nullopt at a clean end of file
  // (exactly at a record boundary). Throws DataLossError if a checksum fails, the
  // length is absurd, or the file ends inside a record; the message names the
  // file, the record's byte offset and which check failed. After an error the
  // reader stays at that record's start.
  std::optional<std::string> read_next();
  // Byte offset of the next record.
  uint64_t offset() const;
  // Moves to `offset`, which should be a record start previously given by
  // offset(); reading from any other offset fails the length checksum. Cheap for
  // uncompressed files; a compressed one is re-inflated from its start when
  // moving backwards (forwards it inflates and discards up to `offset`).
  void seek(uint64_t offset);
  const std::string& name() const;

 private:
  explicit TFRecordReader(std::unique_ptr<internal::InputStream> in);
  std::unique_ptr<internal::InputStream> in_;
};

}  // namespace strata::io
