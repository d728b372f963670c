#include "tools/strata/bench_command.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
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
#include "strata/base/str_cat.h"

namespace strata::tools {

namespace {

namespace fs = std::filesystem;

struct Figure {
  std::string program = "";
  std::string name = "";
  double seconds = 0;  // real time per iteration (median over repetitions)
  std::optional<double> examples_per_second =
      std::nullopt;  // the benchmark's counter, when it has one
};

struct Comparison {
  std::string figure = "";
  double figure_seconds = 0;
  std::string peer = "";  // what the peer is
  std::optional<double> peer_seconds = std::nullopt;
  std::string note = "";  // why there is no ratio
  // Throughput comparisons (training): examples/s of both; the ratio is then
  // Strata's rate / the peer's, which reads the same way (> 1: Strata faster).
  std::optional<double> figure_rate = std::nullopt;
  std::optional<double> peer_rate = std::nullopt;

  std::optional<double> ratio() const {
    if (figure_rate && peer_rate && *peer_rate > 0) return *figure_rate / *peer_rate;
    if (peer_seconds && figure_seconds > 0) return *peer_seconds / figure_seconds;
    return std::nullopt;
  }
};

struct PeerStatus {
  std::string script = "";
  std::string status = "";
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

// Runs `command` through the shell; stdout is captured.
Output capture(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  STRATA_CHECK(INTERNAL, pipe != nullptr, "bench: cannot run ", command);
  Output out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.text.append(buf.data(), n);
  const int raw = ::pclose(pipe);
  out.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return out;
}

double to_seconds(double value, const std::string& unit) {
  if (unit == "ns") return value * 1e-9;
  if (unit == "us") return value * 1e-6;
  if (unit == "ms") return value * 1e-3;
  return value;
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

// Google Benchmark's JSON: iteration runs, several per name with repetitions.
std::vector<Figure> parse_benchmark_json(const std::string& program, const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  std::map<std::string, std::vector<double>> runs, rates;
  std::vector<std::string> order;
  for (const nlohmann::json& b : j.at("benchmarks")) {
    if (b.value("run_type", "iteration") != "iteration" || b.contains("error_occurred")) continue;
    const std::string name = b.at("name").get<std::string>();
    if (!runs.count(name)) order.push_back(name);
    runs[name].push_back(to_seconds(b.at("real_time").get<double>(), b.value("time_unit", "ns")));
    if (b.contains("examples_per_second"))
      rates[name].push_back(b.at("examples_per_second").get<double>());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<Figure> figures;
  for (const std::string& name : order) {
    Figure f{program, name, median(runs[name])};
    if (rates.count(name)) f.examples_per_second = median(rates[name]);
    figures.push_back(f);
  }
  return figures;
}

// The part of a benchmark name after its function: "/m:128/k:784/.../real_time".
std::string arguments(const std::string& name) {
  const size_t slash = name.find('/');
  return slash == std::string::npos ? "" : name.substr(slash);
}
std::string function(const std::string& name) { return name.substr(0, name.find('/')); }

// Peers measured by the benchmark programs themselves.
void in_program_peers(const std::vector<Figure>& figures, std::vector<Comparison>& out) {
  std::map<std::string, double> by_name;
  for (const Figure& f : figures) by_name[f.name] = f.seconds;
  for (const Figure& f : figures) {
    const std::string fn = function(f.name);
    if (fn == "BM_StrataMatMul") {
      auto it = by_name.find("BM_CblasSgemm" + arguments(f.name));
      out.push_back({f.name, f.seconds, "OpenBLAS cblas_sgemm",
                     it == by_name.end() ? std::nullopt : std::optional<double>(it->second),
                     it == by_name.end() ? "peer not measured" : ""});
    } else if (fn == "BM_Add16MiB") {
      std::optional<double> peer;
      for (const auto& [name, s] : by_name) {
        if (function(name) == "BM_Memcpy16MiB") peer = s;
      }
      out.push_back({f.name, f.seconds, "memcpy 16 MiB (memory bandwidth)", peer,
                     peer ? "" : "peer not measured"});
    }
  }
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

std::vector<std::string> missing_modules(const std::vector<std::string>& modules) {
  std::vector<std::string> missing;
  for (const std::string& mod : modules) {
    if (capture("python3 -c " + quote("import " + mod) + " >/dev/null 2>&1").status != 0)
      missing.push_back(mod);
  }
  return missing;
}

// bench/peers/torch_conv.py: "layer L forward: median wall X ms, ..." per thread count.
void torch_conv_peer(const fs::path& script, bool quick, const std::vector<Figure>& figures,
                     std::vector<Comparison>& out, std::vector<PeerStatus>& statuses) {
  const std::regex line_re(R"(layer (\d+) (forward\+backward|forward): median wall ([0-9.]+) ms)");
  for (int threads : {1, 2}) {
    const std::string cmd = "OMP_WAIT_POLICY=PASSIVE python3 " + quote(script.string()) +
                            " --threads " + std::to_string(threads) +
                            (quick ? " --repetitions 1 --min-time 0.2" : "") + " 2>&1";
    const Output o = capture(cmd);
    if (o.status != 0) {
      statuses.push_back({script.filename().string(),
                          str_cat("failed (exit ", o.status, ") at --threads ", threads)});
      return;
    }
    for (auto it = std::sregex_iterator(o.text.begin(), o.text.end(), line_re);
         it != std::sregex_iterator(); ++it) {
      const std::string layer = (*it)[1], kind = (*it)[2];
      const double peer_s = std::stod((*it)[3]) * 1e-3;
      const std::string prefix =
          (kind == "forward" ? "BM_Conv2DForward" : "BM_Conv2DForwardBackward") +
          std::string("/layer:") + layer + "/threads:" + std::to_string(threads);
      for (const Figure& f : figures) {
        if (f.name == prefix || f.name.starts_with(prefix + "/")) {
          out.push_back({f.name, f.seconds, "PyTorch F.conv2d " + kind, peer_s, ""});
        }
      }
    }
  }
  statuses.push_back({script.filename().string(), "ran"});
}

// Peers that print one JSON object per line naming the figure they measured
// ({"figure": "BM_TrainMLP/threads:1", "examples_per_second": ..., ...}, as
// bench/peers/torch_train.py does), run once per thread count. Returns false
// when the script printed no such line.
bool json_lines_peer(const fs::path& script, bool quick, const std::vector<Figure>& figures,
                     std::vector<Comparison>& out, std::vector<PeerStatus>& statuses) {
  int understood = 0;
  for (int threads : {1, 2}) {
    const std::string cmd = "python3 " + quote(script.string()) + " --threads " +
                            std::to_string(threads) +
                            (quick ? " --repetitions 1 --min-time 0.3" : "") + " 2>/dev/null";
    const Output o = capture(cmd);
    if (o.status != 0) {
      statuses.push_back({script.filename().string(),
                          str_cat("failed (exit ", o.status, ") at --threads ", threads)});
      return true;
    }
    std::istringstream lines(o.text);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty() || line[0] != '{') continue;
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.contains("figure")) continue;
      const std::string figure = j.at("figure").get<std::string>();
      const std::string peer =
          j.value("peer", script.stem().string()) +
          (j.contains("torch") ? " (PyTorch " + j.at("torch").get<std::string>() + ")" : "");
      for (const Figure& f : figures) {
        if (f.name != figure && !f.name.starts_with(figure + "/")) continue;
        Comparison c{f.name, f.seconds, peer};
        if (j.contains("seconds_per_step")) c.peer_seconds = j.at("seconds_per_step").get<double>();
        if (j.contains("examples_per_second"))
          c.peer_rate = j.at("examples_per_second").get<double>();
        c.figure_rate = f.examples_per_second;
        if (!c.ratio()) c.note = "no comparable measure";
        out.push_back(c);
        ++understood;
      }
    }
  }
  if (understood == 0) return false;
  statuses.push_back({script.filename().string(), "ran"});
  return true;
}

std::string human_time(double s) {
  std::ostringstream os;
  os << std::setprecision(3);
  if (s < 1e-6) {
    os << s * 1e9 << " ns";
  } else if (s < 1e-3) {
    os << s * 1e6 << " us";
  } else if (s < 1) {
    os << s * 1e3 << " ms";
  } else {
    os << s << " s";
  }
  return os.str();
}

void write_atomically(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    STRATA_CHECK(PERMISSION_DENIED, f.good(), "bench: cannot write '", path, "'");
    f << contents;
    f.flush();
    STRATA_CHECK(DATA_LOSS, f.good(), "bench: writing '", path, "' failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    STRATA_CHECK(PERMISSION_DENIED, false, "bench: cannot write '", path, "'");
  }
}

}  // namespace

int run_bench(const BenchOptions& o) {
  const fs::path dir = o.bench_dir.empty() ? default_bench_dir() : fs::path(o.bench_dir);
  const std::vector<fs::path> programs = bench_programs(dir);
  STRATA_CHECK(NOT_FOUND, !programs.empty(), "bench: no *_bench programs in ", dir.string(),
               "; build them (cmake --build build) or pass --bench-dir");
  std::vector<Figure> figures;
  std::vector<std::pair<std::string, std::string>> failures;
  for (const fs::path& p : programs) {
    std::cerr << "bench: running " << p.filename().string() << "\n";
    std::string cmd = quote(p.string()) + " --benchmark_format=json";
    if (o.quick) cmd += " --benchmark_min_time=0.05";
    if (!o.filter.empty()) cmd += " --benchmark_filter=" + quote(o.filter);
    const Output out = capture(cmd + " 2>/dev/null");
    if (out.status != 0) {
      failures.push_back({p.filename().string(), str_cat("exit status ", out.status)});
      continue;
    }
    try {
      for (Figure& f : parse_benchmark_json(p.filename().string(), out.text))
        figures.push_back(std::move(f));
    } catch (const nlohmann::json::exception& e) {
      failures.push_back(
          {p.filename().string(), str_cat("output is not benchmark JSON: ", e.what())});
    }
  }

  std::vector<Comparison> comparisons;
  in_program_peers(figures, comparisons);
  std::vector<PeerStatus> peers;
#ifdef STRATA_SOURCE_DIR
  const fs::path peers_dir =
      o.peers_dir.empty() ? fs::path(STRATA_SOURCE_DIR) / "bench" / "peers" : fs::path(o.peers_dir);
#else
  const fs::path peers_dir = o.peers_dir;
#endif
  std::vector<fs::path> scripts;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(peers_dir, ec)) {
    if (e.path().extension() == ".py") scripts.push_back(e.path());
  }
  std::sort(scripts.begin(), scripts.end());
  for (const fs::path& script : scripts) {
    const std::vector<std::string> missing = missing_modules(imported_modules(script));
    if (!missing.empty()) {
      std::string names;
      for (const std::string& m : missing) names += (names.empty() ? "" : ", ") + m;
      peers.push_back({script.filename().string(), "skipped (not installed: " + names + ")"});
    } else if (script.filename() == "torch_conv.py") {
      std::cerr << "bench: running peer " << script.filename().string() << "\n";
      torch_conv_peer(script, o.quick, figures, comparisons, peers);
    } else {
      std::cerr << "bench: running peer " << script.filename().string() << "\n";
      if (!json_lines_peer(script, o.quick, figures, comparisons, peers)) {
        peers.push_back(
            {script.filename().string(), "ran, but printed no JSON line naming a figure"});
      }
    }
  }

