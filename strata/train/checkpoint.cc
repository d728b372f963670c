#include "strata/train/checkpoint.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/logging.h"
#include "strata/base/mutex.h"
#include "strata/base/str_cat.h"
#include "strata/train/checkpoint_manager.h"
#include "strata/train/internal/checkpoint_file.h"
#include "strata/train/internal/object_graph_walk.h"
#include "strata/train/internal/worker_write.h"

namespace strata::train {

// --- the checkpoint as the root trackable -------------------------------------

struct Checkpoint::State {
  Children children;
  Variable save_counter;  // empty until first used
  std::vector<Trackable::ChildCreatedCallback> callbacks;
};

namespace {

class CheckpointTrackable final : public Trackable {
 public:
  explicit CheckpointTrackable(std::shared_ptr<Checkpoint::State> state)
      : state_(std::move(state)) {}
  const void* identity() const override { return state_.get(); }
  std::string description() const override { return "train::Checkpoint"; }
  std::vector<std::pair<std::string, TrackableRef>> children() const override {
    auto out = state_->children;
    if (state_->save_counter.defined()) out.emplace_back("save_counter", state_->save_counter);
    return out;
  }
  bool add_child_created_callback(const ChildCreatedCallback& callback) override {
    state_->callbacks.push_back(callback);
    return true;
  }

 private:
  std::shared_ptr<Checkpoint::State> state_;
};

std::string parent_dir(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

}  // namespace

TrackableRef::TrackableRef(const Checkpoint& checkpoint)
    : trackable_(std::make_shared<CheckpointTrackable>(checkpoint.state_)) {}

// --- restoring ------------------------------------------------------------------

namespace internal {

// One restore: the verified file, which file node each live object matched,
// and the values still waiting for their objects. Shared by the status and by
// the creation callbacks that deferred restoration registers on objects.
struct RestoreState {
  Mutex mu;
  CheckpointFile file STRATA_GUARDED_BY(mu);
  std::map<std::string, size_t> entry_by_key STRATA_GUARDED_BY(mu);
  std::vector<std::string> node_paths STRATA_GUARDED_BY(mu);
  std::map<uint32_t, const void*> object_by_node STRATA_GUARDED_BY(mu);
  std::map<const void*, uint32_t> node_by_object STRATA_GUARDED_BY(mu);
  // Children the file has and the live object does not have yet: object ->
  // (edge name -> node).
  std::map<const void*, std::map<std::string, uint32_t>> pending_children STRATA_GUARDED_BY(mu);
  // Slot values whose slot (or variable) does not exist yet, per optimizer.
  std::map<const void*, std::vector<ObjectGraph::SlotVariable>> pending_slots STRATA_GUARDED_BY(mu);
  std::set<const void*> child_callbacks STRATA_GUARDED_BY(mu);
  std::set<const void*> slot_callbacks STRATA_GUARDED_BY(mu);
  // "<path> (<attribute>)" for saved attributes the live object does not have.
  std::vector<std::string> unused_attributes STRATA_GUARDED_BY(mu);
};

namespace {

// Readable paths of the file's nodes (first breadth-first path; slots as
// "<variable>/.OPTIMIZER_SLOT/<optimizer>/<slot>").
std::vector<std::string> node_paths(const ObjectGraph& graph) {
  std::vector<std::string> paths(graph.nodes.size());
  std::vector<bool> seen(graph.nodes.size(), false);
  std::deque<uint32_t> queue{0};
  seen[0] = true;
  paths[0] = "(root)";
  while (!queue.empty()) {
    const uint32_t n = queue.front();
    queue.pop_front();
    for (const auto& c : graph.nodes[n].children) {
      if (seen[c.node_id]) continue;
      seen[c.node_id] = true;
      paths[c.node_id] = n == 0 ? c.name : str_cat(paths[n], "/", c.name);
      queue.push_back(c.node_id);
    }
  }
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    for (const auto& s : graph.nodes[n].slot_variables) {
      if (seen[s.slot_variable_node_id]) continue;
      seen[s.slot_variable_node_id] = true;
      paths[s.slot_variable_node_id] =
          str_cat(paths[s.original_variable_node_id], "/", kOptimizerSlotMarker, "/", paths[n], "/",
                  s.slot_name);
    }
  }
  for (size_t n = 0; n < paths.size(); ++n) {
    if (!seen[n]) paths[n] = str_cat("(unreachable node ", n, ")");
  }
  return paths;
}

struct Assignment {
  SaveableTensor saveable;
  size_t entry;
  uint32_t node;
};

// Matches `object` to `node` and everything below it that exists, as far as
// the file and the live graph agree; returns the values to assign. Records
// the matches and what must wait (pending children and slots, with the
// objects whose callbacks must be registered).
class Matcher {
 public:
  explicit Matcher(RestoreState& s) STRATA_REQUIRES(s.mu) : s_(s) {}

