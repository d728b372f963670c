#pragma once
// Byte streams under the io readers and writers: a buffered input over a file or
// an in-memory buffer, optionally inflating ZLIB/GZIP; an atomic output file,
// optionally deflating. Private to the io layer (zlib stays in stream.cc).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "strata/base/file.h"

namespace strata::io::internal {

enum class Compression { NONE, ZLIB, GZIP };

// Maps "", "ZLIB", "GZIP" to a Compression; "SNAPPY" is UnimplementedError and
// anything else InvalidArgumentError naming `who`.
Compression parse_compression(std::string_view type, std::string_view who);

// A source of raw bytes (file or memory).
class Source {
 public:
  virtual ~Source() = default;
  // Reads up to n bytes into dst; returns the count, 0 only at end of data.
  virtual size_t read(char* dst, size_t n) = 0;
  // Moves to absolute byte `offset` (clamped reads past the end return 0).
  virtual void seek(uint64_t offset) = 0;
  // Total size in bytes.
  virtual uint64_t size() const = 0;
  // The offset the next read starts at.
  virtual uint64_t tell() const = 0;
};

// Buffered reader of the (decompressed) byte stream. Offsets are positions in the
// decompressed stream. One thread at a time.
class InputStream {
 public:
  InputStream(std::unique_ptr<Source> source, Compression compression, std::string name);
  ~InputStream();
  InputStream(const InputStream&) = delete;
  InputStream& operator=(const InputStream&) = delete;

  static std::unique_ptr<InputStream> open_file(const std::string& path, Compression compression);
  static std::unique_ptr<InputStream> from_bytes(std::string bytes, Compression compression,
                                                 std::string name);

  // Reads up to n bytes, fewer only at end of stream. Throws DataLossError when a
  // compressed stream is corrupt or ends early.
  size_t read(char* dst, size_t n);
  // Appends up to n bytes to *out, growing it in bounded steps so a corrupt
  // length never allocates more than the data that actually exists.
  size_t append(std::string* out, size_t n);
  // Reads a line ending in '\n' (not included) into *line; false at end of stream
  // when nothing was read.
  bool read_line(std::string* line);
  // Moves to absolute stream offset. Cheap for uncompressed input; a compressed
  // stream is re-inflated from its start when moving backwards.
  void seek(uint64_t offset);
  uint64_t offset() const { return offset_; }
  // Bytes left, when known without reading (uncompressed input only).
  std::optional<uint64_t> remaining() const;
  // Whether at least n more bytes can be read, without consuming any. Free for
  // uncompressed input; a compressed stream inflates ahead on a copy of its
  // decompressor into a fixed scratch buffer (so up to n bytes are inflated
  // twice, and memory does not grow with n). Readers call it before buffering
  // a large length that the data itself declares, so a small compressed file
  // that claims a huge record never makes them hold more than what exists.
  // Throws DataLossError if the compressed data is corrupt before n bytes.
  bool has_at_least(uint64_t n);
  const std::string& name() const { return name_; }

 private:
  size_t fill();  // refills buf_ from the (inflated) source; 0 at end
  size_t raw_read(char* dst, size_t n);
  struct Inflater;
  size_t inflate_into(Inflater& z, char* dst, size_t n);
  void skip(uint64_t n);

  std::unique_ptr<Source> source_;
  Compression compression_;
  std::string name_;
  std::unique_ptr<Inflater> inflater_;
  std::string buf_;
  size_t pos_ = 0;
  size_t end_ = 0;
  uint64_t offset_ = 0;
};

// Writes `path` atomically (strata/base/file.h's AtomicFileWriter), compressing
// on the way: commit() finishes the stream, fsyncs, renames it over `path` and
// fsyncs the directory. abandon() (or destruction without commit) removes the
// temporary file. One thread at a time.
class OutputFile {
 public:
  OutputFile(std::string path, Compression compression, int level);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view data);
  // Pushes buffered bytes to the temporary file; a compressed stream is
  // sync-flushed, so everything written so far can be decompressed from it.
  void flush();
  void commit();
  void abandon() noexcept;
  bool open() const { return file_->is_open(); }
  const std::string& path() const { return path_; }

 private:
  void write_raw(const char* data, size_t n);
  void drain();  // hands buf_ to the file (or the compressor, without flushing it)
  void deflate_some(int flush_mode);

  struct Deflater;
  std::string path_;
  Compression compression_;
  std::unique_ptr<AtomicFileWriter> file_;
  std::unique_ptr<Deflater> deflater_;
  std::string buf_;
};

}  // namespace strata::io::internal
