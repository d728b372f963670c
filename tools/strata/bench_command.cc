#include "tools/strata/bench_command.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/str_cat.h"
#include "tools/strata/bench_report.h"
#include "tools/strata/bench_runner.h"
#include "tools/strata/bench_targets.h"

namespace strata::tools {

using bench::bench_programs;
using bench::capture;
using bench::default_bench_dir;
using bench::evaluate;
using bench::failure;
using bench::markdown;
using bench::Output;
using bench::own_driver;
using bench::parse_benchmark_json;
using bench::parse_conv_text;
using bench::parse_json_lines;
using bench::PeerScript;
using bench::PeerValue;
using bench::print_table;
using bench::ProgramStatus;
using bench::quick_plan;
using bench::QuickPlan;
using bench::quote;
using bench::replace_generated_section;
using bench::Report;
using bench::Row;
using bench::row_specs;
using bench::RowSpec;
using bench::Run;
using bench::to_json;
using bench::why_not_runnable;

namespace {

namespace fs = std::filesystem;

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

}  // namespace

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

  const TempDir scratch("strata_bench");
  const fs::path tmp = scratch.path();

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
    // Google Benchmark exits 0 with an empty output file when --filter
    // matches none of a program's benchmarks: nothing to read, nothing failed.
    if (!filter.empty() && out.text.find("Failed to match any benchmarks") != std::string::npos) {
      statuses.push_back({name, "ran no benchmark (none matches the filter)"});
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

  std::string command = "strata bench";
  if (o.quick) command += " --quick";
  if (!o.filter.empty()) command += " --filter '" + o.filter + "'";
  if (!o.quick && o.repetitions != 3) command += " --repetitions " + std::to_string(o.repetitions);

  Report report{command,
                when,
                load_before,
                load_after,
                o.quick,
                repetitions,
                dir.string(),
                python,
                peers_dir.string(),
                std::move(all),
                std::move(statuses),
                std::move(scripts),
                std::move(rows)};
  std::ostream& out = std::cout;
  print_table(report, out);

  if (!o.out.empty()) {
    write_file_atomically(o.out, to_json(report));
    out << "wrote " << o.out << "\n";
  }
  if (!o.write_docs.empty()) {
    const std::string body = markdown(report);
    write_file_atomically(o.write_docs,
                          replace_generated_section(read_whole(o.write_docs), body, o.write_docs));
    out << "rewrote the generated section of " << o.write_docs << "\n";
  }
  return failed ? 1 : 0;
}

}  // namespace strata::tools
