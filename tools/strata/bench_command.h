#pragma once
// `strata bench`: runs the project's Google Benchmark programs and the peer
// comparisons that are installed, and prints one table of figure, Strata's
// value, peer, peer's value, ratio, target and pass/miss.
//
//   strata bench --quick                          # a couple of minutes
//   strata bench --out bench.json                 # also everything as JSON
//   strata bench --write-docs docs/PERFORMANCE.md # regenerate its marked section
//
// Figures: every executable named *_bench in the benchmark folder (default:
// build/bench next to this program's build/tools/strata/strata), run with
// --benchmark_out=<file> --benchmark_out_format=json; each figure is the median
// of its repetitions (Google Benchmark's "median" aggregate when present).
// Peers:
//   * measured inside the programs: OpenBLAS cblas_sgemm (kernels_bench), memcpy
//     and an N-way streaming add (memory bandwidth), raw gloo::allreduce
//     (collective_bench), plain read() of the TFRecord file (io_bench);
//   * bench/peers/*.py (PyTorch from Debian's python3-torch), run with --python
//     (default $STRATA_BENCH_PYTHON, else /usr/bin/python3) when the interpreter
//     exists and every module the script imports is installed; otherwise the
//     rows that need them say "skipped (<reason>)". Nothing is estimated: a row
//     whose peer did not run has no ratio.
// ratio: > 1 means Strata is faster (peer time / Strata time, or Strata's rate
// / the peer's); for rows with a target on the ratio, "pass" or "miss".
//
// --write-docs FILE replaces the text between the lines
//   <!-- BEGIN strata bench generated ... -->  and  <!-- END strata bench generated -->
// (appending a new section with both markers when the file has neither) and
// leaves the rest of the file as it was.
//
// Returns 0, or 1 when a benchmark program failed (the others still run).
// bench_runner.h runs the programs and peers, bench_targets.json lists the
// table's rows, bench_report.h evaluates and renders them.

#include <string>

namespace strata::tools {

struct BenchOptions {
  bool quick = false;           // --benchmark_min_time=0.05, 1 repetition, short peers
  int repetitions = 3;          // --benchmark_repetitions (1 with --quick)
  std::string bench_dir = "";   // "" = <this program's folder>/../../bench
  std::string peers_dir = "";   // "" = the source tree's bench/peers
  std::string python = "";      // "" = $STRATA_BENCH_PYTHON, else /usr/bin/python3
  std::string filter = "";      // --benchmark_filter for every program; "" = all
  std::string out = "";         // JSON file to write; "" = none
  std::string write_docs = "";  // Markdown file whose generated section is replaced
};

int run_bench(const BenchOptions& options);

}  // namespace strata::tools
