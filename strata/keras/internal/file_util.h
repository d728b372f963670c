#pragma once
// Private to the keras layer: whole-file reads and atomic whole-file writes.
//
//   internal::write_file_atomically("/tmp/w.weights", bytes);   // never half-written
//   std::string bytes = internal::read_file("/tmp/w.weights");
//
// Thread-safety: pure functions over the file system.

#include <string>
#include <string_view>

namespace strata::keras::internal {

// Writes `contents` to a temporary file in `path`'s directory, fsyncs it,
// renames it over `path` and fsyncs the directory, so a crash leaves either
// the old file or the new one. NotFoundError / PermissionDeniedError /
// InternalError (naming the path) when the OS refuses.
void write_file_atomically(const std::string& path, std::string_view contents);

// The whole file. NotFoundError naming the path when it does not exist.
std::string read_file(const std::string& path);

bool file_exists(const std::string& path);

// Creates `dir` and its parents (like mkdir -p).
void make_dirs(const std::string& dir);

}  // namespace strata::keras::internal
