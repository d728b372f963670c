#include "strata/train/internal/worker_write.h"

#include <filesystem>

#include "strata/base/str_cat.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/strategy.h"

namespace strata::train::internal {
namespace {

const distribute::Strategy* owner_of(const Variable& v) {
  if (const distribute::Strategy* s = distribute::owning_strategy(v)) return s;
  const Variable container = distribute::distributed_container(v);
  return container.defined() ? distribute::owning_strategy(container) : nullptr;
}

}  // namespace

std::optional<std::string> worker_temp_dir(const LiveGraph& live, const std::string& dir) {
  const distribute::Strategy* strategy = nullptr;
  for (const TrackableRef& object : live.objects) {
    const Variable v = object->variable();
    if (v.defined() && (strategy = owner_of(v)) != nullptr) break;
  }
  if (strategy == nullptr && distribute::has_strategy()) strategy = &distribute::get_strategy();
  if (strategy == nullptr || !strategy->extended().in_multi_worker_mode() ||
      strategy->extended().should_checkpoint()) {
    return std::nullopt;
  }
  // TF's keras/distribute/distributed_file_utils: "<dir>/workertemp_<task_id>",
  // or `dir` itself when the caller already chose that place.
  const std::string name = str_cat("workertemp_", strategy->extended().task_id());
  const std::filesystem::path base(dir.empty() ? "." : dir);
  if (base.filename() == name) return base.string();
  return (base / name).string();
}

}  // namespace strata::train::internal
