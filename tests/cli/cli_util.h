#pragma once
// What the end-to-end tests of the `strata` program share: running the binary,
// temporary directories and small files.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "strata/base/file.h"

namespace strata_cli_test {

struct Result {
  int status;          // exit status, or 128 + signal
  std::string output;  // stdout (and stderr when merged)
};

// Runs `command` with sh (stdin from /dev/null); with merge_stderr the output
// holds both streams, else stdout only.
inline Result run_shell(const std::string& command, bool merge_stderr = true) {
  const std::string cmd =
      "{ " + command + "\n}" + (merge_stderr ? " 2>&1" : " 2>/dev/null") + " </dev/null";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int raw = ::pclose(pipe);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw), out};
}

// Runs the binary with `args`.
inline Result run(const std::string& args, bool merge_stderr = true) {
  return run_shell(std::string(STRATA_CLI_PATH) + " " + args, merge_stderr);
}

// A temporary directory removed at the end of the test (strata::TempDir), with
// the path joining the shell commands of these tests read best with.
class TempDir {
 public:
  std::string operator/(const std::string& name) const { return dir_.file(name); }
  std::string str() const { return dir_.path(); }

 private:
  strata::TempDir dir_{"strata_cli"};
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Writes an uncompressed IDX file of unsigned bytes (readers detect gzip by its
// magic, so Debian's .gz file names work for plain files too).
inline void write_idx(const std::string& path, const std::vector<uint32_t>& dims,
                      const std::vector<uint8_t>& data) {
  std::ofstream out(path, std::ios::binary);
  const char header[4] = {0, 0, 0x08, static_cast<char>(dims.size())};
  out.write(header, 4);
  for (uint32_t d : dims) {
    const char be[4] = {static_cast<char>(d >> 24), static_cast<char>(d >> 16),
                        static_cast<char>(d >> 8), static_cast<char>(d)};
    out.write(be, 4);
  }
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

// One `$ COMMAND` line of a README.md text block and the output quoted under it.
struct QuotedCommand {
  std::string command;  // without the "$ "
  std::string output;   // every line up to the next "$ " line or the block's end
};

// The ```text blocks of the Markdown file `path` whose first line starts with
// "$ " + `first`, each split into its commands.
inline std::vector<std::vector<QuotedCommand>> readme_sessions(const std::string& path,
                                                               const std::string& first) {
  const std::string readme = read_file(path);
  EXPECT_FALSE(readme.empty()) << path;
  const std::string open = "```text\n$ " + first;
  std::vector<std::vector<QuotedCommand>> sessions;
  for (size_t at = readme.find(open); at != std::string::npos; at = readme.find(open, at + 1)) {
    const size_t begin = at + std::string("```text\n").size();
    const size_t end = readme.find("\n```", begin);
    EXPECT_NE(end, std::string::npos) << "an unclosed text block at offset " << at;
    if (end == std::string::npos) break;
    std::vector<QuotedCommand> session;
    std::istringstream lines(readme.substr(begin, end + 1 - begin));
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("$ ", 0) == 0) {
        session.push_back({line.substr(2), ""});
      } else {
        session.back().output += line + "\n";
      }
    }
    sessions.push_back(std::move(session));
  }
  return sessions;
}

// A README command as a shell command for this build: the `strata` at its start
// and after `--` becomes the binary under test.
inline std::string with_this_binary(const std::string& command) {
  return std::regex_replace(command, std::regex("(^|-- )strata "),
                            "$1" + std::string(STRATA_CLI_PATH) + " ");
}

// Every occurrence of `from` in `text` replaced by `to`.
inline std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

}  // namespace strata_cli_test
