#include "strata/io/internal/stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "strata/base/errors.h"
#include "strata/base/file.h"

namespace strata::io::internal {
namespace {

constexpr size_t kBufferSize = 256 * 1024;
// Largest step append() grows a string by before the bytes are known to exist.
constexpr size_t kAppendStep = 1 << 20;

class FileSource final : public Source {
 public:
  explicit FileSource(const std::string& path)
      : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (!fd_.valid()) throw_os_error("cannot open", path, errno);
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0) throw_os_error("cannot stat", path, errno);
    if (S_ISDIR(st.st_mode)) throw_os_error("cannot read", path, EISDIR);
    size_ = static_cast<uint64_t>(st.st_size);
  }

  size_t read(char* dst, size_t n) override {
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::read(fd_.get(), dst + got, n - got);
      if (r < 0) {
        if (errno == EINTR) continue;
        throw_os_error("cannot read", path_, errno);
      }
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    return got;
  }
  void seek(uint64_t offset) override {
    if (::lseek(fd_.get(), static_cast<off_t>(offset), SEEK_SET) < 0) {
      throw_os_error("cannot seek in", path_, errno);
    }
  }
  uint64_t size() const override { return size_; }
  uint64_t tell() const override {
    const off_t at = ::lseek(fd_.get(), 0, SEEK_CUR);
    if (at < 0) throw_os_error("cannot seek in", path_, errno);
    return static_cast<uint64_t>(at);
  }

 private:
  std::string path_;
  UniqueFd fd_;
  uint64_t size_ = 0;
};

class MemorySource final : public Source {
 public:
  explicit MemorySource(std::string bytes) : bytes_(std::move(bytes)) {}
  size_t read(char* dst, size_t n) override {
    const size_t k = pos_ < bytes_.size() ? std::min(n, bytes_.size() - pos_) : 0;
    std::memcpy(dst, bytes_.data() + pos_, k);
    pos_ += k;
    return k;
  }
  void seek(uint64_t offset) override {
    pos_ = static_cast<size_t>(std::min<uint64_t>(offset, bytes_.size()));
  }
  uint64_t size() const override { return bytes_.size(); }
  uint64_t tell() const override { return pos_; }

 private:
  std::string bytes_;
  size_t pos_ = 0;
};

int window_bits(Compression c) { return c == Compression::GZIP ? 16 + MAX_WBITS : MAX_WBITS; }

}  // namespace

Compression parse_compression(std::string_view type, std::string_view who) {
  if (type.empty()) return Compression::NONE;
  if (type == "ZLIB") return Compression::ZLIB;
  if (type == "GZIP") return Compression::GZIP;
  if (type == "SNAPPY") {
    throw UnimplementedError(str_cat(who, ": compression_type \"SNAPPY\" is not supported; ",
                                     "use \"\", \"ZLIB\" or \"GZIP\""));
  }
  throw InvalidArgumentError(
      str_cat(who, ": expected compression_type \"\", \"ZLIB\" or \"GZIP\", got \"", type, "\""));
}

// ---------------------------------------------------------------------------
// InputStream

struct InputStream::Inflater {
  z_stream strm{};
  std::string in;
  bool finished = false;  // the current compressed member ended (Z_STREAM_END)
  bool source_eof = false;
};

InputStream::InputStream(std::unique_ptr<Source> source, Compression compression, std::string name)
    : source_(std::move(source)), compression_(compression), name_(std::move(name)) {
  buf_.resize(kBufferSize);
  if (compression_ != Compression::NONE) {
    inflater_ = std::make_unique<Inflater>();
    inflater_->in.resize(kBufferSize);
    if (inflateInit2(&inflater_->strm, window_bits(compression_)) != Z_OK) {
      throw ResourceExhaustedError(str_cat("zlib: cannot initialise inflate for ", name_));
    }
  }
}

InputStream::~InputStream() {
  if (inflater_) inflateEnd(&inflater_->strm);
}

std::unique_ptr<InputStream> InputStream::open_file(const std::string& path,
                                                    Compression compression) {
  return std::make_unique<InputStream>(std::make_unique<FileSource>(path), compression, path);
}

std::unique_ptr<InputStream> InputStream::from_bytes(std::string bytes, Compression compression,
                                                     std::string name) {
  return std::make_unique<InputStream>(std::make_unique<MemorySource>(std::move(bytes)),
                                       compression, std::move(name));
}

size_t InputStream::raw_read(char* dst, size_t n) {
  if (!inflater_) return source_->read(dst, n);
  return inflate_into(*inflater_, dst, n);
}

