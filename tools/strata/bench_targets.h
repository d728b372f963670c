#pragma once
// The rows of the `strata bench` table: which benchmark field each figure
// reads, what it is compared with and the target it must meet. The rows are
// data, tools/strata/bench_targets.json, which the build embeds in the program:
//
//   {"rows": [
//     {"figure": "TFRecord read + CRC ...",        // the table's first column
//      "benchmark": "BM_TFRecordReadVerified",     // run key (no /real_time, /iterations:N)
//      "field": "bytes_per_second",                // "real_time" (s), a counter, ...
//      "kind": "bytes_rate",                       // seconds | bytes_rate | bytes_rate_1024
//                                                  //   | examples_rate | gflops_rate
//                                                  //   | ratio | count
//      "peer": "plain read() of the same file",    // optional label of the comparison
//      "peer_benchmark": "BM_PlainRead", "peer_field": "bytes_per_second",
//      //   or a Python peer: "peer_script": "torch_train.py", "peer_keys": ["torch_train/F"]
//      //   (the best of the keys' values is used)
//      "target": {"value_at_least": 1e9, "text": "≥ 1 GB/s"}},
//                // or value_at_most, or ratio_at_least (on the ratio to the peer)
//     {"for_each_benchmark": [                     // one row per measured run key, in key
//       {"prefix": "BM_StrataMatMul/", ...}]}      // order, from the first prefix it starts
//   ]}                                             // with; strings may use {key}, {args}
//                                                  // (after the first '/') and {name}
//                                                  // (without "BM_")
// A row whose benchmark was not measured is left out of the table.

#include <map>
#include <string>
#include <vector>

#include "tools/strata/bench_runner.h"

namespace strata::tools::bench {

// gflops_rate: a value already in GFLOP/s (a benchmark's gflops counters).
enum class Kind { seconds, bytes_rate, examples_rate, ratio, bytes_rate_1024, count, gflops_rate };

// Rates and ratios are better higher; times and counts (allocations per step) lower.
bool higher_is_better(Kind k);

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

// The rows described by `json_text` (the format above) for the measured `runs`,
// by run key. InvalidArgumentError naming `name`, the row and the bad field
// when the text does not follow the format.
std::vector<RowSpec> row_specs(const std::string& json_text, const std::string& name,
                               const std::map<std::string, const Run*>& runs);

// The rows of the bench_targets.json the program was built with.
std::vector<RowSpec> row_specs(const std::map<std::string, const Run*>& runs);

}  // namespace strata::tools::bench
