#include "strata/tpu/topology.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "strata/base/coding.h"
#include "strata/base/errors.h"
#include "strata/base/str_cat.h"

namespace strata::tpu::experimental {

namespace {

constexpr int kMeshRank = 4;

std::vector<int> as_vector(const Coordinates& c) { return {c.begin(), c.end()}; }

// TopologyProto field numbers (tensorflow/core/protobuf/tpu/topology.proto).
constexpr uint32_t kMeshShapeField = 1;
constexpr uint32_t kNumTasksField = 2;
constexpr uint32_t kNumTpuDevicesPerTaskField = 3;
constexpr uint32_t kDeviceCoordinatesField = 4;

constexpr uint32_t kWireVarint = 0;
constexpr uint32_t kWireFixed64 = 1;
constexpr uint32_t kWireLengthDelimited = 2;
constexpr uint32_t kWireFixed32 = 5;

// int32 is written as the varint of its sign-extended 64-bit value, as
// protobuf does (negative values take 10 bytes).
void put_int32(std::string& out, int32_t v) {
  coding::put_varint64(out, static_cast<uint64_t>(static_cast<int64_t>(v)));
}

void put_packed(std::string& out, uint32_t field, const std::vector<int32_t>& values) {
  if (values.empty()) return;  // proto3 omits empty repeated fields
  std::string payload;
  for (int32_t v : values) put_int32(payload, v);
  coding::put_varint64(out, (field << 3) | kWireLengthDelimited);
  coding::put_varint64(out, payload.size());
  out += payload;
}

void put_scalar(std::string& out, uint32_t field, int32_t value) {
  if (value == 0) return;  // proto3 omits zero scalars
  coding::put_varint64(out, (field << 3) | kWireVarint);
  put_int32(out, value);
}

// A bounds-checked reader over the serialized bytes. Every failure is a
// DataLossError naming the byte offset and the check.
class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : bytes_(bytes) {}
  bool done() const { return pos_ >= bytes_.size(); }
  size_t pos() const { return pos_; }

  uint64_t varint(std::string_view what, size_t end) {
    const size_t start = pos_;
    const coding::DecodedVarint d =
        coding::decode_varint64(bytes_.substr(start, end > start ? end - start : 0));
    switch (d.status) {
      case coding::VarintStatus::ok: break;
      case coding::VarintStatus::truncated:
        fail(start, str_cat(what, " varint runs past the end of its field"));
      case coding::VarintStatus::overflow: fail(start, str_cat(what, " varint overflows 64 bits"));
      case coding::VarintStatus::too_long:
        fail(start, str_cat(what, " varint is longer than 10 bytes"));
    }
    pos_ += d.length;
    return d.value;
  }

  // An int32 field value: protobuf writes int32 as a sign-extended 64-bit
  // varint, so anything outside the int32 range was not written by a
  // protobuf encoder.
  int32_t int32(std::string_view what, size_t end) {
    const size_t start = pos_;
    const auto v = static_cast<int64_t>(varint(what, end));
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
      fail(start, str_cat(what, " value ", v, " is outside the int32 range"));
    }
    return static_cast<int32_t>(v);
  }

  void skip(size_t n, size_t start, std::string_view what) {
    if (n > bytes_.size() - pos_) {
      fail(start, str_cat(what, " of ", n, " bytes runs past the end of the message (",
                          bytes_.size() - pos_, " bytes left)"));
    }
    pos_ += n;
  }