size_t InputStream::inflate_into(Inflater& z, char* dst, size_t n) {
  z_stream& s = z.strm;
  size_t produced = 0;
  while (produced == 0 && n > 0) {
    if (s.avail_in == 0 && !z.source_eof) {
      const size_t got = source_->read(z.in.data(), z.in.size());
      if (got == 0) z.source_eof = true;
      s.next_in = reinterpret_cast<Bytef*>(z.in.data());
      s.avail_in = static_cast<uInt>(got);
    }
    if (z.finished) {
      if (s.avail_in == 0) return 0;  // clean end after the last member
      // Concatenated members (as `cat a.gz b.gz` makes) continue the stream.
      inflateReset(&s);
      z.finished = false;
    }
    if (s.avail_in == 0 && z.source_eof) {
      throw DataLossError(str_cat(name_, ": compressed stream ends early (truncated file) after ",
                                  offset_, " uncompressed bytes"));
    }
    s.next_out = reinterpret_cast<Bytef*>(dst);
    s.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    const uInt before = s.avail_out;
    const int ret = inflate(&s, Z_NO_FLUSH);
    produced = before - s.avail_out;
    if (ret == Z_STREAM_END) {
      z.finished = true;
    } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
      throw DataLossError(str_cat(name_, ": corrupt compressed stream near uncompressed offset ",
                                  offset_ + produced, ": ", s.msg ? s.msg : "zlib error ", ret));
    }
  }
  return produced;
}

size_t InputStream::fill() {
  pos_ = 0;
  end_ = raw_read(buf_.data(), buf_.size());
  return end_;
}

size_t InputStream::read(char* dst, size_t n) {
  size_t got = 0;
  while (got < n) {
    if (pos_ == end_) {
      if (n - got >= buf_.size()) {
        // Large reads bypass the buffer.
        const size_t r = raw_read(dst + got, n - got);
        if (r == 0) break;
        got += r;
        offset_ += r;
        continue;
      }
      if (fill() == 0) break;
    }
    const size_t k = std::min(n - got, end_ - pos_);
    std::memcpy(dst + got, buf_.data() + pos_, k);
    pos_ += k;
    got += k;
    offset_ += k;
  }
  return got;
}

size_t InputStream::append(std::string* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    const size_t step = std::min(n - got, std::max(kAppendStep, got));
    const size_t old = out->size();
    out->resize(old + step);
    const size_t r = read(out->data() + old, step);
    out->resize(old + r);
    got += r;
    if (r < step) break;
  }
  return got;
}

bool InputStream::read_line(std::string* line) {
  line->clear();
  bool any = false;
  while (true) {
    if (pos_ == end_ && fill() == 0) return any;
    any = true;
    const char* start = buf_.data() + pos_;
    const void* nl = std::memchr(start, '\n', end_ - pos_);
    const size_t k = nl ? static_cast<size_t>(static_cast<const char*>(nl) - start) : end_ - pos_;
    line->append(start, k);
    pos_ += k;
    offset_ += k;
    if (nl) {
      ++pos_;
      ++offset_;
      return true;
    }
  }
}

void InputStream::skip(uint64_t n) {
  char scratch[16384];
  while (n > 0) {
    const size_t r = read(scratch, static_cast<size_t>(std::min<uint64_t>(n, sizeof scratch)));
    if (r == 0) return;
    n -= r;
  }
}

void InputStream::seek(uint64_t offset) {
  if (!inflater_) {
    // Within the current buffer: just move the cursor.
    const uint64_t buf_start = offset_ - pos_;
    if (offset >= buf_start && offset <= buf_start + end_) {
      pos_ = static_cast<size_t>(offset - buf_start);
    } else {
      source_->seek(offset);
      pos_ = end_ = 0;
    }
    offset_ = offset;
    return;
  }
  if (offset < offset_) {
    source_->seek(0);
    inflateReset(&inflater_->strm);
    inflater_->strm.avail_in = 0;
    inflater_->finished = false;
    inflater_->source_eof = false;
    pos_ = end_ = 0;
    offset_ = 0;
  }
  skip(offset - offset_);
}

