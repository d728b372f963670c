#include "strata/base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <utility>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"

namespace strata {
namespace {

std::string parent_dir(const std::string& path) {
  const std::filesystem::path p(path);
  return p.has_parent_path() ? p.parent_path().string() : std::string(".");
}

std::string random_suffix() {
  std::random_device rd;
  char suffix[17];
  std::snprintf(suffix, sizeof suffix, "%08x%08x", rd(), rd());
  return suffix;
}

}  // namespace

void throw_os_error(std::string_view op, const std::string& path, int err) {
  const std::string msg = str_cat(op, " '", path, "': ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR: throw NotFoundError(msg);
    case EACCES:
    case EPERM:
    case EROFS: throw PermissionDeniedError(msg);
    case ENOSPC:
    case EDQUOT: throw ResourceExhaustedError(msg);
    case EEXIST: throw AlreadyExistsError(msg);
    case EISDIR:
    case ENOTEMPTY: throw FailedPreconditionError(msg);
    default: throw UnknownError(msg);
  }
}

// --- UniqueFd -------------------------------------------------------------------

UniqueFd::UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(std::exchange(other.fd_, -1));
  return *this;
}

int UniqueFd::release() noexcept { return std::exchange(fd_, -1); }

void UniqueFd::reset(int fd) noexcept {
  if (fd_ >= 0 && fd_ != fd) ::close(fd_);
  fd_ = fd;
}

void UniqueFd::close(const std::string& path) {
  const int fd = release();
  // Linux releases the descriptor even when close() fails, so it is never retried.
  if (fd >= 0 && ::close(fd) != 0) throw_os_error("cannot close", path, errno);
}

// --- AtomicFileWriter -----------------------------------------------------------

AtomicFileWriter::AtomicFileWriter(std::string path)
    : path_(std::move(path)), temp_path_(str_cat(path_, ".tmp.", random_suffix())) {
  fd_.reset(::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd_.valid()) throw_os_error("cannot create", temp_path_, errno);
}

AtomicFileWriter::~AtomicFileWriter() { abandon(); }

void AtomicFileWriter::append(std::string_view data) {
  STRATA_CHECK(FAILED_PRECONDITION, is_open(), "AtomicFileWriter: write to '", path_,
               "' after commit() or abandon()");
  while (!data.empty()) {
    const ssize_t n = ::write(fd_.get(), data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_os_error("cannot write", temp_path_, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void AtomicFileWriter::commit() {
  STRATA_CHECK(FAILED_PRECONDITION, is_open(), "AtomicFileWriter: commit of '", path_,
               "' after commit() or abandon()");
  try {
    if (::fsync(fd_.get()) != 0) throw_os_error("cannot fsync", temp_path_, errno);
    fd_.close(temp_path_);
    if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
      throw_os_error("cannot rename into", path_, errno);
    }
  } catch (...) {
    fd_.reset();
    ::unlink(temp_path_.c_str());
    throw;
  }
  // The new contents are in place; they survive a crash once the directory
  // entry the rename changed is on disk too.
  sync_dir(parent_dir(path_));
}

void AtomicFileWriter::abandon() noexcept {
  if (!fd_.valid()) return;
  fd_.reset();
  ::unlink(temp_path_.c_str());
}

void write_file_atomically(const std::string& path, std::string_view contents) {
  AtomicFileWriter file(path);
  file.append(contents);
  file.commit();
}

// --- whole files and directories --------------------------------------------------

std::string read_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) throw_os_error("cannot open", path, errno);
  std::string out;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_os_error("cannot read", path, errno);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

void make_dirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw_os_error("cannot create directory", dir, ec.value());
}

void sync_dir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) throw_os_error("cannot open directory", dir, errno);
  if (::fsync(fd.get()) != 0) throw_os_error("cannot fsync directory", dir, errno);
}

// --- TempDir ----------------------------------------------------------------------

TempDir::TempDir(std::string_view prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / str_cat(prefix, "_XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw_os_error("cannot create directory", tmpl, errno);
  path_ = std::move(tmpl);
}

TempDir::~TempDir() { remove(); }

TempDir::TempDir(TempDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}

TempDir& TempDir::operator=(TempDir&& other) noexcept {
  if (this != &other) {
    remove();
    path_ = std::exchange(other.path_, {});
  }
  return *this;
}

std::string TempDir::file(std::string_view name) const { return str_cat(path_, "/", name); }

void TempDir::remove() noexcept {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  path_.clear();
}

}  // namespace strata
