#include "strata/base/file.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <ctime>
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

TEST(AtomicWrite, TheNextWriterOfAPathRemovesTheTemporaryFilesOfAnInterruptedWrite) {
  TempDir dir("strata_file");
  const std::string target = dir.file("log.csv");
  // A child process starts a write and is killed in the middle of it.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    AtomicFileWriter out(target);
    out.append(std::string(1 << 16, 'x'));
    ::kill(::getpid(), SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    left.push_back(e.path().string());
  ASSERT_EQ(left.size(), 1u);
  const std::string interrupted = left[0];
  EXPECT_THAT(interrupted, ::testing::StartsWith(target + ".tmp."));
  // Look-alikes that are not this path's temporary files stay.
  const std::string other = dir.file("other.csv.tmp.0123456789abcdef");
  const std::string not_hex = dir.file("log.csv.tmp.0123456789abcdeg");
  for (const std::string& p : {other, not_hex}) write_file_atomically(p, "keep");
  // A live writer of the same path keeps its file.
  AtomicFileWriter live(target);

  write_file_atomically(target, "row\n");
  EXPECT_FALSE(std::filesystem::exists(interrupted));
  EXPECT_TRUE(std::filesystem::exists(live.temp_path()));
  for (const std::string& p : {other, not_hex}) EXPECT_TRUE(std::filesystem::exists(p)) << p;
  live.append("live");
  live.commit();
  EXPECT_EQ(read_file(target), "live");
}

TEST(AtomicWrite, RemoveInterruptedWritesRemovesOnlyTemporaryFilesNoWriterHolds) {
  TempDir dir("strata_file");
  const std::string target = dir.file("model.weights");
  const std::string left_behind = target + ".tmp.00112233445566ff";
  write_file_atomically(left_behind, "half");
  AtomicFileWriter live(target);
  remove_interrupted_writes(target);
  EXPECT_FALSE(std::filesystem::exists(left_behind));
  EXPECT_TRUE(std::filesystem::exists(live.temp_path()));
  remove_interrupted_writes(dir.file("no/such/dir/x"));  // nothing to do, no error
  // By name prefix: the event files of earlier runs, not other files.
  const std::string event = dir.file("events.out.tfevents.1.host.2.1.v2.tmp.0123456789abcdef");
  const std::string csv = dir.file("metrics.csv.tmp.0123456789abcdef");
  write_file_atomically(event, "x");
  write_file_atomically(csv, "x");
  remove_interrupted_writes_in(dir.path(), "events.out.tfevents.");
  EXPECT_FALSE(std::filesystem::exists(event));
  EXPECT_TRUE(std::filesystem::exists(csv));
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
  // A full disk names its errno, as operators search for it.
  try {
    throw_os_error("cannot write", "/full/x", ENOSPC);
  } catch (const ResourceExhaustedError& e) {
    EXPECT_STREQ(e.what(), "cannot write '/full/x': No space left on device (ENOSPC)");
  }
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
