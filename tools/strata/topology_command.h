#pragma once
// `strata topology`: prints the local TPU system's mesh and a device assignment
// as grids (strata/tpu/grid.h describes the format).
//
//   strata topology --tpu-topology 2x2x1x2 --computation-shape 1,1,1,2 --num-replicas 4

#include <string>
#include <vector>

namespace strata::tools {

struct TopologyOptions {
  std::string tpu_topology;            // "XxYxZxC"; empty = from the devices
  int devices = 0;                     // logical devices to assume; 0 = this machine's
  std::vector<int> computation_shape;  // empty = the default assignment (one core per replica)
  std::vector<int> computation_stride;
  int num_replicas = 0;  // 0 = as many as fit
};

// Returns the text to print; throws InvalidArgumentError for invalid options.
std::string run_topology(const TopologyOptions& options);

}  // namespace strata::tools
