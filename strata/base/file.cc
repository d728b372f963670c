#include "strata/base/file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string_view>
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

// A writer that is gone leaves its temporary file unlocked; a live one holds
// flock() on it from creation to commit (AtomicFileWriter's constructor closes
// the window between creating and locking: see there).
// Removes the temporary files "<name>.tmp.<16 hex digits>" in `dir` whose
// <name> is `name` (or, with `prefix`, starts with it) and that no live writer
// holds (interrupted earlier writes). Best effort: a file that cannot be
// opened, locked or removed stays.
void remove_stale_temporaries(const std::string& dir, const std::string& name, bool prefix) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view entry(e->d_name);
    const size_t tmp = entry.size() >= 21 ? entry.size() - 21 : std::string_view::npos;
    if (tmp == std::string_view::npos || entry.substr(tmp, 5) != ".tmp.") continue;
    const std::string_view base = entry.substr(0, tmp);
    if (prefix ? !base.starts_with(name) : base != name) continue;
    const std::string_view suffix = entry.substr(tmp + 5);
    if (!std::all_of(suffix.begin(), suffix.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }))
      continue;
    const std::string candidate = (std::filesystem::path(dir) / std::string(entry)).string();
    UniqueFd fd(::open(candidate.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    struct stat st {};
    if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // a live writer's
    ::unlink(candidate.c_str());
  }
  ::closedir(d);
}

void remove_stale_temporaries(const std::string& path) {
  remove_stale_temporaries(parent_dir(path), std::filesystem::path(path).filename().string(),
                           /*prefix=*/false);
}

}  // namespace

void throw_os_error(std::string_view op, const std::string& path, int err) {
  // The errno names of a full disk or quota too: what an operator searches for.
  const char* name = err == ENOSPC ? " (ENOSPC)" : err == EDQUOT ? " (EDQUOT)" : "";
  const std::string msg = str_cat(op, " '", path, "': ", std::strerror(err), name);
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
  remove_stale_temporaries(path_);
  // The lock, held until the file is renamed or removed, marks the file as a
  // live writer's. Another writer's clean-up may lock and remove the file
  // between its creation and the lock: then the name no longer leads to the
  // locked file, and a new name is tried.
  for (int attempt = 0;; ++attempt) {
    fd_.reset(::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd_.valid()) throw_os_error("cannot create", temp_path_, errno);
    // A file system without flock() (some network ones): no writer can lock,
    // so no clean-up removes anything there, and the file needs no lock.
    if (::flock(fd_.get(), LOCK_EX) != 0) return;
    struct stat mine = {};
    struct stat named = {};
    if (::fstat(fd_.get(), &mine) == 0 && ::stat(temp_path_.c_str(), &named) == 0 &&
        mine.st_ino == named.st_ino && mine.st_dev == named.st_dev)
      return;
    STRATA_CHECK(INTERNAL, attempt < 100, "AtomicFileWriter: the temporary file of '", path_,
                 "' keeps disappearing");
    temp_path_ = str_cat(path_, ".tmp.", random_suffix());
  }
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

void remove_interrupted_writes(const std::string& path) noexcept {
  try {
    remove_stale_temporaries(path);
  } catch (...) {  // a path that cannot be parsed: nothing to remove
  }
}

void remove_interrupted_writes_in(const std::string& dir, const std::string& name_prefix) noexcept {
  try {
    remove_stale_temporaries(dir, name_prefix, /*prefix=*/true);
  } catch (...) {
  }
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
