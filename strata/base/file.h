#pragma once
// Files for Strata's writers and tests: one atomic-write protocol, an owned file
// descriptor, a self-removing temporary directory, and the mapping of OS errors
// to Strata's error codes.
//
//   strata::write_file_atomically("/ckpt/model.weights", bytes);   // old file or new, never half
//
//   strata::AtomicFileWriter out("/data/train.tfrecord");          // streams, then commits
//   out.append(record);
//   out.commit();                                                  // fsync, rename, fsync dir
//
//   strata::TempDir dir("strata_io");                              // /tmp/strata_io_XXXXXX
//   std::string bytes = strata::read_file(dir.file("a.bin"));
//
// Atomic writes (ARCHITECTURE.md "Errors and data safety"): bytes go to a
// temporary file "<path>.tmp.<16 hex digits>" in the target's own directory (a
// rename is atomic only within one file system), which is fsynced, renamed over
// the target, and then the directory is fsynced so the rename itself survives a
// crash. Any failure removes the temporary file; the target is then untouched.
// A process killed mid-write leaves its temporary file behind: the next
// AtomicFileWriter for the same path removes every "<path>.tmp.<16 hex>" that
// no live writer holds (a writer holds flock() on its file until it is renamed
// or removed). remove_interrupted_writes(path) does the same for a writer that
// starts without writing yet.
//
// Errors name the operation and the path: NotFoundError (ENOENT, ENOTDIR),
// PermissionDeniedError (EACCES, EPERM, EROFS), ResourceExhaustedError (ENOSPC,
// EDQUOT: the message names the errno too, "No space left on device (ENOSPC)"),
// AlreadyExistsError (EEXIST), FailedPreconditionError (EISDIR,
// ENOTEMPTY), UnknownError otherwise — as TensorFlow maps errno.

#include <string>
#include <string_view>

namespace strata {

// Throws the error class matching `err` (an errno value) with the message
// "<op> '<path>': <strerror(err)>", e.g. "cannot open '/x/y': No such file or directory".
[[noreturn]] void throw_os_error(std::string_view op, const std::string& path, int err);

// Owns a file descriptor (or none, -1) and closes it on destruction. Move-only.
// One thread at a time.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept;
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  // Gives up ownership without closing; returns the descriptor.
  int release() noexcept;
  // Closes the owned descriptor (errors ignored: use close() to see them) and owns `fd`.
  void reset(int fd = -1) noexcept;
  // Closes the owned descriptor; throws (throw_os_error naming `path`) if close(2)
  // reports an error, which for a written file can mean lost data.
  void close(const std::string& path);

 private:
  int fd_ = -1;
};

// Writes one file atomically (see above), streaming. Until commit() the target
// is untouched; destruction or abandon() without commit() removes the temporary
// file. One thread at a time.
class AtomicFileWriter {
 public:
  // Creates the temporary file (mode 0644) beside `path`. Throws (throw_os_error)
  // when it cannot, e.g. NotFoundError when the directory does not exist.
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Writes all of `data` to the temporary file. FailedPreconditionError after
  // commit() or abandon().
  void append(std::string_view data);
  // fsyncs and closes the temporary file, renames it over the target and fsyncs
  // the directory. On a failure before the rename the temporary file is removed
  // and the target untouched; when only the directory fsync fails, the new file
  // is in place but its survival of a crash is not assured, and that error is
  // thrown too. The writer is closed either way.
  void commit();
  // Closes and removes the temporary file; no-op once closed.
  void abandon() noexcept;

  bool is_open() const noexcept { return fd_.valid(); }
  const std::string& path() const noexcept { return path_; }
  // For writers that must open the file by name themselves (plotting libraries):
  // what they write there is what commit() moves into place.
  const std::string& temp_path() const noexcept { return temp_path_; }

 private:
  std::string path_;
  std::string temp_path_;
  UniqueFd fd_;
};

// Removes the temporary files of interrupted atomic writes of `path` (those no
// live writer holds; see above). Best effort: never throws.
void remove_interrupted_writes(const std::string& path) noexcept;
// The same for every file in `dir` whose name starts with `name_prefix`, for
// writers that pick a new file name per run (TensorBoard's event files).
void remove_interrupted_writes_in(const std::string& dir, const std::string& name_prefix) noexcept;

// AtomicFileWriter(path), append(contents), commit().
void write_file_atomically(const std::string& path, std::string_view contents);

// The whole file. Throws (throw_os_error) when it cannot be opened or read,
// NotFoundError when it does not exist.
std::string read_file(const std::string& path);

// True when `path` names an existing file or directory (following links).
bool file_exists(const std::string& path);

// Creates `dir` and its missing parents, like mkdir -p; throws (throw_os_error)
// when it cannot.
void make_dirs(const std::string& dir);

// fsyncs the directory `dir`, making the creations, renames and removals of its
// entries durable.
void sync_dir(const std::string& dir);

// A new, empty directory "<system temp dir>/<prefix>_XXXXXX" (mkdtemp), removed
// with everything in it on destruction (removal errors are ignored: a destructor
// does not throw). Move-only; a moved-from TempDir removes nothing. One thread
// at a time.
class TempDir {
 public:
  // Throws (throw_os_error) when the directory cannot be created.
  explicit TempDir(std::string_view prefix = "strata");
  ~TempDir();
  TempDir(TempDir&& other) noexcept;
  TempDir& operator=(TempDir&& other) noexcept;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const noexcept { return path_; }
  // path() + "/" + name.
  std::string file(std::string_view name) const;

 private:
  void remove() noexcept;
  std::string path_;
};

}  // namespace strata
