#include "strata/tpu/grid.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

#include "strata/base/str_cat.h"

namespace strata::tpu::experimental {

namespace {

// Lays out cell(c) for every coordinate of `mesh` (see grid.h for the format).
std::string render(const std::vector<int>& mesh, const std::string& title,
                   const std::function<std::string(const Coordinates&)>& cell) {
  std::vector<std::string> cells;  // row-major over (z, core, y, x)
  size_t width = 0;
  for (int z = 0; z < mesh[2]; ++z)
    for (int c = 0; c < mesh[3]; ++c)
      for (int y = 0; y < mesh[1]; ++y)
        for (int x = 0; x < mesh[0]; ++x) {
          cells.push_back(cell({x, y, z, c}));
          width = std::max(width, cells.back().size());
        }
  for (int x = 0; x < mesh[0]; ++x) width = std::max(width, str_cat("x=", x).size());
  size_t label = 0;
  for (int y = 0; y < mesh[1]; ++y) label = std::max(label, str_cat("y=", y).size());
  const auto pad = [](std::string s, size_t w) {
    s.resize(std::max(s.size(), w), ' ');
    return s;
  };
  const auto trim = [](std::string s) {
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
  };
  std::string out = title + "\n";
  size_t k = 0;
  for (int z = 0; z < mesh[2]; ++z) {
    for (int c = 0; c < mesh[3]; ++c) {
      if (z != 0 || c != 0) out += "\n";
      out += str_cat("z=", z, " core=", c, "\n");
      std::string header = pad("", label + 2);
      for (int x = 0; x < mesh[0]; ++x) header += pad(str_cat("x=", x), width + 2);
      out += trim(header) + "\n";
      for (int y = 0; y < mesh[1]; ++y) {
        std::string row = pad(str_cat("y=", y), label + 2);
        for (int x = 0; x < mesh[0]; ++x) row += pad(cells[k++], width + 2);
        out += trim(row) + "\n";
      }
    }
  }
  return out;
}

size_t flat(const std::vector<int>& mesh, const Coordinates& c) {
  return ((static_cast<size_t>(c[0]) * mesh[1] + c[1]) * mesh[2] + c[2]) * mesh[3] + c[3];
}

}  // namespace

std::string render_device_assignment(const DeviceAssignment& assignment) {
  const Topology& topology = assignment.topology();
  const auto& mesh = topology.mesh_shape();
  std::vector<std::string> owner(static_cast<size_t>(topology.num_mesh_cores()));
  for (int r = 0; r < assignment.num_replicas(); ++r) {
    for (int k = 0; k < assignment.num_cores_per_replica(); ++k) {
      owner[flat(mesh, assignment.core_assignment()[r][k])] = str_cat("r", r, ":c", k);
    }
  }
  const std::string title =
      str_cat("mesh ", mesh, ": ", assignment.num_replicas(),
              assignment.num_replicas() == 1 ? " replica x " : " replicas x ",
              assignment.num_cores_per_replica(),
              assignment.num_cores_per_replica() == 1 ? " logical core" : " logical cores");
  return render(mesh, title, [&](const Coordinates& c) {
    if (topology.task_ordinal_at_coordinates(c) < 0) return std::string("X");
    const std::string& o = owner[flat(mesh, c)];
    return o.empty() ? std::string(".") : o;
  });
}

std::string render_topology(const Topology& topology) {
  const auto& mesh = topology.mesh_shape();
  const std::string title = str_cat("mesh ", mesh, ": ", topology.num_tasks(),
                                    topology.num_tasks() == 1 ? " task x " : " tasks x ",
                                    topology.num_tpus_per_task(), " TPU devices");
  return render(mesh, title, [&](const Coordinates& c) {
    const int task = topology.task_ordinal_at_coordinates(c);
    if (task < 0) return std::string("X");
    return str_cat("t", task, ":d", topology.tpu_device_ordinal_at_coordinates(c));
  });
}

}  // namespace strata::tpu::experimental