  [[noreturn]] static void fail(size_t offset, const std::string& what) {
    throw DataLossError(
        str_cat("Topology::parse: corrupt TopologyProto at byte offset ", offset, ": ", what));
  }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

// Reads one occurrence of a repeated int32 field, packed (wire type 2) or not
// (wire type 0); parsers must accept both.
void read_repeated(WireReader& r, uint32_t wire_type, size_t tag_offset, std::string_view name,
                   size_t size, std::vector<int32_t>& out) {
  if (wire_type == kWireVarint) {
    out.push_back(r.int32(name, size));
    return;
  }
  if (wire_type != kWireLengthDelimited) {
    WireReader::fail(tag_offset,
                     str_cat("field ", name, " has wire type ", wire_type, ", expected 0 or 2"));
  }
  const size_t len_offset = r.pos();
  const uint64_t len = r.varint(str_cat(name, " length"), size);
  if (len > size - r.pos()) {
    WireReader::fail(len_offset, str_cat("packed ", name, " of ", len,
                                         " bytes runs past the end of the message (",
                                         size - r.pos(), " bytes left)"));
  }
  const size_t end = r.pos() + static_cast<size_t>(len);
  while (r.pos() < end) out.push_back(r.int32(name, end));
}

}  // namespace

std::string coordinates_string(const Coordinates& c) { return str_cat(as_vector(c)); }

Topology::Topology(std::vector<int> mesh_shape,
                   const std::vector<std::vector<std::vector<int>>>& device_coordinates) {
  STRATA_CHECK_ARG(
      mesh_shape.size() == kMeshRank &&
          std::all_of(mesh_shape.begin(), mesh_shape.end(), [](int d) { return d >= 1; }),
      "Topology: expected `mesh_shape` to be a sequence of 4 positive entries, got ", mesh_shape);
  const size_t per_task = device_coordinates.empty() ? 0 : device_coordinates[0].size();
  std::vector<std::vector<Coordinates>> coords(device_coordinates.size());
  for (size_t t = 0; t < device_coordinates.size(); ++t) {
    STRATA_CHECK_ARG(device_coordinates[t].size() == per_task,
                     "Topology: expected `device_coordinates` to be a rank 3 array with ", per_task,
                     " devices for every task, got ", device_coordinates[t].size(),
                     " devices for task ", t);
    for (size_t d = 0; d < per_task; ++d) {
      const auto& c = device_coordinates[t][d];
      STRATA_CHECK_ARG(c.size() == mesh_shape.size(),
                       "Topology: expected `device_coordinates` to be a rank 3 array with minor "
                       "dimension equal to the mesh shape rank (",
                       mesh_shape.size(), "), got ", c.size(), " coordinates ", c, " for task ", t,
                       " device ", d);
      std::copy(c.begin(), c.end(), coords[t].emplace_back().begin());
    }
  }
  *this = Topology(std::move(mesh_shape), std::move(coords), static_cast<int>(per_task));
}

Topology::Topology(std::vector<int> mesh_shape,
                   std::vector<std::vector<Coordinates>> device_coordinates, int num_tpus_per_task)
    : mesh_shape_(std::move(mesh_shape)),
      device_coordinates_(std::move(device_coordinates)),
      num_tpus_per_task_(num_tpus_per_task) {
  int64_t cells = 1;
  for (int d : mesh_shape_) cells *= d;
  STRATA_CHECK_ARG(cells <= (int64_t{1} << 24),
                   "Topology: expected a mesh of at most 16777216 cores, got ", mesh_shape_, " (",
                   cells, " cores)");
  tasks_.assign(static_cast<size_t>(cells), -1);
  devices_.assign(static_cast<size_t>(cells), -1);
  // TF's _invert_topology; Strata also rejects what numpy would silently
  // accept or fail on obscurely: coordinates outside the mesh, two devices at
  // one place.
  for (size_t t = 0; t < device_coordinates_.size(); ++t) {
    for (size_t d = 0; d < device_coordinates_[t].size(); ++d) {
      const Coordinates& c = device_coordinates_[t][d];
      for (int axis = 0; axis < kMeshRank; ++axis) {
        STRATA_CHECK_ARG(c[axis] >= 0 && c[axis] < mesh_shape_[axis],
                         "Topology: expected the coordinates of task ", t, " device ", d,
                         " to lie inside the mesh ", mesh_shape_, ", got ", as_vector(c));
      }
      const int i = flat_index(c, "Topology");
      STRATA_CHECK_ARG(tasks_[i] < 0, "Topology: expected distinct device coordinates, got ",
                       as_vector(c), " for both task ", tasks_[i], " device ", devices_[i],
                       " and task ", t, " device ", d);
      tasks_[i] = static_cast<int>(t);
      devices_[i] = static_cast<int>(d);
    }
  }
}

