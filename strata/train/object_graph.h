#pragma once
// The object graph a checkpoint stores (TensorFlow's TrackableObjectGraph):
// one node per saved object, named edges between them, the tensors each node
// saves, and the optimizer slot variables keyed by the variable they belong
// to. Node 0 is the root (the train::Checkpoint that wrote the file).
//
//   root --"model"--> model --"layer_with_weights-0"--> dense --"kernel"--> variable
//   variable.attributes = {{"VARIABLE_VALUE",
//   "model/layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE"}}
//
// Plain data; immutable once built. The byte layout is in
// docs/formats/checkpoint.md.

#include <cstdint>
#include <string>
#include <vector>

namespace strata::train {

struct ObjectGraph {
  struct Child {
    std::string name;  // the edge's local name ("model", "kernel", "layer-0")
    uint32_t node_id;  // the child's index in `nodes`
  };
  struct Attribute {
    std::string name;            // "VARIABLE_VALUE"
    std::string checkpoint_key;  // the tensor's key in the checkpoint's index
  };
  struct SlotVariable {
    uint32_t original_variable_node_id;  // the variable the slot belongs to
    std::string slot_name;               // "momentum", "m", "v", ...
    uint32_t slot_variable_node_id;      // the slot variable's own node
  };
  struct Node {
    std::vector<Child> children;
    std::vector<Attribute> attributes;
    std::vector<SlotVariable> slot_variables;  // only on optimizer nodes
  };
  std::vector<Node> nodes;
};

// TF's escaping of a local name inside a checkpoint key: "." becomes ".." and
// "/" becomes ".S", so that keys split unambiguously at "/" and the reserved
// ".ATTRIBUTES" / ".OPTIMIZER_SLOT" parts cannot be spelled by an edge name.
std::string escape_local_name(const std::string& name);

// The attribute under which a variable saves its value, and the key parts TF uses.
inline constexpr const char* kVariableValueAttribute = "VARIABLE_VALUE";
inline constexpr const char* kAttributesMarker = ".ATTRIBUTES";
inline constexpr const char* kOptimizerSlotMarker = ".OPTIMIZER_SLOT";

}  // namespace strata::train
