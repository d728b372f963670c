#include "strata/base/file.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include "strata/base/errors.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// The names in `dir`, sorted.
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(AtomicWrite, ReplacesTheTargetAndLeavesNoTemporaryFile) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  write_file_atomically(path, "first");
  write_file_atomically(path, std::string("sec\0nd", 6));
  EXPECT_EQ(read_file(path), std::string("sec\0nd", 6));
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"a.bin"});
}

TEST(AtomicWrite, TheTargetIsUntouchedUntilCommit) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  write_file_atomically(path, "old");
  AtomicFileWriter w(path);
  w.append("new");
  EXPECT_EQ(read_file(path), "old");
  EXPECT_EQ(fs::path(w.temp_path()).parent_path(), fs::path(dir.path()));
  EXPECT_EQ(read_file(w.temp_path()), "new");
  w.commit();
  EXPECT_FALSE(w.is_open());
  EXPECT_EQ(read_file(path), "new");
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"a.bin"});
}

TEST(AtomicWrite, AbandonAndDestructionRemoveTheTemporaryFile) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  {
    AtomicFileWriter w(path);
    w.append("never");
  }
  AtomicFileWriter w(path);
  w.append("never");
  w.abandon();
  w.abandon();
  EXPECT_TRUE(entries(dir.path()).empty());
  EXPECT_THROW(w.append("late"), FailedPreconditionError);
  EXPECT_THROW(w.commit(), FailedPreconditionError);
}

TEST(AtomicWrite, MissingDirectoryIsNotFoundNamingThePath) {
  TempDir dir;
  const std::string path = dir.file("no/such/dir/a.bin");
  try {
    write_file_atomically(path, "x");
    FAIL() << "no error";
  } catch (const NotFoundError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot create '" + path + ".tmp."));
  }
}

TEST(AtomicWrite, AFailedRenameRemovesTheTemporaryFileAndKeepsTheTarget) {
  TempDir dir;
  // A non-empty directory cannot be replaced by a file.
  const std::string target = dir.file("taken");
  make_dirs(target + "/inside");
  AtomicFileWriter w(target);
  w.append("bytes");
  try {
    w.commit();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot rename into '" + target + "'"));
  }
  EXPECT_FALSE(w.is_open());
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"taken"});
  EXPECT_TRUE(fs::is_directory(target + "/inside"));
}

TEST(AtomicWrite, AReadOnlyDirectoryIsPermissionDenied) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  TempDir dir;
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
  EXPECT_THROW(write_file_atomically(dir.file("a.bin"), "x"), PermissionDeniedError);
  fs::permissions(dir.path(), fs::perms::owner_all);
}

TEST(ReadFile, MissingFileIsNotFoundNamingThePath) {
  try {
    read_file("/nonexistent/strata/file");
    FAIL() << "no error";
  } catch (const NotFoundError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot open '/nonexistent/strata/file'"));
  }
}

TEST(OsError, ErrnoValuesMapToTensorFlowCodes) {
  const auto code_of = [](int err) {
    try {
      throw_os_error("op", "p", err);
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::OK;
  };
  EXPECT_EQ(code_of(ENOENT), ErrorCode::NOT_FOUND);
  EXPECT_EQ(code_of(EACCES), ErrorCode::PERMISSION_DENIED);
  EXPECT_EQ(code_of(ENOSPC), ErrorCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(code_of(EEXIST), ErrorCode::ALREADY_EXISTS);
  EXPECT_EQ(code_of(EISDIR), ErrorCode::FAILED_PRECONDITION);
  EXPECT_EQ(code_of(EIO), ErrorCode::UNKNOWN);
}

TEST(UniqueFd, ClosesOnDestructionAndMovesOwnership) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  {
    UniqueFd a(fds[0]);
    UniqueFd b(std::move(a));
    EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is the test
    EXPECT_EQ(b.get(), fds[0]);
    UniqueFd c;
    c = std::move(b);
    EXPECT_EQ(c.get(), fds[0]);
  }
  EXPECT_EQ(::fcntl(fds[0], F_GETFD), -1);  // closed exactly once, by c
  UniqueFd w(fds[1]);
  const int raw = w.release();
  EXPECT_FALSE(w.valid());
  EXPECT_NE(::fcntl(raw, F_GETFD), -1);  // release() did not close it
  w.reset(raw);
  w.close("pipe");
  EXPECT_EQ(::fcntl(raw, F_GETFD), -1);
}

TEST(TempDir, IsCreatedEmptyAndRemovedWithItsContents) {
  std::string path;
  {
    TempDir dir("strata_file_test");
    path = dir.path();
    EXPECT_THAT(fs::path(path).filename().string(), HasSubstr("strata_file_test_"));
    EXPECT_TRUE(entries(path).empty());
    make_dirs(dir.file("a/b"));
    write_file_atomically(dir.file("a/b/c"), "x");
    EXPECT_TRUE(file_exists(dir.file("a/b/c")));
  }
  EXPECT_FALSE(file_exists(path));
}

TEST(TempDir, AMovedFromTempDirRemovesNothing) {
  TempDir a;
  const std::string path = a.path();
  {
    TempDir b(std::move(a));
    EXPECT_EQ(b.path(), path);
  }
  EXPECT_FALSE(file_exists(path));
}

}  // namespace
}  // namespace strata
