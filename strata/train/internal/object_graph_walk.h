#pragma once
// The live object graph of a checkpoint's root, as saving sees it.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "strata/train/object_graph.h"
#include "strata/train/trackable.h"

namespace strata::train::internal {

struct LiveGraph {
  std::vector<TrackableRef> objects;    // node id -> object; node 0 is the root
  std::vector<std::string> key_paths;   // node id -> escaped path ("" for the root)
  ObjectGraph graph;                    // children and slot variables (no attributes)
  std::map<const void*, uint32_t> ids;  // identity -> node id
};

// Walks the graph breadth-first from `root`: each object once (by identity),
// its path the first found; then every optimizer slot whose variable is in
// the graph becomes a node ("<variable path>/.OPTIMIZER_SLOT/<optimizer
// path>/<slot>"), as TF saves slots only for saved variables.
LiveGraph walk_object_graph(const TrackableRef& root);

// "<key path>/.ATTRIBUTES/<attribute>" (the root's attributes have no prefix).
std::string attribute_key(const std::string& key_path, const std::string& attribute);

}  // namespace strata::train::internal
