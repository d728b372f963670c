#pragma once
// `strata bench`: runs the project's Google Benchmark programs and the peer
// comparisons that are installed, and prints one table.
//
//   strata bench --quick                      # short runs
//   strata bench --out bench.json             # also the raw figures as JSON
//
// Figures: every executable named *_bench in the benchmark folder (default:
// build/bench next to this program's build/tools/strata/strata), run with
// --benchmark_format=json. Peers:
//   * inside the programs: BM_StrataMatMul vs BM_CblasSgemm (OpenBLAS) at the
//     same arguments, BM_Add16MiB vs BM_Memcpy16MiB (memory bandwidth);
//   * bench/peers/*.py: run when every module they import is installed
//     (python3-torch for PyTorch), else reported "skipped (not installed: ...)".
//     torch_conv.py's figures are paired with BM_Conv2DForward /
//     BM_Conv2DForwardBackward at the same layer and thread count; any other
//     script is run with --threads 1 and 2 and is read as JSON lines naming
//     the figure they match ({"figure": "BM_TrainMLP/threads:1",
//     "examples_per_second": ...}, as torch_train.py prints).
// ratio = peer time / Strata time, or Strata's examples/s / the peer's when
// both report a rate: above 1 means Strata is faster. Nothing is
// estimated: a figure whose peer did not run has no ratio.
//
// Returns 0, or 1 when a benchmark program failed (the others still run).

#include <string>

namespace strata::tools {

struct BenchOptions {
  bool quick = false;          // --benchmark_min_time=0.05 and one peer repetition
  std::string bench_dir = "";  // "" = <this program's folder>/../../bench
  std::string peers_dir = "";  // "" = the source tree's bench/peers
  std::string filter = "";     // --benchmark_filter for every program; "" = all
  std::string out = "";        // JSON file to write; "" = none
};

int run_bench(const BenchOptions& options);

}  // namespace strata::tools
