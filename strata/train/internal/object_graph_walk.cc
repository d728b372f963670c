#include "strata/train/internal/object_graph_walk.h"

#include <utility>

#include "strata/base/str_cat.h"

namespace strata::train {

std::string escape_local_name(const std::string& name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    if (c == '.') {
      out += "..";
    } else if (c == '/') {
      out += ".S";
    } else {
      out += c;
    }
  }
  return out;
}

namespace internal {
namespace {

std::string join(const std::string& parent, const std::string& child) {
  return parent.empty() ? child : str_cat(parent, "/", child);
}

}  // namespace

std::string attribute_key(const std::string& key_path, const std::string& attribute) {
  return join(key_path, str_cat(kAttributesMarker, "/", attribute));
}

LiveGraph walk_object_graph(const TrackableRef& root) {
  LiveGraph g;
  auto add = [&g](const TrackableRef& object, std::string path) {
    const auto id = static_cast<uint32_t>(g.objects.size());
    g.ids.emplace(object->identity(), id);
    g.objects.push_back(object);
    g.key_paths.push_back(std::move(path));
    g.graph.nodes.emplace_back();
    return id;
  };
  add(root, "");
  for (size_t next = 0; next < g.objects.size(); ++next) {
    const auto children = g.objects[next]->children();
    for (const auto& [name, child] : children) {
      auto it = g.ids.find(child->identity());
      const uint32_t id = it != g.ids.end()
                              ? it->second
                              : add(child, join(g.key_paths[next], escape_local_name(name)));
      g.graph.nodes[next].children.push_back({name, id});
    }
  }
  // Slots, once the variables they belong to have their places.
  const size_t objects = g.objects.size();
  for (size_t n = 0; n < objects; ++n) {
    for (const SlotVariableRef& slot : g.objects[n]->slot_variables()) {
      auto original = g.ids.find(slot.original_identity);
      if (original == g.ids.end()) continue;
      auto it = g.ids.find(slot.slot.impl_ptr().get());
      const uint32_t id =
          it != g.ids.end()
              ? it->second
              : add(TrackableRef(slot.slot),
                    str_cat(g.key_paths[original->second], "/", kOptimizerSlotMarker, "/",
                            g.key_paths[n], "/", escape_local_name(slot.slot_name)));
      g.graph.nodes[n].slot_variables.push_back({original->second, slot.slot_name, id});
    }
  }
  return g;
}

}  // namespace internal
}  // namespace strata::train
