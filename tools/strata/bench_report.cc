#include "tools/strata/bench_report.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "strata/base/errors.h"

namespace strata::tools::bench {

const char* const kGeneratedBegin = "<!-- BEGIN strata bench generated";
const char* const kGeneratedEnd = "<!-- END strata bench generated -->";

namespace {

std::string peer_cell(const Row& r) {
  if (r.spec.peer.empty()) return "-";
  return r.peer ? format(*r.peer, r.spec.kind) : r.peer_status;
}

}  // namespace

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
    case Kind::gflops_rate: os << v << " GFLOP/s"; break;
    case Kind::ratio: os << std::fixed << std::setprecision(2) << v << "×"; break;
    case Kind::count:  // per step: whole from 100 on, else 3 significant digits
      if (v >= 100) os << std::fixed << std::setprecision(0);
      os << v;
      break;
  }
  return os.str();
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

void print_table(const Report& report, std::ostream& out) {
  std::vector<std::array<std::string, 7>> cells = {
      {"figure", "strata", "peer", "peer value", "ratio", "target", "result"}};
  for (const Row& r : report.rows) {
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
  for (const auto& line : cells) {
    for (size_t i = 0; i < 7; ++i) {
      out << line[i];
      if (i < 6) out << std::string(width[i] - display_width(line[i]) + 2, ' ');
    }
    out << "\n";
  }
  if (report.rows.empty()) out << "(no figure of the table was measured)\n";
  out << "\nprograms (" << report.bench_dir << ")\n";
  for (const ProgramStatus& p : report.programs)
    out << "  " << p.program << ": " << p.status << "\n";
  out << "peers (" << report.python << ", " << report.peers_dir << ")\n";
  if (report.peers.empty()) out << "  none needed by the figures measured\n";
  for (const PeerScript& s : report.peers) {
    out << "  " << s.script;
    for (const std::string& a : s.args) out << " " << a;
    out << ": " << s.status << "\n";
  }
  out << "load average " << report.load_before << " before, " << report.load_after << " after\n";
}

std::string to_json(const Report& report) {
  nlohmann::json j;
  j["generated"] = report.when;
  j["command"] = report.command;
  j["quick"] = report.quick;
  j["repetitions"] = report.repetitions;
  j["load_average"] = {{"before", report.load_before}, {"after", report.load_after}};
  j["bench_dir"] = report.bench_dir;
  j["python"] = report.python;
  j["programs"] = nlohmann::json::array();
  for (const ProgramStatus& p : report.programs)
    j["programs"].push_back({{"program", p.program}, {"status", p.status}});
  j["peers"] = nlohmann::json::array();
  for (const PeerScript& s : report.peers)
    j["peers"].push_back({{"script", s.script}, {"args", s.args}, {"status", s.status}});
  j["rows"] = nlohmann::json::array();
  for (const Row& r : report.rows) {
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
  for (const Run& r : report.runs) {
    nlohmann::json e = {{"program", r.program}, {"name", r.name}, {"values", r.values}};
    if (!r.error.empty()) e["error"] = r.error;
    j["figures"].push_back(e);
  }
  return j.dump(2) + "\n";
}

std::string markdown(const Report& report) {
  const std::vector<Row>& rows = report.rows;
  const std::vector<ProgramStatus>& programs = report.programs;
  const std::vector<PeerScript>& peers = report.peers;
  std::ostringstream md;
  md << "Generated by `" << report.command << "` on " << report.when << " (load average "
     << report.load_before << " before, " << report.load_after << " after; "
     << ::sysconf(_SC_NPROCESSORS_ONLN)
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

}  // namespace strata::tools::bench