  std::ostream& out = std::cout;
  out << "figures (" << figures.size() << " from " << programs.size() - failures.size() << " of "
      << programs.size() << " programs in " << dir.string() << ")\n";
  size_t width = 6;
  for (const Figure& f : figures) width = std::max(width, f.name.size());
  for (const Figure& f : figures) {
    out << "  " << std::left << std::setw(static_cast<int>(width)) << f.name << "  "
        << human_time(f.seconds) << "\n";
  }
  out << "\ncomparisons (ratio = peer time / strata time; > 1: strata is faster)\n";
  if (comparisons.empty()) out << "  none (no figure has an installed peer)\n";
  for (const Comparison& c : comparisons) {
    out << "  " << std::left << std::setw(static_cast<int>(width)) << c.figure << "  "
        << human_time(c.figure_seconds) << "  vs " << c.peer << " ";
    if (c.ratio()) {
      if (c.figure_rate && c.peer_rate) {
        out << std::fixed << std::setprecision(0) << *c.peer_rate << " examples/s vs strata "
            << *c.figure_rate;
      } else {
        out << human_time(*c.peer_seconds);
      }
      out << "  ratio " << std::fixed << std::setprecision(2) << *c.ratio() << std::defaultfloat
          << "\n";
    } else {
      out << "-  (" << c.note << ")\n";
    }
  }
  out << "\npeers\n";
  if (peers.empty()) out << "  none found in " << peers_dir.string() << "\n";
  for (const PeerStatus& p : peers) out << "  " << p.script << ": " << p.status << "\n";
  for (const auto& [program, why] : failures) out << "FAILED " << program << ": " << why << "\n";