Topology Topology::parse(std::string_view serialized) {
  WireReader r(serialized);
  std::vector<int32_t> mesh_shape;
  std::vector<int32_t> flat_coords;
  int32_t num_tasks = 0;
  int32_t per_task = 0;
  const size_t size = serialized.size();
  while (!r.done()) {
    const size_t tag_offset = r.pos();
    const uint64_t tag = r.varint("tag", size);
    const uint64_t field = tag >> 3;
    const auto wire_type = static_cast<uint32_t>(tag & 7);
    if (field == 0 || field > 0x1FFFFFFF) {
      WireReader::fail(tag_offset, str_cat("invalid field number ", field));
    }
    switch (field) {
      case kMeshShapeField:
        read_repeated(r, wire_type, tag_offset, "mesh_shape", size, mesh_shape);
        continue;
      case kDeviceCoordinatesField:
        read_repeated(r, wire_type, tag_offset, "device_coordinates", size, flat_coords);
        continue;
      case kNumTasksField:
      case kNumTpuDevicesPerTaskField: {
        const char* name = field == kNumTasksField ? "num_tasks" : "num_tpu_devices_per_task";
        if (wire_type != kWireVarint) {
          WireReader::fail(tag_offset,
                           str_cat("field ", name, " has wire type ", wire_type, ", expected 0"));
        }
        (field == kNumTasksField ? num_tasks : per_task) = r.int32(name, size);  // last one wins
        continue;
      }
      default: break;
    }
    // Unknown fields (newer TopologyProto versions add some) are skipped.
    switch (wire_type) {
      case kWireVarint: r.varint(str_cat("unknown field ", field), size); break;
      case kWireFixed64: r.skip(8, tag_offset, str_cat("unknown fixed64 field ", field)); break;
      case kWireFixed32: r.skip(4, tag_offset, str_cat("unknown fixed32 field ", field)); break;
      case kWireLengthDelimited: {
        const uint64_t len = r.varint(str_cat("unknown field ", field, " length"), size);
        if (len > size)
          WireReader::fail(tag_offset, str_cat("unknown field ", field, " of ", len,
                                               " bytes runs past the end of the message"));
        r.skip(static_cast<size_t>(len), tag_offset, str_cat("unknown field ", field));
        break;
      }
      default:
        WireReader::fail(tag_offset,
                         str_cat("field ", field, " has unsupported wire type ", wire_type));
    }
  }

  // TF's _parse_topology checks, in its order.
  STRATA_CHECK_ARG(
      mesh_shape.size() == kMeshRank &&
          std::all_of(mesh_shape.begin(), mesh_shape.end(), [](int d) { return d >= 1; }),
      "Topology::parse: expected `mesh_shape` to be a vector of size 4 with positive "
      "entries, got ",
      mesh_shape);
  STRATA_CHECK_ARG(num_tasks >= 0, "Topology::parse: expected `num_tasks` >= 0, got ", num_tasks);
  STRATA_CHECK_ARG(per_task >= 0, "Topology::parse: expected `num_tpu_devices_per_task` >= 0, got ",
                   per_task);
  const int64_t expected = int64_t{num_tasks} * per_task * kMeshRank;
  STRATA_CHECK_ARG(static_cast<int64_t>(flat_coords.size()) == expected,
                   "Topology::parse: expected `device_coordinates` to have num_tasks (", num_tasks,
                   ") * num_tpu_devices_per_task (", per_task, ") * len(mesh_shape) (", kMeshRank,
                   ") = ", expected, " entries, got ", flat_coords.size());
  for (size_t i = 0; i < flat_coords.size(); ++i) {
    STRATA_CHECK_ARG(flat_coords[i] >= 0,
                     "Topology::parse: expected `device_coordinates` >= 0, got ", flat_coords[i],
                     " at index ", i);
  }
  std::vector<std::vector<Coordinates>> coords(static_cast<size_t>(num_tasks));
  size_t k = 0;
  for (auto& task : coords) {
    task.resize(static_cast<size_t>(per_task));
    for (auto& c : task) {
      for (int& v : c) v = flat_coords[k++];
    }
  }
  return Topology(std::vector<int>(mesh_shape.begin(), mesh_shape.end()), std::move(coords),
                  per_task);
}

