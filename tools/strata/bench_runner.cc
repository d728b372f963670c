#include "tools/strata/bench_runner.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"

namespace strata::tools::bench {

namespace fs = std::filesystem;

namespace {

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  const size_t nl = t.rfind('\n');
  std::string line = nl == std::string::npos ? t : t.substr(nl + 1);
  if (line.size() > 160) line = line.substr(0, 160) + "...";
  return line;
}

double to_seconds(double value, const std::string& unit) {
  if (unit == "ns") return value * 1e-9;
  if (unit == "us") return value * 1e-6;
  if (unit == "ms") return value * 1e-3;
  return value;
}

std::string run_key(const std::string& name) {
  static const std::regex suffix(R"(/(real_time|manual_time|process_time|iterations:\d+))");
  return std::regex_replace(name, suffix, "");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Top-level `import x` / `from x import` modules of a Python script.
std::vector<std::string> imported_modules(const fs::path& script) {
  std::ifstream in(script);
  std::set<std::string> modules;
  const std::regex import_re(R"(^(?:import|from)\s+([A-Za-z_][A-Za-z0-9_]*))");
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, import_re)) modules.insert(m[1]);
  }
  return {modules.begin(), modules.end()};
}

}  // namespace

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `command` through the shell under coreutils' timeout; stdout is captured.
Output capture(const std::string& command, int timeout_s) {
  const std::string cmd =
      "timeout -k 5 " + std::to_string(timeout_s) + " sh -c " + quote(command) + " </dev/null";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  STRATA_CHECK(INTERNAL, pipe != nullptr, "bench: cannot run ", command);
  Output out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.text.append(buf.data(), n);
  const int raw = ::pclose(pipe);
  out.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return out;
}

std::string failure(const Output& o, int timeout_s) {
  if (o.status == 124 || o.status == 137) return str_cat("timed out after ", timeout_s, " s");
  const std::string line = last_line(o.text);
  return str_cat("exit status ", o.status, line.empty() ? "" : ": " + line);
}

// Google Benchmark's JSON (--benchmark_out_format=json): iteration runs, several
// per name with repetitions, and aggregates (their "median" is used when present).
std::vector<Run> parse_benchmark_json(const std::string& program, const std::string& text) {
  // Google Benchmark writes non-finite numbers as bare NaN / inf, which JSON
  // lacks: e.g. the "cv" aggregate (stddev / mean) of a counter that is 0 in
  // every repetition. They become null, which no figure uses.
  static const std::regex non_finite(R"((:\s*)-?(NaN|nan|Infinity|inf)\b)");
  const nlohmann::json j = nlohmann::json::parse(std::regex_replace(text, non_finite, "$1null"));
  static const std::set<std::string> not_figures = {"family_index", "per_family_instance_index",
                                                    "repetitions",  "repetition_index",
                                                    "threads",      "iterations"};
  std::vector<std::string> order;
  std::map<std::string, std::map<std::string, std::vector<double>>> iterations;
  std::map<std::string, std::map<std::string, double>> medians;
  std::map<std::string, std::string> errors;
  for (const nlohmann::json& b : j.at("benchmarks")) {
    const std::string name = b.contains("run_name") ? b.at("run_name").get<std::string>()
                                                    : b.at("name").get<std::string>();
    const bool aggregate = b.value("run_type", "iteration") == "aggregate";
    if (aggregate && b.value("aggregate_name", "") != "median") continue;
    if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
    if (b.value("error_occurred", false)) {
      errors[name] = b.value("error_message", "error");
      continue;
    }
    const std::string unit = b.value("time_unit", "ns");
    std::map<std::string, double> values;
    for (const auto& [field, v] : b.items()) {
      if (!v.is_number() || not_figures.count(field)) continue;
      double x = v.get<double>();
      if (field == "real_time" || field == "cpu_time") x = to_seconds(x, unit);
      values[field] = x;
    }
    if (aggregate) {
      medians[name] = values;
    } else {
      for (const auto& [field, x] : values) iterations[name][field].push_back(x);
    }
  }
  std::vector<Run> runs;
  for (const std::string& name : order) {
    Run r{program, name, run_key(name)};
    if (medians.count(name)) {
      r.values = medians[name];
    } else {
      for (const auto& [field, xs] : iterations[name]) r.values[field] = median(xs);
    }
    if (errors.count(name) && r.values.empty()) r.error = errors[name];
    runs.push_back(r);
  }
  return runs;
}

fs::path default_bench_dir() {
  // build/tools/strata/strata -> build/bench
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  STRATA_CHECK(NOT_FOUND, !ec, "bench: cannot find this program's path; pass --bench-dir");
  return exe.parent_path().parent_path().parent_path() / "bench";
}

