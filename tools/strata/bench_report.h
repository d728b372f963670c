#pragma once
// The reporting half of `strata bench`: evaluates each row of the table
// (bench_targets.h) against the measured runs and the peers' values, and
// renders the result as a console table, JSON, or the Markdown section that
// --write-docs puts into docs/PERFORMANCE.md.
//
//   bench::Report report{...};  // runs, statuses, rows, ...
//   for (const auto& spec : bench::row_specs(runs))
//     report.rows.push_back(bench::evaluate(spec, runs, peer_values, script_status));
//   bench::print_table(report, std::cout);
//   write(path, bench::replace_generated_section(old_text, bench::markdown(report), path));
//
// Pure functions over their arguments; safe from any thread.

#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tools/strata/bench_runner.h"
#include "tools/strata/bench_targets.h"

namespace strata::tools::bench {

// `v` with a unit fitting `kind` ("12.3 µs", "1.5 GB/s", "750k ex/s", "1.25×").
std::string format(double v, Kind kind);

struct Row {
  RowSpec spec;
  std::optional<double> strata = std::nullopt, peer = std::nullopt, ratio = std::nullopt;
  std::string peer_status = "";  // why the peer value is missing
  std::string result = "";       // pass / miss / - / skipped (...)
};

// The row of `spec`: Strata's value from `runs`, the peer's from `runs` or
// `peer_values` (by peer key), ratio > 1 when Strata is faster, and the result
// against the target. `script_status` holds each peer script's status ("ran",
// "skipped (...)") for the reason a peer value is missing. `runs` must hold
// spec.strata.benchmark (row_specs() keeps only such rows).
Row evaluate(const RowSpec& spec, const std::map<std::string, const Run*>& runs,
             const std::map<std::string, PeerValue>& peer_values,
             const std::map<std::string, std::string>& script_status);

struct ProgramStatus {
  std::string program;
  std::string status;  // "ran (N figures)", "skipped (...)", "FAILED (...)"
};

// Everything one `strata bench` invocation measured and how.
struct Report {
  std::string command;  // the command line that regenerates it
  std::string when;     // UTC start time
  std::string load_before, load_after;
  bool quick = false;
  int repetitions = 0;
  std::string bench_dir, python, peers_dir;
  std::vector<Run> runs;
  std::vector<ProgramStatus> programs;
  std::vector<PeerScript> peers;
  std::vector<Row> rows;
};

// The table, then the programs' and peers' statuses and the load average.
void print_table(const Report& report, std::ostream& out);
// Every row and every raw figure, as indented JSON (the --out file).
std::string to_json(const Report& report);
// The table as Markdown with a line saying how it was generated (--write-docs).
std::string markdown(const Report& report);

// The markers of the generated section and the replacement of its body:
// returns `document` with the text between the markers replaced by `body` (or
// with a new section holding the markers appended when it has neither).
// FailedPreconditionError naming `name` when only one marker is present or END
// comes before BEGIN.
extern const char* const kGeneratedBegin;
extern const char* const kGeneratedEnd;
std::string replace_generated_section(const std::string& document, const std::string& body,
                                      const std::string& name);

}  // namespace strata::tools::bench
