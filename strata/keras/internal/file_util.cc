#include "strata/keras/internal/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"

namespace strata::keras::internal {
namespace {

[[noreturn]] void throw_os_error(const std::string& what, const std::string& path, int err) {
  const std::string msg = str_cat(what, " '", path, "': ", std::strerror(err));
  if (err == ENOENT || err == ENOTDIR) throw NotFoundError(msg);
  if (err == EACCES || err == EPERM || err == EROFS) throw PermissionDeniedError(msg);
  if (err == ENOSPC || err == EDQUOT) throw ResourceExhaustedError(msg);
  throw InternalError(msg);
}

// Closes the descriptor and removes the temporary file unless committed.
class TempFile {
 public:
  TempFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  int fd() const { return fd_; }
  void close_fd() {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw_os_error("cannot close", path_, errno);
  }
  void commit() { committed_ = true; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_;
  bool committed_ = false;
};

}  // namespace

void write_file_atomically(const std::string& path, std::string_view contents) {
  const std::filesystem::path target(path);
  const std::filesystem::path dir =
      target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::random_device rd;
  const std::string tmp = str_cat(path, ".tmp.", ::getpid(), ".", rd());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw_os_error("cannot create", tmp, errno);
  TempFile file(tmp, fd);
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::write(file.fd(), contents.data() + written, contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_os_error("cannot write", tmp, errno);
    }
    written += size_t(n);
  }
  if (::fsync(file.fd()) != 0) throw_os_error("cannot fsync", tmp, errno);
  file.close_fd();
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw_os_error("cannot rename into", path, errno);
  file.commit();
  // The rename is durable only once the directory entry is on disk.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_os_error("cannot open", path, errno);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw_os_error("cannot read", path, err);
    }
    if (n == 0) break;
    out.append(buf, size_t(n));
  }
  ::close(fd);
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

}  // namespace strata::keras::internal
