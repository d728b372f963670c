#pragma once
// Topology: the shape of a TPU system's mesh and where every TPU core sits in
// it, as tf.tpu.experimental.Topology.
//
// A mesh is 4-dimensional, [x, y, z, cores_per_chip]: chips are laid out in
// x, y and z, and each chip holds cores_per_chip cores. A core's coordinates
// are {x, y, z, core}. The system's cores belong to tasks (hosts); each task
// has num_tpus_per_task TPU devices "TPU:0", "TPU:1", ... and
// device_coordinates()[task][ordinal] says where each of them sits.
//
//   namespace tpu = strata::tpu::experimental;
//   tpu::Topology topo({2, 2, 1, 2}, {{{0, 0, 0, 0}, {0, 0, 0, 1}, {1, 0, 0, 0}, {1, 0, 0, 1},
//                                     {0, 1, 0, 0}, {0, 1, 0, 1}, {1, 1, 0, 0}, {1, 1, 0, 1}}});
//   topo.num_tasks();                                     // 1
//   topo.num_tpus_per_task();                             // 8
//   topo.tpu_device_ordinal_at_coordinates({1, 0, 0, 1}); // 3
//   topo.tpu_device_name_at_coordinates({1, 0, 0, 1}, "worker");
//                                                         // "/job:worker/task:0/device:TPU:3"
//   std::string bytes = topo.serialized();                // a TopologyProto
//   tpu::Topology again = tpu::Topology::parse(bytes);    // == topo
//
// Serialized form: the protobuf wire encoding of TensorFlow's TopologyProto
// (docs/tpu.md documents it byte by byte):
//   field 1 mesh_shape               repeated int32, packed
//   field 2 num_tasks                int32
//   field 3 num_tpu_devices_per_task int32
//   field 4 device_coordinates       repeated int32, packed, flattened [task][device][axis]
// serialized() writes exactly what protobuf would (fields in number order, packed
// repeated fields, zero scalars and empty repeated fields omitted), so the bytes
// interoperate with TensorFlow. parse() accepts any valid encoding of the message
// (packed or unpacked repeated fields, repeated occurrences, unknown fields skipped).
//
// Immutable after construction: thread-safe.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::tpu::experimental {

// A core's place in the mesh: {x, y, z, core}.
using Coordinates = std::array<int, 4>;

// "[x, y, z, core]", for messages.
std::string coordinates_string(const Coordinates& c);

class Topology {
 public:
  // Topology(mesh_shape=, device_coordinates=) of TensorFlow.
  // `device_coordinates` is indexed [task][tpu ordinal][axis]; every task must
  // have the same number of devices and every entry 4 axes.
  // InvalidArgumentError (TF's ValueError) if mesh_shape is not 4 positive
  // entries, the coordinates array is ragged or its minor dimension is not the
  // mesh rank, and (Strata checks what TF leaves to numpy) if a coordinate lies
  // outside the mesh or two devices claim the same coordinates, or the mesh has
  // more than 2^24 cores.
  Topology(std::vector<int> mesh_shape,
           const std::vector<std::vector<std::vector<int>>>& device_coordinates);

  // Topology(serialized=) of TensorFlow: parses a serialized TopologyProto.
  // DataLossError if the bytes are not a well-formed protobuf message (the
  // message names the byte offset and the check that failed);
  // InvalidArgumentError if the message does not describe a valid topology
  // (mesh_shape not 4 positive entries, num_tasks or num_tpu_devices_per_task
  // negative, coordinate count != num_tasks * num_tpu_devices_per_task * rank,
  // negative coordinates, plus the checks of the constructor above).
  static Topology parse(std::string_view serialized);

  // The TopologyProto wire bytes (see the header comment).
  std::string serialized() const;

  // [x, y, z, cores_per_chip].
  const std::vector<int>& mesh_shape() const noexcept { return mesh_shape_; }
  int mesh_rank() const noexcept { return static_cast<int>(mesh_shape_.size()); }
  // Total cores the mesh has room for (the product of mesh_shape()).
  int num_mesh_cores() const noexcept { return static_cast<int>(tasks_.size()); }
  // [task][tpu ordinal] -> coordinates.
  const std::vector<std::vector<Coordinates>>& device_coordinates() const noexcept {
    return device_coordinates_;
  }
  // Mesh coordinates no device sits at (a degraded slice), in row-major mesh
  // order (x slowest, core fastest), as numpy.argwhere.
  std::vector<Coordinates> missing_devices() const;
  int num_tasks() const noexcept { return static_cast<int>(device_coordinates_.size()); }
  int num_tpus_per_task() const noexcept { return num_tpus_per_task_; }

  // The task owning the core at `c`, or -1 if no device sits there (as TF).
  // InvalidArgumentError if `c` lies outside the mesh.
  int task_ordinal_at_coordinates(const Coordinates& c) const;
  // The TPU ordinal (within its task) of the core at `c`, or -1 if no device
  // sits there. InvalidArgumentError outside the mesh.
  int tpu_device_ordinal_at_coordinates(const Coordinates& c) const;
  // "/job:<job>/task:<t>/device:CPU:0" — the host of the core at `c`; without
  // a job (empty) "/task:<t>/device:CPU:0". InvalidArgumentError outside the
  // mesh, NotFoundError where no device sits.
  std::string cpu_device_name_at_coordinates(const Coordinates& c, std::string_view job = {}) const;
  // "/job:<job>/task:<t>/device:TPU:<ordinal>" (no "/job:" part without a job).
  std::string tpu_device_name_at_coordinates(const Coordinates& c, std::string_view job = {}) const;

  bool operator==(const Topology& other) const {
    return mesh_shape_ == other.mesh_shape_ && device_coordinates_ == other.device_coordinates_;
  }

 private:
  Topology(std::vector<int> mesh_shape, std::vector<std::vector<Coordinates>> device_coordinates,
           int num_tpus_per_task);
  int flat_index(const Coordinates& c, std::string_view who) const;

  std::vector<int> mesh_shape_;
  std::vector<std::vector<Coordinates>> device_coordinates_;
  int num_tpus_per_task_ = 0;
  // Inverse maps over the mesh (row-major, core fastest): task and ordinal at
  // each coordinate, -1 where no device sits (TF's _invert_topology).
  std::vector<int> tasks_;
  std::vector<int> devices_;
};

}  // namespace strata::tpu::experimental
