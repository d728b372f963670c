#include "strata/tpu/local_topology.h"

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/core/config.h"

namespace strata::tpu::experimental {

namespace {

constexpr int64_t kMaxCores = int64_t{1} << 20;

// The largest divisor of n that is <= sqrt(n): the short side of the most
// square n-cell rectangle.
int short_side(int n) {
  int best = 1;
  for (int d = 1; int64_t{d} * d <= n; ++d) {
    if (n % d == 0) best = d;
  }
  return best;
}

struct HostBlock {
  int bx, by, bz;
};

// The box of whole chips each task owns (see the header's rule).
std::optional<HostBlock> host_block(const std::vector<int>& mesh, int chips_per_task) {
  std::optional<HostBlock> best;
  auto key = [](const HostBlock& b) { return std::make_tuple(b.bz, b.bx + b.by, b.by); };
  for (int bz = 1; bz <= mesh[2]; ++bz) {
    if (mesh[2] % bz != 0) continue;
    for (int by = 1; by <= mesh[1]; ++by) {
      if (mesh[1] % by != 0) continue;
      const int64_t rest = int64_t{bz} * by;
      if (chips_per_task % rest != 0) continue;
      const auto bx = static_cast<int>(chips_per_task / rest);
      if (bx > mesh[0] || mesh[0] % bx != 0) continue;
      const HostBlock b{bx, by, bz};
      if (!best || key(b) < key(*best)) best = b;
    }
  }
  return best;
}

}  // namespace

std::vector<int> parse_mesh_shape(std::string_view spec) {
  std::vector<int> shape;
  size_t i = 0;
  bool ok = true;
  while (ok) {
    int64_t value = 0;
    size_t digits = 0;
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') {
      value = value * 10 + (spec[i] - '0');
      if (value > kMaxCores) ok = false;
      ++i;
      ++digits;
    }
    if (digits == 0 || value < 1) ok = false;
    shape.push_back(static_cast<int>(value));
    if (i == spec.size()) break;
    if (spec[i] != 'x') ok = false;
    ++i;
  }
  STRATA_CHECK_ARG(ok && shape.size() == 4, kTpuTopologyEnv,
                   ": expected XxYxZxC, four positive integers joined by 'x' (chips in x, y, z and "
                   "cores per chip, e.g. \"2x2x1x2\"), got \"",
                   spec, "\"");
  const int64_t cores = int64_t{shape[0]} * shape[1] * shape[2] * shape[3];
  STRATA_CHECK_ARG(cores <= kMaxCores, kTpuTopologyEnv, ": expected at most ", kMaxCores,
                   " cores, got \"", spec, "\" (", cores, " cores)");
  return shape;
}

std::vector<int> default_mesh_shape(int num_local_devices, int num_tasks) {
  STRATA_CHECK_ARG(num_local_devices >= 1,
                   "default_mesh_shape: expected num_local_devices >= 1, got ", num_local_devices);
  STRATA_CHECK_ARG(num_tasks >= 1, "default_mesh_shape: expected num_tasks >= 1, got ", num_tasks);
  STRATA_CHECK_ARG(int64_t{num_local_devices} * num_tasks <= kMaxCores,
                   "default_mesh_shape: expected at most ", kMaxCores, " cores, got ", num_tasks,
                   " tasks of ", num_local_devices, " devices");
  const int cores_per_chip = num_local_devices % 2 == 0 ? 2 : 1;
  const int chips = num_local_devices / cores_per_chip;
  const int by = short_side(chips);
  const int bx = chips / by;
  const int ty = short_side(num_tasks);
  const int tx = num_tasks / ty;
  return {tx * bx, ty * by, 1, cores_per_chip};
}

Topology local_topology(std::string_view spec, int num_local_devices, int num_tasks) {
  STRATA_CHECK_ARG(num_tasks >= 1, "local_topology: expected num_tasks >= 1, got ", num_tasks);
  STRATA_CHECK_ARG(num_local_devices >= 0, "local_topology: expected num_local_devices >= 0, got ",
                   num_local_devices);
  const std::vector<int> mesh =
      spec.empty() ? default_mesh_shape(num_local_devices, num_tasks) : parse_mesh_shape(spec);
  const std::string source =
      spec.empty() ? std::string("the local devices") : str_cat(kTpuTopologyEnv, "=", spec);
  const int cores = mesh[0] * mesh[1] * mesh[2] * mesh[3];
  const int per_chip = mesh[3];
  STRATA_CHECK_ARG(cores % num_tasks == 0 && (cores / num_tasks) % per_chip == 0,
                   "local_topology: expected the mesh ", mesh, " (", source, ", ", cores,
                   " cores) to split into ", num_tasks, " tasks of whole chips (", per_chip,
                   " cores each), got ", cores, " cores for ", num_tasks, " tasks");
  const int per_task = cores / num_tasks;
  STRATA_CHECK_ARG(num_local_devices >= per_task, "local_topology: the mesh ", mesh, " (", source,
                   ") needs ", cores, " cores, ", per_task, " per task over ", num_tasks,
                   num_tasks == 1 ? " task" : " tasks", "; expected at least ", per_task,
                   " local devices per task, got ", num_local_devices);
  // A box always exists: every prime power of the chips per task divides the
  // product of the mesh dimensions, so it can be spread over them.
  const auto block = host_block(mesh, per_task / per_chip);
  STRATA_INTERNAL_CHECK(block.has_value(), "no host block for mesh ", mesh, " and ", num_tasks,
                        " tasks");
  const int nbx = mesh[0] / block->bx;
  const int nby = mesh[1] / block->by;

  std::vector<std::vector<std::vector<int>>> coords(num_tasks);
  for (int t = 0; t < num_tasks; ++t) {
    // Block t, x fastest, then y, then z.
    const int ox = (t % nbx) * block->bx;
    const int oy = (t / nbx % nby) * block->by;
    const int oz = (t / nbx / nby) * block->bz;
    for (int z = 0; z < block->bz; ++z)
      for (int y = 0; y < block->by; ++y)
        for (int x = 0; x < block->bx; ++x)
          for (int c = 0; c < per_chip; ++c) coords[t].push_back({ox + x, oy + y, oz + z, c});
  }
  return Topology(mesh, coords);
}

Topology local_topology_from_environment(int num_tasks) {
  const char* spec = std::getenv(std::string(kTpuTopologyEnv).c_str());
  const auto devices = config::list_logical_devices("CPU");
  return local_topology(spec ? std::string_view(spec) : std::string_view(),
                        static_cast<int>(devices.size()), num_tasks);
}

BackingDevice backing_device_at_coordinates(const Topology& topology, const Coordinates& c) {
  const int task = topology.task_ordinal_at_coordinates(c);
  STRATA_CHECK(NOT_FOUND, task >= 0, "backing_device_at_coordinates: expected a device at ",
               coordinates_string(c), ", got none (the slice is missing it)");
  return {task, topology.tpu_device_ordinal_at_coordinates(c)};
}

}  // namespace strata::tpu::experimental
