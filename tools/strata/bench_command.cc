#include "tools/strata/bench_command.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/str_cat.h"

namespace strata::tools {

const char* const kGeneratedBegin = "<!-- BEGIN strata bench generated";
const char* const kGeneratedEnd = "<!-- END strata bench generated -->";

namespace {

namespace fs = std::filesystem;

// One benchmark of one program: the median of every numeric field over its
// repetitions (times in seconds under "real_time" / "cpu_time").
struct Run {
  std::string program = "";
  std::string name = "";  // as the program printed it
  std::string key = "";   // name without /real_time, /manual_time, /iterations:N, ...
  std::map<std::string, double> values = {};
  std::string error = "";  // the benchmark's error_message, when it failed
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct Output {
  int status = 0;
  std::string text = "";
};

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

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  const size_t nl = t.rfind('\n');
  std::string line = nl == std::string::npos ? t : t.substr(nl + 1);
  if (line.size() > 160) line = line.substr(0, 160) + "...";
  return line;
}

std::string failure(const Output& o, int timeout_s) {
  if (o.status == 124 || o.status == 137) return str_cat("timed out after ", timeout_s, " s");
  const std::string line = last_line(o.text);
  return str_cat("exit status ", o.status, line.empty() ? "" : ": " + line);
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

// What --quick runs of each program: the figures the table uses, at the
// smallest time Google Benchmark allows (one repetition of few iterations).
struct QuickPlan {
  std::string filter;  // "" = everything
  std::string skip;    // non-empty: not run under --quick, and why
};
QuickPlan quick_plan(const std::string& program) {
  static const std::map<std::string, QuickPlan> plans = {
      {"kernels_bench", {"MatMul|Sgemm|Memcpy|Add64|Conv2DForward", ""}},
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
      {"multiworker_training_bench",
       "not run here (its own 2-process launcher, not a Google Benchmark program: run it "
       "directly, then bench/peers/torch_ddp.py for the peer)"},
  };
  auto it = programs.find(program);
  return it == programs.end() ? "" : it->second;
}

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

// ---- the table -----------------------------------------------------------------

enum class Kind { seconds, bytes_rate, examples_rate, ratio, bytes_rate_1024 };

std::string format(double v, Kind kind) {
  std::ostringstream os;
  os << std::setprecision(3);
  switch (kind) {
    case Kind::seconds:
      if (v < 1e-6) {
        os << v * 1e9 << " ns";
      } else if (v < 1e-3) {
        os << v * 1e6 << " µs";
      } else if (v < 1) {
        os << v * 1e3 << " ms";
      } else {
        os << v << " s";
      }
      break;
    case Kind::bytes_rate: os << v / 1e9 << " GB/s"; break;
    case Kind::bytes_rate_1024: os << v / (1024.0 * 1024 * 1024) << " GiB/s"; break;
    case Kind::examples_rate:
      if (v >= 1e6) {
        os << v / 1e6 << "M ex/s";
      } else {
        os << v / 1e3 << "k ex/s";
      }
      break;
    case Kind::ratio: os << std::fixed << std::setprecision(2) << v << "×"; break;
  }
  return os.str();
}

// Where a value comes from: a benchmark's field, or (python peers) keys of
// the peer scripts' figures, the best of which is used.
struct Source {
  std::string benchmark = "";  // run key
  std::string field = "";      // "real_time", "bytes_per_second", a counter, ...
  std::vector<std::string> peer_keys = {};
  std::string script = "";  // the peer script, for its status
};

struct Target {
  enum Of { none, value_at_least, value_at_most, ratio_at_least } of = none;
  double bound = 0;
  std::string text = "";
};

struct RowSpec {
  std::string figure;
  Source strata;
  Kind kind;              // of both values
  std::string peer = "";  // label; "" = no peer
  Source peer_source = {};
  Target target = {};
};

struct Row {
  RowSpec spec;
  std::optional<double> strata = std::nullopt, peer = std::nullopt, ratio = std::nullopt;
  std::string peer_status = "";  // why the peer value is missing
  std::string result = "";       // pass / miss / - / skipped (...)
};

bool higher_is_better(Kind k) { return k != Kind::seconds; }

std::vector<RowSpec> row_specs(const std::map<std::string, const Run*>& runs) {
  std::vector<RowSpec> specs;
  auto has = [&](const std::string& k) { return runs.count(k) > 0; };
  auto bench = [](const std::string& b, const std::string& f) { return Source{b, f}; };
  auto torch = [](const std::string& script, std::vector<std::string> keys) {
    return Source{"", "", std::move(keys), script};
  };
  auto at_least = [](double x, std::string text) {
    return Target{Target::ratio_at_least, x, std::move(text)};
  };
  const std::string mlp1 = "BM_TrainMLP/threads:1";
  // Distribution.
  for (const char* n : {"1", "2", "4"}) {
    specs.push_back({std::string("strategy.run of an empty fn, ") + n + " replicas",
                     bench(std::string("BM_MirroredRunEmpty/") + n, "real_time"), Kind::seconds});
    if (std::string(n) == "2") specs.back().target = {Target::value_at_most, 20e-6, "≤ 20 µs"};
  }
  // io.
  specs.push_back({"TFRecord read + CRC, 256 MiB page-cached, 4 KiB records, 1 thread",
                   bench("BM_TFRecordReadVerified", "bytes_per_second"),
                   Kind::bytes_rate,
                   "plain read() of the same file",
                   bench("BM_PlainRead", "bytes_per_second"),
                   {Target::value_at_least, 1e9, "≥ 1 GB/s"}});
  specs.push_back({"parse_single_example, Fashion-MNIST record (CPU time)",
                   bench("BM_ParseSingleExampleFashionMnist", "items_per_second"),
                   Kind::examples_rate});
  specs.push_back({"parse_example, batch of 128 Fashion-MNIST records (CPU time)",
                   bench("BM_ParseExampleBatch128FashionMnist", "items_per_second"),
                   Kind::examples_rate});
  // Input pipelines against the MLP's training rate.
  const std::vector<std::pair<std::string, std::string>> pipelines = {
      {"BM_PipelineUint8", "shuffle(10000).batch(128).prefetch, uint8 Fashion-MNIST"},
      {"BM_PipelineFloat32", "shuffle(10000).batch(128).prefetch, float32 Fashion-MNIST"},
      {"BM_PipelineParallelMap", "... + map(uint8 → float32, AUTOTUNE)"}};
  for (const auto& [b, label] : pipelines) {
    specs.push_back({label, bench(b, "examples/s"), Kind::examples_rate,
                     "MLP training, 1 thread (BM_TrainMLP)", bench(mlp1, "examples_per_second")});
    if (b == "BM_PipelineUint8") specs.back().target = at_least(10, "≥ 10× MLP rate");
  }
  // Autodiff.
  for (const char* m : {"Mlp", "Cnn"}) {
    specs.push_back({std::string(m) + " backward / forward time",
                     bench(std::string("BM_") + m + "BackwardOverForward", "backward_over_forward"),
                     Kind::ratio});
    specs.back().target = {Target::value_at_most, 2.5, "≤ 2.5×"};
  }
  // Kernels.
  for (const auto& [key, run] : runs) {
    if (key.starts_with("BM_StrataMatMul/")) {
      specs.push_back({"matmul " + key.substr(key.find('/') + 1), bench(key, "real_time"),
                       Kind::seconds, "OpenBLAS cblas_sgemm",
                       bench("BM_CblasSgemm" + key.substr(key.find('/')), "real_time"),
                       at_least(0.9, "≥ 0.9")});
    } else if (key.starts_with("BM_Add64MiB/")) {
      // Both count the bytes they move, so the ratio of the rates is the
      // add's time bound (memcpy's bandwidth) over its time.
      specs.push_back({"add 64 MiB float32 " + key.substr(key.find('/') + 1),
                       bench(key, "bytes_per_second"), Kind::bytes_rate,
                       "memcpy 64 MiB (read + write bytes)",
                       bench("BM_Memcpy64MiB", "bytes_per_second"),
                       at_least(0.7, "≥ 0.7 of memcpy bandwidth")});
    } else if (key.starts_with("BM_Conv2DForward")) {
      specs.push_back({key.substr(3), bench(key, "real_time"), Kind::seconds,
                       "PyTorch F.conv2d (torch_conv.py)",
                       torch("torch_conv.py", {"torch_conv/" + key})});
    } else if (key.starts_with("BM_LocalAllReduce/")) {
      specs.push_back(
          {"LocalCollectives all-reduce ranks/MiB " + key.substr(18) + " (memory traffic)",
           bench(key, "traffic"), Kind::bytes_rate_1024, "N-way streaming add, same run",
           bench(key, "stream"), at_least(0.5, "≥ 0.5 of stream")});
    } else if (key.starts_with("BM_GlooAllReduce")) {
      const std::string arg = key == "BM_GlooAllReduceScalar" ? "0" : key.substr(17);
      specs.push_back({"GlooCollectives all-reduce, 2 ranks, " +
                           (arg == "0" ? std::string("1 element") : arg + " MiB"),
                       bench(key, "real_time"), Kind::seconds, "raw gloo::allreduce",
                       bench("BM_RawGlooAllReduce/" + arg, "real_time")});
    }
  }
  // TPU spatial partitioning.
  const std::string two = "BM_ConvStack_TwoLogicalDevices/512";
  specs.push_back({"conv stack split over 2 logical devices × 1 thread", bench(two, "real_time"),
                   Kind::seconds, "1 device × 1 thread",
                   bench("BM_ConvStack_OneDevice/512/1", "real_time"), at_least(1.6, "≥ 1.6×")});
  specs.push_back({"conv stack split over 2 logical devices × 1 thread", bench(two, "real_time"),
                   Kind::seconds, "1 device × 2 threads",
                   bench("BM_ConvStack_OneDevice/512/2", "real_time"), at_least(0.9, "≥ 0.9×")});
  // Training.
  for (const char* t : {"1", "2"}) {
    const std::string mlp = std::string("BM_TrainMLP/threads:") + t;
    const std::string cnn = std::string("BM_TrainCNN/threads:") + t;
    specs.push_back({std::string("MLP training, ") + t + " thread(s)",
                     bench(mlp, "examples_per_second"), Kind::examples_rate,
                     "PyTorch (torch_train.py)", torch("torch_train.py", {"torch_train/" + mlp}),
                     at_least(1.0, "≥ 1.0×")});
    specs.push_back(
        {std::string("CNN training, ") + t + " thread(s)", bench(cnn, "examples_per_second"),
         Kind::examples_rate, "PyTorch, best of NCHW / channels_last",
         torch("torch_train.py", {"torch_train/" + cnn, "torch_train_channels_last/" + cnn}),
         at_least(0.8, "≥ 0.8×")});
  }
  const std::string mirrored = "BM_MirroredTrainMLP/devices:2/threads:1";
  specs.push_back({"MLP MirroredStrategy, 2 devices × 1 thread",
                   bench(mirrored, "examples_per_second"), Kind::examples_rate,
                   "Strata 1 device × 2 threads",
                   bench("BM_TrainMLP/threads:2", "examples_per_second"), at_least(0.9, "≥ 0.9×")});
  specs.push_back({"MLP MirroredStrategy, 2 devices × 1 thread",
                   bench(mirrored, "examples_per_second"), Kind::examples_rate,
                   "PyTorch DDP 2 × 1 (torch_ddp.py)",
                   torch("torch_ddp.py", {"torch_ddp/" + mirrored}), at_least(2.5, "≥ 2.5×")});
  std::erase_if(specs, [&](const RowSpec& s) { return !has(s.strata.benchmark); });
  return specs;
}

Row evaluate(const RowSpec& spec, const std::map<std::string, const Run*>& runs,
             const std::map<std::string, PeerValue>& peer_values,
             const std::map<std::string, std::string>& script_status) {
  Row row{spec};
  auto field = [&](const Source& s) -> std::optional<double> {
    auto it = runs.find(s.benchmark);
    if (it == runs.end()) return std::nullopt;
    auto f = it->second->values.find(s.field);
    if (f == it->second->values.end()) return std::nullopt;
    return f->second;
  };
  const Run& run = *runs.at(spec.strata.benchmark);
  row.strata = field(spec.strata);
  if (!row.strata) {
    row.result = run.error.empty() ? "no " + spec.strata.field + " in the output"
                                   : "failed (" + run.error + ")";
    return row;
  }
  const bool rate = higher_is_better(spec.kind);
  if (!spec.peer.empty()) {
    const Source& p = spec.peer_source;
    if (!p.script.empty()) {
      for (const std::string& key : p.peer_keys) {
        auto it = peer_values.find(key);
        if (it == peer_values.end() || it->second.rate != rate) continue;
        if (!row.peer || (rate ? it->second.value > *row.peer : it->second.value < *row.peer))
          row.peer = it->second.value;
      }
      if (!row.peer) {
        auto st = script_status.find(p.script);
        row.peer_status = st == script_status.end() ? "skipped (" + p.script + " not run)"
                          : st->second == "ran"     ? "not in " + p.script + "'s output"
                                                    : st->second;
      }
    } else {
      row.peer = field(p);
      if (!row.peer) row.peer_status = "skipped (" + p.benchmark + " not measured)";
    }
    if (row.peer && *row.peer > 0 && *row.strata > 0)
      row.ratio = rate ? *row.strata / *row.peer : *row.peer / *row.strata;
  }
  const Target& t = spec.target;
  switch (t.of) {
    case Target::none: row.result = "-"; break;
    case Target::value_at_least: row.result = *row.strata >= t.bound ? "pass" : "miss"; break;
    case Target::value_at_most: row.result = *row.strata <= t.bound ? "pass" : "miss"; break;
    case Target::ratio_at_least:
      row.result = !row.ratio ? "skipped (no peer)" : *row.ratio >= t.bound ? "pass" : "miss";
      break;
  }
  return row;
}

std::string peer_cell(const Row& r) {
  if (r.spec.peer.empty()) return "-";
  return r.peer ? format(*r.peer, r.spec.kind) : r.peer_status;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

std::string load_average() {
  double load[3] = {0, 0, 0};
  if (::getloadavg(load, 3) != 3) return "unknown";
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << load[0] << ", " << load[1] << ", " << load[2];
  return os.str();
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  STRATA_CHECK(NOT_FOUND, in.good(), "bench: cannot read '", path, "'");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct ProgramStatus {
  std::string program;
  std::string status;  // "ran (N figures)", "skipped (...)", "FAILED (...)"
};

std::string markdown(const std::vector<Row>& rows, const std::vector<ProgramStatus>& programs,
                     const std::vector<PeerScript>& peers, const std::string& command,
                     const std::string& when, const std::string& load_before,
                     const std::string& load_after) {
  std::ostringstream md;
  md << "Generated by `" << command << "` on " << when << " (load average " << load_before
     << " before, " << load_after << " after; " << ::sysconf(_SC_NPROCESSORS_ONLN)
     << " CPUs). Ratio > 1: Strata is faster. Do not edit by hand: rerun the command.\n\n";
  md << "| figure | Strata | peer | peer value | ratio | target | result |\n"
     << "| --- | --- | --- | --- | --- | --- | --- |\n";
  auto cell = [](std::string s) {
    for (size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.replace(i, 1, "\\|");
    return s;
  };
  for (const Row& r : rows) {
    md << "| " << cell(r.spec.figure) << " | " << (r.strata ? format(*r.strata, r.spec.kind) : "-")
       << " | " << cell(r.spec.peer.empty() ? "-" : r.spec.peer) << " | " << cell(peer_cell(r))
       << " | " << (r.ratio ? format(*r.ratio, Kind::ratio) : "-") << " | "
       << (r.spec.target.text.empty() ? "-" : r.spec.target.text) << " | " << cell(r.result)
       << " |\n";
  }
  md << "\nPrograms: ";
  for (size_t i = 0; i < programs.size(); ++i)
    md << (i ? "; " : "") << "`" << programs[i].program << "` " << programs[i].status;
  md << ".\nPeers: ";
  if (peers.empty()) md << "none needed";
  for (size_t i = 0; i < peers.size(); ++i) {
    md << (i ? "; " : "") << "`" << peers[i].script;
    for (const std::string& a : peers[i].args) md << " " << a;
    md << "` " << peers[i].status;
  }
  md << ".\n";
  return md.str();
}

}  // namespace

std::string replace_generated_section(const std::string& document, const std::string& body,
                                      const std::string& name) {
  const size_t begin = document.find(kGeneratedBegin);
  const size_t end = document.find(kGeneratedEnd);
  const std::string begin_line =
      std::string(kGeneratedBegin) + ": `strata bench --write-docs` rewrites up to END -->\n";
  if (begin == std::string::npos && end == std::string::npos) {
    std::string out = document;
    if (!out.empty() && out.back() != '\n') out += "\n";
    return out + "\n## Generated figures (`strata bench`)\n\n" + begin_line + body + kGeneratedEnd +
           "\n";
  }
  STRATA_CHECK(FAILED_PRECONDITION, begin != std::string::npos && end != std::string::npos,
               "bench: '", name, "' has only one of the markers '", kGeneratedBegin, " ...' and '",
               kGeneratedEnd, "'; add the missing one or remove both");
  STRATA_CHECK(FAILED_PRECONDITION, begin < end, "bench: in '", name, "' the marker '",
               kGeneratedEnd, "' comes before '", kGeneratedBegin, " ...'");
  return document.substr(0, begin) + begin_line + body + document.substr(end);
}

int run_bench(const BenchOptions& o) {
  const fs::path dir = o.bench_dir.empty() ? default_bench_dir() : fs::path(o.bench_dir);
  const std::vector<fs::path> programs = bench_programs(dir);
  STRATA_CHECK(NOT_FOUND, !programs.empty(), "bench: no *_bench programs in ", dir.string(),
               "; build them (cmake --build build) or pass --bench-dir");
  std::string python = o.python;
  if (python.empty()) {
    const char* env = std::getenv("STRATA_BENCH_PYTHON");
    python = env && *env ? env : "/usr/bin/python3";
  }
  // The document is checked before the (long) run, not after it.
  if (!o.write_docs.empty()) replace_generated_section(read_whole(o.write_docs), "", o.write_docs);
  const std::string load_before = load_average();
  const std::string when = utc_now();
  const int repetitions = o.quick ? 1 : o.repetitions;
  const int program_timeout = o.quick ? 300 : 1800;

  std::string tmpl = (fs::temp_directory_path() / "strata_bench_XXXXXX").string();
  STRATA_CHECK(INTERNAL, ::mkdtemp(tmpl.data()) != nullptr, "bench: cannot create a temp folder");
  const fs::path tmp = tmpl;
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{tmp};

  std::vector<Run> all;
  std::vector<ProgramStatus> statuses;
  bool failed = false;
  for (const fs::path& p : programs) {
    const std::string name = p.filename().string();
    if (const std::string why = own_driver(name); !why.empty()) {
      statuses.push_back({name, why});
      continue;
    }
    const QuickPlan plan = o.quick ? quick_plan(name) : QuickPlan{"", ""};
    if (!plan.skip.empty() && o.filter.empty()) {
      statuses.push_back({name, plan.skip});
      continue;
    }
    std::cerr << "bench: running " << name << "\n";
    const fs::path json = tmp / (name + ".json");
    std::string cmd =
        quote(p.string()) + " --benchmark_out=" + quote(json.string()) +
        " --benchmark_out_format=json --benchmark_repetitions=" + std::to_string(repetitions);
    if (repetitions > 1) cmd += " --benchmark_report_aggregates_only=true";
    if (o.quick) cmd += " --benchmark_min_time=0.05";
    const std::string filter = o.filter.empty() ? plan.filter : o.filter;
    if (!filter.empty()) cmd += " --benchmark_filter=" + quote(filter);
    const Output out = capture(cmd + " 2>&1", program_timeout);
    if (out.status != 0) {
      failed = true;
      statuses.push_back({name, "FAILED (" + failure(out, program_timeout) + ")"});
      continue;
    }
    try {
      std::vector<Run> runs = parse_benchmark_json(name, read_whole(json.string()));
      statuses.push_back({name, str_cat("ran (", runs.size(), " figures)")});
      for (Run& r : runs) all.push_back(std::move(r));
    } catch (const nlohmann::json::exception& e) {
      failed = true;
      statuses.push_back({name, str_cat("FAILED (output is not benchmark JSON: ", e.what(), ")")});
    } catch (const NotFoundError&) {
      failed = true;
      statuses.push_back({name, "FAILED (wrote no --benchmark_out file)"});
    }
  }
  std::map<std::string, const Run*> runs;
  for (const Run& r : all) runs.emplace(r.key, &r);
  const std::vector<RowSpec> specs = row_specs(runs);

  // The python peers that some row needs, once per thread count it uses.
#ifdef STRATA_SOURCE_DIR
  const fs::path default_peers = fs::path(STRATA_SOURCE_DIR) / "bench" / "peers";
#else
  const fs::path default_peers = "bench/peers";
#endif
  const fs::path peers_dir = o.peers_dir.empty() ? default_peers : fs::path(o.peers_dir);
  std::vector<PeerScript> scripts;
  auto need = [&](const std::string& script, std::vector<std::string> args) {
    for (const PeerScript& s : scripts)
      if (s.script == script && s.args == args) return;
    scripts.push_back({script, std::move(args)});
  };
  for (const RowSpec& s : specs) {
    const std::string& script = s.peer_source.script;
    if (script.empty()) continue;
    const std::string& b = s.strata.benchmark;
    const std::string threads = b.substr(b.rfind("threads:") + 8);
    if (script == "torch_conv.py") {
      need(script, {"--threads", threads});
    } else if (script == "torch_train.py") {
      need(script, {"--threads", threads, "--models", "mlp,cnn"});
      if (b.starts_with("BM_TrainCNN"))
        need(script, {"--threads", threads, "--models", "cnn", "--channels-last"});
    } else {
      need(script, {"--processes", "2", "--threads", threads});
    }
  }
  std::map<std::string, PeerValue> peer_values;
  std::map<std::string, std::string> script_status;
  for (PeerScript& s : scripts) {
    const fs::path path = peers_dir / s.script;
    s.status = why_not_runnable(python, path);
    if (s.status.empty()) {
      std::vector<std::string> args = s.args;
      if (o.quick) {
        for (const char* a : {"--repetitions", "1", "--min-time"}) args.push_back(a);
        args.push_back(s.script == "torch_conv.py" ? "0.2" : "0.5");
        if (s.script != "torch_conv.py")
          for (const char* a : {"--warmup", "2"}) args.push_back(a);
      } else {
        args.push_back("--repetitions");
        args.push_back(std::to_string(repetitions));
      }
      std::string cmd = "OMP_WAIT_POLICY=PASSIVE " + quote(python) + " " + quote(path.string());
      for (const std::string& a : args) cmd += " " + quote(a);
      std::cerr << "bench: running peer " << s.script << "\n";
      const int timeout = o.quick ? 180 : 900;
      const Output out = capture(cmd + " 2>&1", timeout);
      if (out.status != 0) {
        s.status = "failed (" + failure(out, timeout) + ")";
      } else {
        const int threads =
            std::stoi(args[std::find(args.begin(), args.end(), "--threads") - args.begin() + 1]);
        if (s.script == "torch_conv.py") {
          parse_conv_text(out.text, threads, peer_values);
        } else {
          parse_json_lines(out.text, fs::path(s.script).stem().string(), peer_values);
        }
        s.status = "ran";
      }
      s.args = args;
    }
    // A script is "ran" only when every run of it ran.
    auto [it, inserted] = script_status.emplace(s.script, s.status);
    if (!inserted && s.status != "ran") it->second = s.status;
  }

  std::vector<Row> rows;
  rows.reserve(specs.size());
  for (const RowSpec& s : specs) rows.push_back(evaluate(s, runs, peer_values, script_status));
  const std::string load_after = load_average();

  // The console table.
  std::vector<std::array<std::string, 7>> cells = {
      {"figure", "strata", "peer", "peer value", "ratio", "target", "result"}};
  for (const Row& r : rows) {
    cells.push_back({r.spec.figure, r.strata ? format(*r.strata, r.spec.kind) : "-",
                     r.spec.peer.empty() ? "-" : r.spec.peer, peer_cell(r),
                     r.ratio ? format(*r.ratio, Kind::ratio) : "-",
                     r.spec.target.text.empty() ? "-" : r.spec.target.text, r.result});
  }
  std::array<size_t, 7> width{};
  auto display_width = [](const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;  // UTF-8 code points
    return n;
  };
  for (const auto& line : cells)
    for (size_t i = 0; i < 7; ++i) width[i] = std::max(width[i], display_width(line[i]));
  std::ostream& out = std::cout;
  for (const auto& line : cells) {
    for (size_t i = 0; i < 7; ++i) {
      out << line[i];
      if (i < 6) out << std::string(width[i] - display_width(line[i]) + 2, ' ');
    }
    out << "\n";
  }
  if (rows.empty()) out << "(no figure of the table was measured)\n";
  out << "\nprograms (" << dir.string() << ")\n";
  for (const ProgramStatus& p : statuses) out << "  " << p.program << ": " << p.status << "\n";
  out << "peers (" << python << ", " << peers_dir.string() << ")\n";
  if (scripts.empty()) out << "  none needed by the figures measured\n";
  for (const PeerScript& s : scripts) {
    out << "  " << s.script;
    for (const std::string& a : s.args) out << " " << a;
    out << ": " << s.status << "\n";
  }
  out << "load average " << load_before << " before, " << load_after << " after\n";

  std::string command = "strata bench";
  if (o.quick) command += " --quick";
  if (!o.filter.empty()) command += " --filter '" + o.filter + "'";
  if (!o.quick && o.repetitions != 3) command += " --repetitions " + std::to_string(o.repetitions);

  if (!o.out.empty()) {
    nlohmann::json j;
    j["generated"] = when;
    j["command"] = command;
    j["quick"] = o.quick;
    j["repetitions"] = repetitions;
    j["load_average"] = {{"before", load_before}, {"after", load_after}};
    j["bench_dir"] = dir.string();
    j["python"] = python;
    j["programs"] = nlohmann::json::array();
    for (const ProgramStatus& p : statuses)
      j["programs"].push_back({{"program", p.program}, {"status", p.status}});
    j["peers"] = nlohmann::json::array();
    for (const PeerScript& s : scripts)
      j["peers"].push_back({{"script", s.script}, {"args", s.args}, {"status", s.status}});
    j["rows"] = nlohmann::json::array();
    for (const Row& r : rows) {
      nlohmann::json e = {{"figure", r.spec.figure},
                          {"benchmark", r.spec.strata.benchmark},
                          {"field", r.spec.strata.field},
                          {"result", r.result}};
      if (r.strata) e["strata"] = *r.strata;
      if (!r.spec.peer.empty()) e["peer"] = r.spec.peer;
      if (r.peer) e["peer_value"] = *r.peer;
      if (!r.peer_status.empty()) e["peer_status"] = r.peer_status;
      if (r.ratio) e["ratio"] = *r.ratio;
      if (!r.spec.target.text.empty()) e["target"] = r.spec.target.text;
      j["rows"].push_back(e);
    }
    j["figures"] = nlohmann::json::array();
    for (const Run& r : all) {
      nlohmann::json e = {{"program", r.program}, {"name", r.name}, {"values", r.values}};
      if (!r.error.empty()) e["error"] = r.error;
      j["figures"].push_back(e);
    }
    write_file_atomically(o.out, j.dump(2) + "\n");
    out << "wrote " << o.out << "\n";
  }
  if (!o.write_docs.empty()) {
    const std::string body =
        markdown(rows, statuses, scripts, command, when, load_before, load_after);
    write_file_atomically(o.write_docs,
                          replace_generated_section(read_whole(o.write_docs), body, o.write_docs));
    out << "rewrote the generated section of " << o.write_docs << "\n";
  }
  return failed ? 1 : 0;
}

}  // namespace strata::tools