std::string Topology::serialized() const {
  std::string out;
  put_packed(out, kMeshShapeField, std::vector<int32_t>(mesh_shape_.begin(), mesh_shape_.end()));
  put_scalar(out, kNumTasksField, num_tasks());
  put_scalar(out, kNumTpuDevicesPerTaskField, num_tpus_per_task_);
  std::vector<int32_t> flat;
  flat.reserve(static_cast<size_t>(num_tasks()) * num_tpus_per_task_ * kMeshRank);
  for (const auto& task : device_coordinates_) {
    for (const auto& c : task) flat.insert(flat.end(), c.begin(), c.end());
  }
  put_packed(out, kDeviceCoordinatesField, flat);
  return out;
}

std::vector<Coordinates> Topology::missing_devices() const {
  std::vector<Coordinates> missing;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    if (tasks_[i] >= 0) continue;
    Coordinates c{};
    size_t rest = i;
    for (int axis = kMeshRank - 1; axis >= 0; --axis) {
      c[axis] = static_cast<int>(rest % mesh_shape_[axis]);
      rest /= mesh_shape_[axis];
    }
    missing.push_back(c);
  }
  return missing;
}

int Topology::flat_index(const Coordinates& c, std::string_view who) const {
  int index = 0;
  for (int axis = 0; axis < kMeshRank; ++axis) {
    STRATA_CHECK_ARG(c[axis] >= 0 && c[axis] < mesh_shape_[axis], who,
                     ": expected coordinates inside the mesh ", mesh_shape_, ", got ",
                     as_vector(c));
    index = index * mesh_shape_[axis] + c[axis];
  }
  return index;
}

int Topology::task_ordinal_at_coordinates(const Coordinates& c) const {
  return tasks_[flat_index(c, "Topology.task_ordinal_at_coordinates")];
}

int Topology::tpu_device_ordinal_at_coordinates(const Coordinates& c) const {
  return devices_[flat_index(c, "Topology.tpu_device_ordinal_at_coordinates")];
}

namespace {
std::string job_prefix(std::string_view job) {
  return job.empty() ? std::string() : str_cat("/job:", job);
}
}  // namespace

std::string Topology::cpu_device_name_at_coordinates(const Coordinates& c,
                                                     std::string_view job) const {
  const int i = flat_index(c, "Topology.cpu_device_name_at_coordinates");
  STRATA_CHECK(NOT_FOUND, tasks_[i] >= 0,
               "Topology.cpu_device_name_at_coordinates: expected a device at ", as_vector(c),
               ", got none (the slice is missing it)");
  return str_cat(job_prefix(job), "/task:", tasks_[i], "/device:CPU:0");
}

std::string Topology::tpu_device_name_at_coordinates(const Coordinates& c,
                                                     std::string_view job) const {
  const int i = flat_index(c, "Topology.tpu_device_name_at_coordinates");
  STRATA_CHECK(NOT_FOUND, tasks_[i] >= 0,
               "Topology.tpu_device_name_at_coordinates: expected a device at ", as_vector(c),
               ", got none (the slice is missing it)");
  return str_cat(job_prefix(job), "/task:", tasks_[i], "/device:TPU:", devices_[i]);
}

}  // namespace strata::tpu::experimental