std::vector<fs::path> bench_programs(const fs::path& dir) {
  std::vector<fs::path> programs;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.size() > 6 && name.ends_with("_bench") &&
        ::access(e.path().c_str(), X_OK) == 0) {
      programs.push_back(e.path());
    }
  }
  std::sort(programs.begin(), programs.end());
  return programs;
}

QuickPlan quick_plan(const std::string& program) {
  static const std::map<std::string, QuickPlan> plans = {
      {"kernels_bench", {"MatMul|Sgemm|Memcpy|Add64|Conv2DForward|FmaPeak", ""}},
      {"training_bench", {"BM_TrainMLP|BM_TrainCNN/threads:1/|BM_MirroredTrainMLP", ""}},
      {"autodiff_bench", {"BackwardOverForward", ""}},
      {"collective_bench", {"LocalAllReduce|GlooAllReduce/|RawGlooAllReduce/[1-9]", ""}},
      {"tpu_bench", {"", "skipped under --quick (one 512x512 conv-stack step takes seconds)"}},
  };
  auto it = plans.find(program);
  return it == plans.end() ? QuickPlan{"", ""} : it->second;
}

// The *_bench programs that are not Google Benchmark programs: they have their
// own drivers and print their own JSON, so `strata bench` lists them with the
// reason instead of running them (in every mode, --filter included).
std::string own_driver(const std::string& program) {
  static const std::map<std::string, std::string> programs = {
      {"multiworker_allreduce_bench",
       "not run here (one rank of a 2-process all-reduce: bench/peers/allreduce_2proc.py starts "
       "it with its raw-Gloo and torch.distributed peers)"},
      {"mwms_allreduce_bench",
       "not run here (its own launcher of 2-process MultiWorkerMirroredStrategy pairs over shared "
       "memory and over Gloo, not a Google Benchmark program: run it directly)"},
      {"multiworker_training_bench",
       "not run here (its own 2-process launcher, not a Google Benchmark program: run it "
       "directly, then bench/peers/torch_ddp.py for the peer)"},
  };
  auto it = programs.find(program);
  return it == programs.end() ? "" : it->second;
}

// Why `script` cannot run under `python`, or "" when it can.
std::string why_not_runnable(const std::string& python, const fs::path& script) {
  if (::access(python.c_str(), X_OK) != 0)
    return "skipped (python '" + python + "' not found; pass --python or set STRATA_BENCH_PYTHON)";
  if (!fs::is_regular_file(script)) return "skipped (" + script.string() + " not found)";
  std::string missing;
  for (const std::string& mod : imported_modules(script)) {
    if (capture(quote(python) + " -c " + quote("import " + mod) + " >/dev/null 2>&1", 120).status !=
        0)
      missing += (missing.empty() ? "" : ", ") + mod;
  }
  if (missing.empty()) return "";
  return "skipped (not installed for " + python + ": " + missing +
         (missing.find("torch") != std::string::npos ? "; apt install python3-torch)" : ")");
}

// torch_conv.py: "layer L forward: median wall X ms, ..." lines.
void parse_conv_text(const std::string& text, int threads, std::map<std::string, PeerValue>& out) {
  const std::regex line_re(R"(layer (\d+) (forward\+backward|forward): median wall ([0-9.]+) ms)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), line_re);
       it != std::sregex_iterator(); ++it) {
    const std::string layer = (*it)[1], kind = (*it)[2];
    const std::string figure =
        (kind == "forward" ? "BM_Conv2DForward" : "BM_Conv2DForwardBackward") +
        std::string("/layer:") + layer + "/threads:" + std::to_string(threads);
    out["torch_conv/" + figure] = {std::stod((*it)[3]) * 1e-3, false};
  }
}

// One JSON object per line naming the figure it pairs with (torch_train.py,
// torch_ddp.py): {"peer": P, "figure": F, "examples_per_second": R, ...}. Keys
// are "P/F", "P_channels_last/F" for torch.channels_last runs.
void parse_json_lines(const std::string& text, const std::string& stem,
                      std::map<std::string, PeerValue>& out) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] != '{') continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("figure")) continue;
    const std::string peer =
        j.value("peer", stem) + (j.value("channels_last", false) ? "_channels_last" : "");
    const std::string key = peer + "/" + j.at("figure").get<std::string>();
    if (j.contains("examples_per_second") && j.at("examples_per_second").is_number()) {
      out[key] = {j.at("examples_per_second").get<double>(), true};
    } else if (j.contains("seconds_per_step") && j.at("seconds_per_step").is_number()) {
      out[key] = {j.at("seconds_per_step").get<double>(), false};
    }
  }
}

}  // namespace strata::tools::bench
