#pragma once
// Files for tests: the temporary directory is base's TempDir (strata/base/file.h:
// mkdtemp, removed with its contents on destruction); the helpers here write the
// fixtures, often deliberately broken, that tests feed to readers.
//
//   strata::testing::TempDir dir("strata_io");
//   strata::testing::write_file(dir.file("a.tfrecord"), from_hex("05 00 00 00 | 00 00 00 00"));
//   std::string bytes = strata::testing::read_file(dir.file("a.tfrecord"));
//
// Test-only (strata/testing is neither installed nor linked into the library).
// Thread-safety: as the file system.

#include <string>
#include <string_view>

#include "strata/base/file.h"

namespace strata::testing {

using ::strata::read_file;
using ::strata::TempDir;

// Writes exactly `bytes` to `path` (replacing it); throws as
// strata::write_file_atomically does when it cannot.
void write_file(const std::string& path, std::string_view bytes);

// "00 0a ff" -> the bytes 0x00 0x0a 0xff. Characters other than hex digits
// (spaces, '|' between fields) are ignored, so fixtures can show their layout.
std::string from_hex(std::string_view hex);

}  // namespace strata::testing