  // The analysis does not know that s_ is the caller's state: this restates
  // (at no cost) that its mutex, which the constructor required, is held.
  void assert_state_locked() const STRATA_ASSERT_CAPABILITY(s_.mu) { s_.mu.assert_held(); }

  void match(const TrackableRef& object, uint32_t node) STRATA_REQUIRES(s_.mu) {
    std::deque<std::pair<TrackableRef, uint32_t>> queue{{object, node}};
    std::vector<std::pair<TrackableRef, uint32_t>> optimizers;
    while (!queue.empty() || !optimizers.empty()) {
      while (!queue.empty()) {
        auto [obj, n] = queue.front();
        queue.pop_front();
        if (!bind(obj, n)) continue;
        const ObjectGraph::Node& fnode = s_.file.graph.nodes[n];
        assign_attributes(obj, n);
        const auto live_children = obj->children();
        for (const auto& c : fnode.children) {
          auto it = std::find_if(live_children.begin(), live_children.end(),
                                 [&](const auto& lc) { return lc.first == c.name; });
          if (it != live_children.end()) {
            queue.emplace_back(it->second, c.node_id);
          } else if (!s_.object_by_node.contains(c.node_id)) {
            s_.pending_children[obj->identity()][c.name] = c.node_id;
            register_children.push_back(obj);
          }
        }
        if (!fnode.slot_variables.empty()) optimizers.emplace_back(obj, n);
      }
      // Slots once the variables they belong to are matched.
      for (const auto& [opt, n] : optimizers) {
        const auto live_slots = opt->slot_variables();
        for (const auto& slot : s_.file.graph.nodes[n].slot_variables) {
          if (s_.object_by_node.contains(slot.slot_variable_node_id)) continue;
          const SlotVariableRef* found = nullptr;
          auto original = s_.object_by_node.find(slot.original_variable_node_id);
          if (original != s_.object_by_node.end()) {
            for (const auto& ls : live_slots) {
              if (ls.original_identity == original->second && ls.slot_name == slot.slot_name) {
                found = &ls;
              }
            }
          }
          if (found != nullptr) {
            queue.emplace_back(TrackableRef(found->slot), slot.slot_variable_node_id);
          } else {
            s_.pending_slots[opt->identity()].push_back(slot);
            register_slots.push_back(opt);
          }
        }
      }
      optimizers.clear();
    }
  }

  std::vector<Assignment> plan;
  std::vector<TrackableRef> register_children;
  std::vector<TrackableRef> register_slots;

