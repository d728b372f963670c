#include "strata/tpu/device_assignment.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"

namespace strata::tpu::experimental {

namespace {

constexpr int kRank = 4;

std::vector<int> as_vector(const Coordinates& c) { return {c.begin(), c.end()}; }

int64_t product(const std::vector<int>& v) {
  int64_t p = 1;
  for (int d : v) p *= d;
  return p;
}

// Checks one coordinate of an assignment against the topology and returns it.
Coordinates checked_core(const Topology& topology, const std::vector<int>& c, size_t replica,
                         size_t core) {
  STRATA_CHECK_ARG(static_cast<int>(c.size()) == topology.mesh_rank(),
                   "DeviceAssignment: expected the minor dimension of core_assignment to have size "
                   "equal to topology rank (",
                   topology.mesh_rank(), "), got ", c.size(), " coordinates ", c, " for replica ",
                   replica, " logical core ", core);
  Coordinates out{};
  for (int axis = 0; axis < kRank; ++axis) {
    STRATA_CHECK_ARG(c[axis] >= 0 && c[axis] < topology.mesh_shape()[axis],
                     "DeviceAssignment: expected coordinates inside the mesh ",
                     topology.mesh_shape(), ", got ", c, " for replica ", replica, " logical core ",
                     core);
    out[axis] = c[axis];
  }
  return out;
}

}  // namespace

DeviceAssignment::DeviceAssignment(
    Topology topology, const std::vector<std::vector<std::vector<int>>>& core_assignment)
    : topology_(std::move(topology)) {
  STRATA_CHECK_ARG(!core_assignment.empty() && !core_assignment[0].empty(),
                   "DeviceAssignment: expected core_assignment of shape [num_replicas >= 1, "
                   "num_cores_per_replica >= 1, ",
                   topology_.mesh_rank(), "], got ", core_assignment.size(), " replicas of ",
                   core_assignment.empty() ? 0 : core_assignment[0].size(), " cores");
  const size_t cores = core_assignment[0].size();
  std::vector<std::vector<Coordinates>> coords(core_assignment.size());
  for (size_t r = 0; r < core_assignment.size(); ++r) {
    STRATA_CHECK_ARG(core_assignment[r].size() == cores,
                     "DeviceAssignment: expected core_assignment to be a rank 3 array with ", cores,
                     " logical cores for every replica, got ", core_assignment[r].size(),
                     " for replica ", r);
    for (size_t k = 0; k < cores; ++k) {
      coords[r].push_back(checked_core(topology_, core_assignment[r][k], r, k));
    }
  }
  *this = DeviceAssignment(Checked{}, std::move(topology_), std::move(coords));
}

DeviceAssignment::DeviceAssignment(Checked, Topology topology,
                                   std::vector<std::vector<Coordinates>> core_assignment)
    : topology_(std::move(topology)),
      core_assignment_(std::move(core_assignment)),
      num_cores_per_replica_(static_cast<int>(core_assignment_.at(0).size())) {
  std::map<Coordinates, std::pair<size_t, size_t>> seen;
  for (size_t r = 0; r < core_assignment_.size(); ++r) {
    for (size_t k = 0; k < core_assignment_[r].size(); ++k) {
      const Coordinates& c = core_assignment_[r][k];
      STRATA_CHECK_ARG(topology_.task_ordinal_at_coordinates(c) >= 0,
                       "DeviceAssignment: expected a device at ", as_vector(c), " for replica ", r,
                       " logical core ", k, ", got none (the slice is missing it)");
      auto [it, inserted] = seen.emplace(c, std::make_pair(r, k));
      STRATA_CHECK_ARG(inserted, "DeviceAssignment: expected every physical core used once, got ",
                       as_vector(c), " for both replica ", it->second.first, " logical core ",
                       it->second.second, " and replica ", r, " logical core ", k);
    }
  }
}

DeviceAssignment DeviceAssignment::default_assignment(const Topology& topology) {
  std::vector<std::vector<Coordinates>> assignment;
  for (const auto& task : topology.device_coordinates()) {
    for (const auto& c : task) assignment.push_back({c});
  }
  STRATA_CHECK_ARG(!assignment.empty(),
                   "DeviceAssignment.default_assignment: expected a topology with "
                   "at least one device, got ",
                   topology.num_tasks(), " tasks of ", topology.num_tpus_per_task(), " devices");
  return DeviceAssignment(Checked{}, topology, std::move(assignment));
}

std::vector<std::array<int, 3>> open_ring_2d(int x_size, int y_size, int z_coord) {
  std::vector<std::array<int, 3>> ring;
  // Snake through row pairs along x (skipping column 0), then return up column 0.
  for (int i = 0; i < y_size / 2; ++i) {
    for (int x = 1; x < x_size; ++x) ring.push_back({x, 2 * i, z_coord});
    for (int x = x_size - 1; x > 0; --x) ring.push_back({x, 2 * i + 1, z_coord});
  }
  for (int y = y_size - 1; y > 0; --y) ring.push_back({0, y, z_coord});
  return ring;
}

std::vector<std::array<int, 3>> ring_3d(int x_size, int y_size, int z_size) {
  std::vector<std::array<int, 3>> ring;
  // Two unit dimensions: a straight line along the third.
  if (x_size == 1 && y_size == 1) {
    for (int z = 0; z < z_size; ++z) ring.push_back({0, 0, z});
    return ring;
  }
  if (x_size == 1 && z_size == 1) {
    for (int y = 0; y < y_size; ++y) ring.push_back({0, y, 0});
    return ring;
  }
  if (y_size == 1 && z_size == 1) {
    for (int x = 0; x < x_size; ++x) ring.push_back({x, 0, 0});
    return ring;
  }
  // An odd dimension > 1: TF gives up on rings and uses x-fastest order.
  const auto odd = [](int n) { return n > 1 && n % 2 != 0; };
  if (odd(x_size) || odd(y_size) || odd(z_size)) {
    for (int z = 0; z < z_size; ++z) {
      for (int y = 0; y < y_size; ++y) {
        for (int x = 0; x < x_size; ++x) ring.push_back({x, y, z});
      }
    }
    return ring;
  }
  ring.push_back({0, 0, 0});
  // One unit dimension: a flat ring in the plane of the other two.
  if (z_size == 1) {
    for (const auto& p : open_ring_2d(x_size, y_size, 0)) ring.push_back(p);
    return ring;
  }
  if (y_size == 1) {
    for (const auto& p : open_ring_2d(x_size, z_size, 0)) ring.push_back({p[0], p[2], p[1]});
    return ring;
  }
  if (x_size == 1) {
    for (const auto& p : open_ring_2d(y_size, z_size, 0)) ring.push_back({p[2], p[0], p[1]});
    return ring;
  }
  // All dimensions even and > 1: one open ring per z plane, alternately forward
  // and reversed, closed by the column (0, 0, z) on the way back down.
  for (int z = 0; z < z_size; ++z) {
    auto plane = open_ring_2d(x_size, y_size, z);
    if (z % 2 != 0) std::reverse(plane.begin(), plane.end());
    ring.insert(ring.end(), plane.begin(), plane.end());
  }
  for (int z = z_size - 1; z > 0; --z) ring.push_back({0, 0, z});
  return ring;
}

DeviceAssignment DeviceAssignment::build(const Topology& topology,
                                         const DeviceAssignmentOptions& options) {
  const std::vector<int>& mesh = topology.mesh_shape();
  const int n = topology.mesh_rank();
  std::vector<int> shape = options.computation_shape;
  std::vector<int> stride = options.computation_stride;
  if (shape.empty()) shape.assign(n, 1);
  if (stride.empty()) stride.assign(n, 1);
  STRATA_CHECK_ARG(static_cast<int>(shape.size()) == n,
                   "DeviceAssignment.build: computation_shape must "
                   "have shape [",
                   n, "]; got [", shape.size(), "] (computation_shape=", shape, ")");
  STRATA_CHECK_ARG(static_cast<int>(stride.size()) == n,
                   "DeviceAssignment.build: computation_stride "
                   "must have shape [",
                   n, "]; got [", stride.size(), "] (computation_stride=", stride, ")");
  STRATA_CHECK_ARG(
      std::all_of(shape.begin(), shape.end(), [](int d) { return d >= 1; }),
      "DeviceAssignment.build: computation_shape must be positive; got computation_shape=", shape);
  STRATA_CHECK_ARG(std::all_of(stride.begin(), stride.end(), [](int d) { return d >= 1; }),
                   "DeviceAssignment.build: computation_stride must be positive; got "
                   "computation_stride=",
                   stride);
  STRATA_CHECK_ARG(options.num_replicas >= 1,
                   "DeviceAssignment.build: expected num_replicas >= 1, got ",
                   options.num_replicas);

  // The physical size of one replica's block, and how many blocks fit.
  std::vector<int> footprint(n), replica_counts(n);
  bool fits = true;
  for (int i = 0; i < n; ++i) {
    const int64_t f = int64_t{shape[i]} * stride[i];
    fits = fits && f <= mesh[i];
    footprint[i] = static_cast<int>(std::min<int64_t>(f, int64_t{1} << 30));
  }
  STRATA_CHECK_ARG(fits, "DeviceAssignment.build: computation footprint ", footprint,
                   " does not fit in TPU topology shape ", mesh,
                   " (a local mesh's shape is set with STRATA_TPU_TOPOLOGY)");
  for (int i = 0; i < n; ++i) replica_counts[i] = (mesh[i] / footprint[i]) * stride[i];
  const int64_t max_replicas = product(replica_counts);
  STRATA_CHECK_ARG(options.num_replicas <= max_replicas, "DeviceAssignment.build: requested ",
                   options.num_replicas, " replicas but only ", max_replicas,
                   " replicas with shape ", shape, " and computation_stride ", stride,
                   " fit in a TPU mesh of shape ", mesh);
  const int num_replicas = options.num_replicas;
  const int64_t cores_per_replica = product(shape);

  std::vector<std::vector<Coordinates>> assignment(num_replicas);
  if (topology.missing_devices().empty()) {
    // Replica grid: as close to a cube as possible, filling the most
    // constrained dimension first; ties visit the core dimension first, then
    // x, y, z (TF's sort key (count, (i + 1) mod n)).
    std::vector<std::pair<int, int>> order;
    order.reserve(n);
    for (int i = 0; i < n; ++i) order.emplace_back(replica_counts[i], (i + 1) % n);
    std::sort(order.begin(), order.end());
    std::vector<int> replica_shape(n, 0);
    int64_t remaining = num_replicas;
    int remaining_dims = n;
    for (const auto& [count, key] : order) {
      const int i = (key + n - 1) % n;
      // std::pow is the C pow() Python's float ** calls, so the rounding matches TF.
      const auto target = static_cast<int64_t>(
          std::ceil(std::pow(static_cast<double>(remaining), 1.0 / remaining_dims)));
      replica_shape[i] = static_cast<int>(std::min<int64_t>(target, count));
      remaining = (remaining + replica_shape[i] - 1) / replica_shape[i];
      --remaining_dims;
    }
    STRATA_INTERNAL_CHECK(remaining == 1, "replica grid ", replica_shape, " for ", num_replicas);

    bool ring =
        n == kRank && shape[3] == mesh[3] && product(stride) == 1 && num_replicas == max_replicas;
    if (options.device_order_mode != DeviceOrderMode::AUTO) {
      STRATA_CHECK_ARG(options.device_order_mode != DeviceOrderMode::RING || ring,
                       "DeviceAssignment.build: device_order_mode=DeviceOrderMode.RING is not "
                       "compatible with the 3D tiling current topology.  Try setting "
                       "device_order_mode=DeviceOrderMode.AUTO (computation_shape=",
                       shape, ", computation_stride=", stride, ", num_replicas=", num_replicas,
                       ", mesh ", mesh, ")");
      ring = options.device_order_mode == DeviceOrderMode::RING;
    }

    if (ring) {
      // Whole-chip blocks: the blocks follow a ring over the replica grid and
      // the chips inside a block follow a ring too; cores of a chip are
      // consecutive logical cores.
      const auto inner = ring_3d(shape[0], shape[1], shape[2]);
      const auto outer = ring_3d(replica_shape[0], replica_shape[1], replica_shape[2]);
      for (int r = 0; r < num_replicas; ++r) {
        for (int64_t k = 0; k < cores_per_replica; ++k) {
          const auto& in = inner[static_cast<size_t>(k / mesh[3])];
          const auto& out = outer[static_cast<size_t>(r)];
          assignment[r].push_back({out[0] * shape[0] + in[0], out[1] * shape[1] + in[1],
                                   out[2] * shape[2] + in[2], static_cast<int>(k % mesh[3])});
        }
      }
    } else {
      // Logical cores: the block's grid points (stride apart), row-major with
      // the core dimension fastest.
      std::vector<Coordinates> block;
      for (int x = 0; x < shape[0]; ++x)
        for (int y = 0; y < shape[1]; ++y)
          for (int z = 0; z < shape[2]; ++z)
            for (int c = 0; c < shape[3]; ++c)
              block.push_back({x * stride[0], y * stride[1], z * stride[2], c * stride[3]});
      for (int r = 0; r < num_replicas; ++r) {
        // Replica r in mixed radix over the replica grid, core digit least
        // significant, then x, y, z.
        Coordinates pos{};
        int t = r;
        for (int axis : {3, 0, 1, 2}) {
          pos[axis] = t % replica_shape[axis];
          t /= replica_shape[axis];
        }
        Coordinates offset{};
        for (int axis = 0; axis < kRank; ++axis) {
          offset[axis] = (pos[axis] / stride[axis]) * footprint[axis] + pos[axis] % stride[axis];
        }
        for (const auto& b : block) {
          assignment[r].push_back(
              {b[0] + offset[0], b[1] + offset[1], b[2] + offset[2], b[3] + offset[3]});
        }
      }
    }
  } else {
    // Degraded slice: ignore the mesh shape and hand out devices in task order
    // (TF asserts these two conditions; we raise them as argument errors).
    STRATA_CHECK_ARG(product(stride) == 1,
                     "DeviceAssignment.build: expected computation_stride of all "
                     "ones on a slice with missing devices, got ",
                     stride);
    const int64_t devices = int64_t{topology.num_tasks()} * topology.num_tpus_per_task();
    STRATA_CHECK_ARG(num_replicas * cores_per_replica <= devices,
                     "DeviceAssignment.build: expected at "
                     "most ",
                     devices, " cores (the devices of this degraded slice), got ", num_replicas,
                     " replicas of ", cores_per_replica, " cores");
    for (int r = 0; r < num_replicas; ++r) {
      for (int64_t k = 0; k < cores_per_replica; ++k) {
        const int64_t logical_id = r * cores_per_replica + k;
        const auto task = static_cast<size_t>(logical_id / topology.num_tpus_per_task());
        const auto device = static_cast<size_t>(logical_id % topology.num_tpus_per_task());
        assignment[r].push_back(topology.device_coordinates()[task][device]);
      }
    }
  }
  return DeviceAssignment(Checked{}, topology, std::move(assignment));
}

void DeviceAssignment::check_indices(int replica, int logical_core, std::string_view who) const {
  STRATA_CHECK_ARG(replica >= 0 && replica < num_replicas(), who, ": expected replica in [0, ",
                   num_replicas(), "), got ", replica);
  STRATA_CHECK_ARG(logical_core >= 0 && logical_core < num_cores_per_replica_, who,
                   ": expected logical_core in [0, ", num_cores_per_replica_, "), got ",
                   logical_core);
}

Coordinates DeviceAssignment::coordinates(int replica, int logical_core) const {
  check_indices(replica, logical_core, "DeviceAssignment.coordinates");
  return core_assignment_[replica][logical_core];
}

std::vector<int> DeviceAssignment::lookup_replicas(int task_id, int logical_core) const {
  std::vector<int> replicas;
  if (logical_core >= 0 && logical_core < num_cores_per_replica_) {
    for (int r = 0; r < num_replicas(); ++r) {
      if (topology_.task_ordinal_at_coordinates(core_assignment_[r][logical_core]) == task_id) {
        replicas.push_back(r);
      }
    }
  }
  STRATA_CHECK_ARG(!replicas.empty(),
                   "DeviceAssignment.lookup_replicas: Can not find any replica in task: ", task_id,
                   " contains logical_core: ", logical_core);
  return replicas;
}

int DeviceAssignment::tpu_ordinal(int replica, int logical_core) const {
  check_indices(replica, logical_core, "DeviceAssignment.tpu_ordinal");
  return topology_.tpu_device_ordinal_at_coordinates(core_assignment_[replica][logical_core]);
}

std::string DeviceAssignment::host_device(int replica, int logical_core,
                                          std::string_view job) const {
  check_indices(replica, logical_core, "DeviceAssignment.host_device");
  return topology_.cpu_device_name_at_coordinates(core_assignment_[replica][logical_core], job);
}

std::string DeviceAssignment::tpu_device(int replica, int logical_core,
                                         std::string_view job) const {
  check_indices(replica, logical_core, "DeviceAssignment.tpu_device");
  return topology_.tpu_device_name_at_coordinates(core_assignment_[replica][logical_core], job);
}

}  // namespace strata::tpu::experimental
