#pragma once
// The running half of `strata bench`: finds the Google Benchmark programs, runs
// them and the Python peer scripts under a timeout, and parses what they print.
// Nothing here decides what a figure means; bench_report.h does.
//
//   for (const auto& p : bench::bench_programs(dir)) {
//     const bench::Output out = bench::capture(bench::quote(p.string()) + " ...", 300);
//     if (out.status != 0) std::cerr << bench::failure(out, 300);
//   }
//
// Every function is safe to call from one thread at a time; capture() blocks
// until the command exits or its timeout kills it.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace strata::tools::bench {

// One benchmark of one program: the median of every numeric field over its
// repetitions (times in seconds under "real_time" / "cpu_time").
struct Run {
  std::string program = "";
  std::string name = "";  // as the program printed it
  std::string key = "";   // name without /real_time, /manual_time, /iterations:N, ...
  std::map<std::string, double> values = {};
  std::string error = "";  // the benchmark's error_message, when it failed
};

// `s` single-quoted for sh.
std::string quote(const std::string& s);

struct Output {
  int status = 0;  // exit status; 124 or 137 when the timeout ended it; 128 + signal
  std::string text = "";
};

// Runs `command` through the shell under coreutils' timeout (stdin from
// /dev/null); stdout is captured. InternalError when the shell cannot start.
Output capture(const std::string& command, int timeout_s);

// "timed out after N s", or "exit status S: <last line of the output>".
std::string failure(const Output& o, int timeout_s);

// Google Benchmark's JSON (--benchmark_out_format=json): iteration runs, several
// per name with repetitions, and aggregates (their "median" is used when
// present). Throws nlohmann::json::exception when `text` is not such JSON.
std::vector<Run> parse_benchmark_json(const std::string& program, const std::string& text);

// build/bench beside this program's build/tools/strata/strata. NotFoundError
// when /proc/self/exe cannot be read.
std::filesystem::path default_bench_dir();

// The executables named *_bench in `dir`, sorted; none when `dir` is missing.
std::vector<std::filesystem::path> bench_programs(const std::filesystem::path& dir);

// What --quick runs of each program: the figures the table uses, at the
// smallest time Google Benchmark allows (one repetition of few iterations).
struct QuickPlan {
  std::string filter;  // "" = everything
  std::string skip;    // non-empty: not run under --quick, and why
};
QuickPlan quick_plan(const std::string& program);

// Why `program` is listed instead of run (it is a *_bench program with its own
// driver), or "" for a Google Benchmark program.
std::string own_driver(const std::string& program);

// ---- peers outside the programs: bench/peers/*.py --------------------------------

struct PeerValue {
  double value = 0;  // seconds, or examples/s when rate
  bool rate = false;
};

struct PeerScript {
  std::string script;
  std::vector<std::string> args;
  std::string status = "";  // "ran", "skipped (...)", "failed (...)"
};

// Why `script` cannot run under `python` ("skipped (...)" naming the missing
// interpreter, file or modules), or "" when it can.
std::string why_not_runnable(const std::string& python, const std::filesystem::path& script);

// torch_conv.py: "layer L forward: median wall X ms, ..." lines, stored under
// "torch_conv/<the Strata benchmark it pairs with>".
void parse_conv_text(const std::string& text, int threads, std::map<std::string, PeerValue>& out);

// One JSON object per line naming the figure it pairs with (torch_train.py,
// torch_ddp.py): {"peer": P, "figure": F, "examples_per_second": R, ...}. Keys
// are "P/F", "P_channels_last/F" for torch.channels_last runs; other lines are
// ignored.
void parse_json_lines(const std::string& text, const std::string& stem,
                      std::map<std::string, PeerValue>& out);

}  // namespace strata::tools::bench