  if (!o.out.empty()) {
    nlohmann::json j;
    j["bench_dir"] = dir.string();
    j["figures"] = nlohmann::json::array();
    for (const Figure& f : figures)
      j["figures"].push_back({{"program", f.program}, {"name", f.name}, {"seconds", f.seconds}});
    j["comparisons"] = nlohmann::json::array();
    for (const Comparison& c : comparisons) {
      nlohmann::json e = {{"figure", c.figure}, {"seconds", c.figure_seconds}, {"peer", c.peer}};
      if (c.peer_seconds) e["peer_seconds"] = *c.peer_seconds;
      if (c.figure_rate) e["examples_per_second"] = *c.figure_rate;
      if (c.peer_rate) e["peer_examples_per_second"] = *c.peer_rate;
      if (c.ratio()) {
        e["ratio"] = *c.ratio();
      } else {
        e["note"] = c.note;
      }
      j["comparisons"].push_back(e);
    }
    j["peers"] = nlohmann::json::array();
    for (const PeerStatus& p : peers)
      j["peers"].push_back({{"script", p.script}, {"status", p.status}});
    j["failures"] = nlohmann::json::array();
    for (const auto& [program, why] : failures)
      j["failures"].push_back({{"program", program}, {"error", why}});
    write_atomically(o.out, j.dump(2) + "\n");
    out << "wrote " << o.out << "\n";
  }
  return failures.empty() ? 0 : 1;
}

}  // namespace strata::tools