 private:
  bool bind(const TrackableRef& obj, uint32_t n) STRATA_REQUIRES(s_.mu) {
    const void* id = obj->identity();
    if (s_.object_by_node.contains(n) || s_.node_by_object.contains(id)) return false;
    s_.object_by_node[n] = id;
    s_.node_by_object[id] = n;
    return true;
  }
  void assign_attributes(const TrackableRef& obj, uint32_t n) STRATA_REQUIRES(s_.mu) {
    const auto saveables = obj->saveables();
    for (const auto& a : s_.file.graph.nodes[n].attributes) {
      auto it = std::find_if(saveables.begin(), saveables.end(),
                             [&](const SaveableTensor& st) { return st.attribute == a.name; });
      if (it == saveables.end()) {
        s_.unused_attributes.push_back(str_cat(s_.node_paths[n], " (", a.name, ")"));
        continue;
      }
      plan.push_back({*it, s_.entry_by_key.at(a.checkpoint_key), n});
    }
  }
  RestoreState& s_;
};

// Checks every planned value against its object, then assigns them all: a
// mismatch anywhere assigns nothing.
void check_then_assign(RestoreState& s, const std::vector<Assignment>& plan) STRATA_REQUIRES(s.mu) {
  std::vector<Tensor> values;
  values.reserve(plan.size());
  for (const Assignment& a : plan) {
    Tensor value = decode_tensor(s.file, s.file.index[a.entry]);
    try {
      a.saveable.check(value);
    } catch (const InvalidArgumentError& e) {
      throw InvalidArgumentError(str_cat("restoring '", s.node_paths[a.node], "' from checkpoint '",
                                         s.file.path, "': ", e.what()));
    }
    values.push_back(std::move(value));
  }
  for (size_t i = 0; i < plan.size(); ++i) plan[i].saveable.restore(values[i]);
}

}  // namespace

bool anything_pending(const RestoreState& s) STRATA_REQUIRES(s.mu) {
  for (const auto& [obj, names] : s.pending_children) {
    if (!names.empty()) return true;
  }
  for (const auto& [obj, slots] : s.pending_slots) {
    if (!slots.empty()) return true;
  }
  return false;
}

namespace {

void register_callbacks(const std::shared_ptr<RestoreState>& state, const Matcher& m);

// Matches, checks, assigns and registers what must wait.
void restore_subtree(const std::shared_ptr<RestoreState>& state, const TrackableRef& object,
                     uint32_t node) STRATA_REQUIRES(state->mu) {
  Matcher m(*state);
  m.assert_state_locked();
  m.match(object, node);
  check_then_assign(*state, m.plan);
  // An edge the live object lacks may lead to a node matched through
  // another edge (a layer reached as "layer-1" before it has weights, not as
  // "layer_with_weights-0"): nothing waits for it.
  for (auto& [obj, names] : state->pending_children) {
    std::erase_if(names, [&](const auto& entry) STRATA_REQUIRES(state->mu) {
      return state->object_by_node.contains(entry.second);
    });
  }
  register_callbacks(state, m);
  // The file's bytes are needed only while values wait for their objects.
  if (!anything_pending(*state)) {
    state->file.bytes.clear();
    state->file.bytes.shrink_to_fit();
  }
}

void on_child_created(const std::shared_ptr<RestoreState>& state, const void* parent,
                      const std::string& name, const TrackableRef& child) {
  MutexLock lock(state->mu);
  auto it = state->pending_children.find(parent);
  if (it == state->pending_children.end()) return;
  auto pending = it->second.find(name);
  if (pending == it->second.end()) return;
  const uint32_t node = pending->second;
  it->second.erase(pending);
  if (state->object_by_node.contains(node)) return;
  restore_subtree(state, child, node);
}

void on_slot_created(const std::shared_ptr<RestoreState>& state, const void* optimizer,
                     const SlotVariableRef& slot) {
  MutexLock lock(state->mu);
  auto it = state->pending_slots.find(optimizer);
  if (it == state->pending_slots.end()) return;
  auto original = state->node_by_object.find(slot.original_identity);
  if (original == state->node_by_object.end()) return;
  auto& slots = it->second;
  auto pending = std::find_if(slots.begin(), slots.end(), [&](const ObjectGraph::SlotVariable& s) {
    return s.original_variable_node_id == original->second && s.slot_name == slot.slot_name;
  });
  if (pending == slots.end()) return;
  const uint32_t node = pending->slot_variable_node_id;
  slots.erase(pending);
  if (state->object_by_node.contains(node)) return;
  restore_subtree(state, TrackableRef(slot.slot), node);
}

void register_callbacks(const std::shared_ptr<RestoreState>& state, const Matcher& m)
    STRATA_REQUIRES(state->mu) {
  for (const TrackableRef& obj : m.register_children) {
    const void* id = obj->identity();
    if (state->pending_children[id].empty()) continue;
    if (!state->child_callbacks.insert(id).second) continue;
    (void)obj->add_child_created_callback(
        [state, id](const std::string& name, const TrackableRef& child) {
          on_child_created(state, id, name, child);
        });
  }
  for (const TrackableRef& obj : m.register_slots) {
    const void* id = obj->identity();
    if (!state->slot_callbacks.insert(id).second) continue;
    (void)obj->add_slot_created_callback(
        [state, id](const SlotVariableRef& slot) { on_slot_created(state, id, slot); });
  }
}

}  // namespace
}  // namespace internal

// --- the status -------------------------------------------------------------------

struct CheckpointLoadStatus::Shared {
  std::shared_ptr<internal::RestoreState> state;  // null: restore(std::nullopt)
  TrackableRef root;
  std::atomic<bool> expect_partial{false};

  Shared(std::shared_ptr<internal::RestoreState> s, TrackableRef r)
      : state(std::move(s)), root(std::move(r)) {}
  ~Shared();