bool InputStream::has_at_least(uint64_t n) {
  if (const std::optional<uint64_t> rest = remaining()) return *rest >= n;
  uint64_t have = end_ - pos_;  // already inflated into the buffer
  if (have >= n) return true;
  // A copy of the decompressor and of its pending input; the source goes back to
  // where it was, so the real stream continues as if nothing happened.
  Inflater& z = *inflater_;
  Inflater ahead;
  if (inflateCopy(&ahead.strm, &z.strm) != Z_OK) {
    throw ResourceExhaustedError(str_cat("zlib: cannot copy the inflate state of ", name_));
  }
  ahead.in = z.in;
  if (z.strm.next_in != nullptr) {
    ahead.strm.next_in = reinterpret_cast<Bytef*>(ahead.in.data()) +
                         (z.strm.next_in - reinterpret_cast<Bytef*>(z.in.data()));
  }
  ahead.finished = z.finished;
  ahead.source_eof = z.source_eof;
  const uint64_t source_at = source_->tell();
  std::string scratch(kBufferSize, '\0');
  try {
    while (have < n) {
      const size_t r =
          inflate_into(ahead, scratch.data(), std::min<uint64_t>(n - have, scratch.size()));
      if (r == 0) break;
      have += r;
    }
  } catch (...) {
    inflateEnd(&ahead.strm);
    source_->seek(source_at);
    throw;
  }
  inflateEnd(&ahead.strm);
  source_->seek(source_at);
  return have >= n;
}

std::optional<uint64_t> InputStream::remaining() const {
  if (inflater_) return std::nullopt;
  const uint64_t size = source_->size();
  return offset_ < size ? size - offset_ : 0;
}

// ---------------------------------------------------------------------------
// OutputFile

struct OutputFile::Deflater {
  z_stream strm{};
  std::string out;
};

OutputFile::OutputFile(std::string path, Compression compression, int level)
    : path_(std::move(path)), compression_(compression) {
  if (compression_ != Compression::NONE) {
    STRATA_CHECK_ARG(level >= -1 && level <= 9,
                     "TFRecordOptions.compression_level must be in [-1, 9], got ", level);
  }
  file_ = std::make_unique<AtomicFileWriter>(path_);
  if (compression_ != Compression::NONE) {
    deflater_ = std::make_unique<Deflater>();
    if (deflateInit2(&deflater_->strm, level, Z_DEFLATED, window_bits(compression_), 8,
                     Z_DEFAULT_STRATEGY) != Z_OK) {
      deflater_.reset();
      throw ResourceExhaustedError(str_cat("zlib: cannot initialise deflate for ", path_));
    }
    deflater_->out.resize(kBufferSize);
  }
  buf_.reserve(kBufferSize);
}

OutputFile::~OutputFile() {
  abandon();
  if (deflater_) deflateEnd(&deflater_->strm);
}

void OutputFile::write_raw(const char* data, size_t n) { file_->append(std::string_view(data, n)); }

void OutputFile::deflate_some(int flush_mode) {
  z_stream& s = deflater_->strm;
  s.next_in = reinterpret_cast<Bytef*>(buf_.data());
  s.avail_in = static_cast<uInt>(buf_.size());
  while (true) {
    s.next_out = reinterpret_cast<Bytef*>(deflater_->out.data());
    s.avail_out = static_cast<uInt>(deflater_->out.size());
    const int ret = deflate(&s, flush_mode);
    STRATA_INTERNAL_CHECK(ret != Z_STREAM_ERROR, "deflate state clobbered");
    write_raw(deflater_->out.data(), deflater_->out.size() - s.avail_out);
    if (flush_mode == Z_FINISH ? ret == Z_STREAM_END : (s.avail_out != 0 && s.avail_in == 0)) break;
  }
  buf_.clear();
}

void OutputFile::write(std::string_view data) {
  STRATA_CHECK(FAILED_PRECONDITION, open(), "write to ", path_, " after close()");
  if (buf_.size() + data.size() > kBufferSize) {
    drain();
    if (!deflater_ && data.size() >= kBufferSize) {
      write_raw(data.data(), data.size());
      return;
    }
  }
  // Large inputs to a compressed file go through the buffer in slices.
  while (data.size() > kBufferSize) {
    buf_.append(data.substr(0, kBufferSize));
    data.remove_prefix(kBufferSize);
    drain();
  }
  buf_.append(data);
}

void OutputFile::drain() {
  if (deflater_) {
    if (!buf_.empty()) deflate_some(Z_NO_FLUSH);
  } else {
    write_raw(buf_.data(), buf_.size());
    buf_.clear();
  }
}

void OutputFile::flush() {
  STRATA_CHECK(FAILED_PRECONDITION, open(), "flush of ", path_, " after close()");
  if (deflater_) {
    deflate_some(Z_SYNC_FLUSH);
  } else {
    drain();
  }
}

void OutputFile::commit() {
  STRATA_CHECK(FAILED_PRECONDITION, open(), "close of ", path_, " after close()");
  try {
    if (deflater_) {
      deflate_some(Z_FINISH);
    } else {
      drain();
    }
    file_->commit();
  } catch (...) {
    abandon();
    throw;
  }
}

void OutputFile::abandon() noexcept { file_->abandon(); }

}  // namespace strata::io::internal