  [[noreturn]] static void fail_initialization_only() {
    throw FailedPreconditionError(
        "No checkpoint specified (save_path=None); nothing is being restored.");
  }
  // Live objects holding values that no checkpoint node matched.
  std::vector<std::string> unmatched_live_objects() const {
    std::vector<std::string> out;
    const internal::LiveGraph live = internal::walk_object_graph(root);
    // A checkpoint's save_counter may be missing from a file made by write()
    // before any save(); restore() creates it anyway, and it is not program state.
    std::set<uint32_t> counters;
    for (size_t n = 0; n < live.objects.size(); ++n) {
      if (dynamic_cast<const CheckpointTrackable*>(live.objects[n].get().get()) == nullptr)
        continue;
      for (const auto& c : live.graph.nodes[n].children) {
        if (c.name == "save_counter") counters.insert(c.node_id);
      }
    }
    MutexLock lock(state->mu);
    for (size_t n = 0; n < live.objects.size(); ++n) {
      if (live.objects[n]->saveables().empty() || counters.contains(static_cast<uint32_t>(n))) {
        continue;
      }
      if (!state->node_by_object.contains(live.objects[n]->identity())) {
        out.push_back(str_cat(live.key_paths[n], " (", live.objects[n]->description(), ")"));
      }
    }
    return out;
  }
  // Checkpoint values not assigned (yet), with the reason.
  std::vector<std::string> unconsumed_values() const {
    std::vector<std::string> out;
    MutexLock lock(state->mu);
    const auto& nodes = state->file.graph.nodes;
    for (uint32_t n = 0; n < nodes.size(); ++n) {
      if (!nodes[n].attributes.empty() && !state->object_by_node.contains(n)) {
        out.push_back(str_cat(state->node_paths[n], " (unresolved object in checkpoint)"));
      }
    }
    for (const std::string& a : state->unused_attributes) {
      out.push_back(str_cat(a, " (attribute not used by the object)"));
    }
    return out;
  }
};

namespace {
std::string join_lines(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += str_cat("\n  ", item);
  return out;
}
}  // namespace

CheckpointLoadStatus::Shared::~Shared() {
  if (!state || expect_partial.load()) return;
  try {
    {
      // Values waiting for objects not created yet are not unused (yet).
      MutexLock lock(state->mu);
      if (internal::anything_pending(*state)) return;
    }
    const auto unused = unconsumed_values();
    if (!unused.empty()) {
      MutexLock lock(state->mu);
      STRATA_LOG(WARNING, "checkpoint '", state->file.path,
                 "': values were not restored (call expect_partial() if that is intended):",
                 join_lines(unused));
    }
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor's warning must not throw
  }
}

const CheckpointLoadStatus& CheckpointLoadStatus::assert_existing_objects_matched() const {
  if (!shared_->state) Shared::fail_initialization_only();
  const auto unmatched = shared_->unmatched_live_objects();
  if (!unmatched.empty()) {
    MutexLock lock(shared_->state->mu);
    throw FailedPreconditionError(
        str_cat("checkpoint '", shared_->state->file.path,
                "': objects were not bound to checkpointed values (the program's objects differ "
                "from the checkpoint's):",
                join_lines(unmatched)));
  }
  return *this;
}

const CheckpointLoadStatus& CheckpointLoadStatus::assert_consumed() const {
  assert_existing_objects_matched();
  const auto unused = shared_->unconsumed_values();
  if (!unused.empty()) {
    MutexLock lock(shared_->state->mu);
    throw FailedPreconditionError(str_cat("checkpoint '", shared_->state->file.path,
                                          "': values were not restored:", join_lines(unused)));
  }
  return *this;
}

const CheckpointLoadStatus& CheckpointLoadStatus::assert_nontrivial_match() const {
  if (!shared_->state) Shared::fail_initialization_only();
  MutexLock lock(shared_->state->mu);
  if (shared_->state->object_by_node.size() <= 1) {
    throw FailedPreconditionError(str_cat("checkpoint '", shared_->state->file.path,
                                          "': nothing except the root object matched a "
                                          "checkpointed value"));
  }
  return *this;
}

const CheckpointLoadStatus& CheckpointLoadStatus::expect_partial() const {
  shared_->expect_partial.store(true);
  return *this;
}

// --- Checkpoint --------------------------------------------------------------------

Checkpoint::Checkpoint(std::initializer_list<std::pair<std::string, TrackableRef>> children)
    : Checkpoint(Children(children)) {}

Checkpoint::Checkpoint(Children children) : state_(std::make_shared<State>()) {
  // TF sets the keyword arguments as attributes in sorted order.
  std::stable_sort(children.begin(), children.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < children.size(); ++i) {
    const std::string& name = children[i].first;
    STRATA_CHECK_ARG(!name.empty(), "train::Checkpoint: an object has an empty name");
    STRATA_CHECK_ARG(
        name != "save_counter",
        "train::Checkpoint: 'save_counter' is reserved for the checkpoint's own counter");
    STRATA_CHECK_ARG(i == 0 || children[i - 1].first != name, "train::Checkpoint: the name '", name,
                     "' is given twice");
  }
  state_->children = std::move(children);
}

const Variable& Checkpoint::save_counter() {
  if (!state_->save_counter.defined()) {
    // TF: an int64 non-trainable variable named save_counter, initially 0.
    state_->save_counter =
        Variable(constant(int64_t{0}), {.name = "save_counter", .trainable = false});
    const auto callbacks = state_->callbacks;
    for (const auto& callback : callbacks) callback("save_counter", state_->save_counter);
  }
  return state_->save_counter;
}

TrackableRef Checkpoint::as_trackable() const { return TrackableRef(*this); }

std::string Checkpoint::write(const std::string& file_path) {
  STRATA_CHECK_ARG(!file_path.empty(), "train::Checkpoint::write: empty path");
  const internal::LiveGraph live = internal::walk_object_graph(as_trackable());
  ObjectGraph graph = live.graph;
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (size_t n = 0; n < live.objects.size(); ++n) {
    for (const SaveableTensor& s : live.objects[n]->saveables()) {
      std::string key = internal::attribute_key(live.key_paths[n], s.attribute);
      graph.nodes[n].attributes.push_back({s.attribute, key});
      tensors.emplace_back(std::move(key), s.save());
    }
  }
  // Under a multi-worker strategy only the chief's file is kept (worker_write.h).
  const auto temp_dir = internal::worker_temp_dir(live, parent_dir(file_path));
  if (!temp_dir) {
    make_dirs(parent_dir(file_path));
    internal::write_checkpoint_file(file_path, tensors, graph);
    return file_path;
  }
  make_dirs(*temp_dir);
  internal::write_checkpoint_file(
      (std::filesystem::path(*temp_dir) / std::filesystem::path(file_path).filename()).string(),
      tensors, graph);
  std::error_code ec;
  std::filesystem::remove_all(*temp_dir, ec);
  if (ec)
    throw_os_error("cannot remove a worker's temporary checkpoint directory", *temp_dir,
                   ec.value());
  return file_path;
}

std::string Checkpoint::save(const std::string& file_prefix) {
  STRATA_CHECK_ARG(!file_prefix.empty(), "train::Checkpoint::save: empty file prefix");
  const Variable& counter = save_counter();
  counter.assign_add(constant(int64_t{1}));
  std::string path = str_cat(file_prefix, "-", counter.value().item<int64_t>());
  write(path);
  // Only the chief records it (worker_write.h).
  if (internal::worker_temp_dir(internal::walk_object_graph(as_trackable()),
                                parent_dir(file_prefix)))
    return path;
  // TF's save records the new checkpoint (alone) in the directory's state file.
  update_checkpoint_state(parent_dir(file_prefix),
                          {.model_checkpoint_path = path, .all_model_checkpoint_paths = {path}},
                          {.save_relative_paths = true});
  return path;
}

CheckpointLoadStatus Checkpoint::restore(const std::optional<std::string>& save_path) {
  if (!save_path) {
    return CheckpointLoadStatus(
        std::make_shared<CheckpointLoadStatus::Shared>(nullptr, as_trackable()));
  }
  return restore_impl(*save_path, /*create_counter=*/true);
}

CheckpointLoadStatus Checkpoint::read(const std::string& save_path) {
  return restore_impl(save_path, /*create_counter=*/false);
}

CheckpointLoadStatus Checkpoint::restore_impl(const std::string& save_path, bool create_counter) {
  if (!file_exists(save_path)) {
    throw NotFoundError(str_cat("train::Checkpoint: no checkpoint at '", save_path,
                                "' (the path is the one save() returned, with its '-<n>' "
                                "suffix, e.g. 'path/to/ckpt-1')"));
  }
  if (create_counter) (void)save_counter();
  auto state = std::make_shared<internal::RestoreState>();
  const TrackableRef root = as_trackable();
  {
    MutexLock lock(state->mu);
    state->file = internal::read_checkpoint_file(save_path);
    for (size_t i = 0; i < state->file.index.size(); ++i) {
      state->entry_by_key.emplace(state->file.index[i].key, i);
    }
    state->node_paths = internal::node_paths(state->file.graph);
    internal::restore_subtree(state, root, 0);
  }
  return CheckpointLoadStatus(std::make_shared<CheckpointLoadStatus::Shared>(state, root));
}

}  // namespace strata::train
