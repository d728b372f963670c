#include "strata/data/graph.h"

#include <map>

#include "strata/base/errors.h"
#include "strata/data/internal/node.h"

namespace strata::data {
namespace {

std::vector<Dataset> rewritten_inputs(const Dataset& ds,
                                      const std::function<Dataset(const Dataset&)>& f) {
  std::vector<Dataset> in;
  for (const Dataset& d : ds.inputs()) in.push_back(f(d));
  return in;
}

Dataset with_inputs(const Dataset& ds, std::vector<Dataset> in) {
  return Dataset(ds.node()->with_inputs(std::move(in)));
}

// A dataset whose iteration fails with `message` (a worker left without files).
Dataset failing(const std::vector<TensorSpec>& spec, const std::string& message) {
  return Dataset::from_generator(
      [message]() -> GeneratorFn {
        return [message]() -> std::optional<Element> { throw InvalidArgumentError(message); };
      },
      spec);
}

std::string not_enough(int64_t elems, int64_t shards) {
  return str_cat(
      "There aren't enough elements in this dataset for each shard to have at least one element (# "
      "elems = ",
      elems, ", # shards = ", shards,
      "). If you are using datasets with distribution strategy, consider setting the auto sharding "
      "policy "
      "to either DATA or OFF using the `experimental_distribute.auto_shard_policy` option of "
      "`tf.data.Options()`.");
}

Dataset shard_files_rec(const Dataset& ds, int64_t n, int64_t index, bool under_interleave) {
  const NodeKind k = ds.kind();
  if (is_reader(k) || (k == NodeKind::kListFiles && under_interleave)) {
    const auto files = node_files(ds);
    std::vector<std::string> mine;
    for (size_t i = static_cast<size_t>(index); i < files.size(); i += static_cast<size_t>(n))
      mine.push_back(files[i]);
    if (mine.empty())
      return failing(ds.element_spec(), not_enough(static_cast<int64_t>(files.size()), n));
    return Dataset(ds.node()->with_files(std::move(mine)));
  }
  if (k == NodeKind::kTensorSlices && under_interleave)
    return internal::shard_require_non_empty(ds, n, index);
  switch (k) {
    case NodeKind::kTensors:
    case NodeKind::kTensorSlices:
    case NodeKind::kRange:
    case NodeKind::kGenerator:
    case NodeKind::kListFiles:
      STRATA_CHECK(NOT_FOUND, false, "Found an unshardable source dataset: ", node_kind_name(k));
      break;
    case NodeKind::kInterleave:
      return with_inputs(ds, rewritten_inputs(ds, [&](const Dataset& d) {
                           return shard_files_rec(d, n, index, true);
                         }));
    default: break;
  }
  return with_inputs(ds, rewritten_inputs(ds, [&](const Dataset& d) {
                       return shard_files_rec(d, n, index, under_interleave);
                     }));
}

void check_shard_params(int64_t num_workers, int64_t index, int64_t num_replicas) {
  STRATA_CHECK_ARG(num_workers >= 1, "auto_shard: expected num_workers >= 1, got ", num_workers);
  STRATA_CHECK_ARG(index >= 0 && index < num_workers,
                   "auto_shard: expected 0 <= index < num_workers (", num_workers, "), got ",
                   index);
  STRATA_CHECK_ARG(num_replicas >= 0, "auto_shard: expected num_replicas >= 0, got ", num_replicas);
}

}  // namespace

bool is_reader(NodeKind k) noexcept {
  return k == NodeKind::kTFRecord || k == NodeKind::kTextLine || k == NodeKind::kFixedLengthRecord;
}

bool is_pass_through(NodeKind k) noexcept {
  switch (k) {
    case NodeKind::kMap:
    case NodeKind::kFilter:
    case NodeKind::kBatch:
    case NodeKind::kPaddedBatch:
    case NodeKind::kUnbatch:
    case NodeKind::kRebatch:
    case NodeKind::kLegacyRebatch:
    case NodeKind::kShuffle:
    case NodeKind::kRepeat:
    case NodeKind::kTake:
    case NodeKind::kSkip:
    case NodeKind::kShard:
    case NodeKind::kEnumerate:
    case NodeKind::kCache:
    case NodeKind::kPrefetch:
    case NodeKind::kOptions: return true;
    case NodeKind::kTensors:
    case NodeKind::kTensorSlices:
    case NodeKind::kRange:
    case NodeKind::kGenerator:
    case NodeKind::kListFiles:
    case NodeKind::kTFRecord:
    case NodeKind::kTextLine:
    case NodeKind::kFixedLengthRecord:
    case NodeKind::kInterleave:
    case NodeKind::kZip:
    case NodeKind::kConcatenate: return false;
  }
  return false;
}

int64_t node_batch_size(const Dataset& ds) { return ds.node()->batch_size(); }
bool node_drop_remainder(const Dataset& ds) { return ds.node()->drop_remainder(); }
std::vector<std::string> node_files(const Dataset& ds) { return ds.node()->files(); }
int64_t node_num_shards(const Dataset& ds) { return ds.node()->num_shards(); }
int64_t node_shard_index(const Dataset& ds) { return ds.node()->shard_index(); }
std::vector<int64_t> node_rebatch_sizes(const Dataset& ds) { return ds.node()->rebatch_sizes(); }

std::vector<std::string> source_files(const Dataset& ds) {
  std::vector<std::string> out;
  std::function<void(const Dataset&, bool)> walk = [&](const Dataset& d, bool under) {
    if (is_reader(d.kind()) || (d.kind() == NodeKind::kListFiles && under)) {
      auto f = node_files(d);
      out.insert(out.end(), f.begin(), f.end());
      return;
    }
    for (const Dataset& in : d.inputs()) walk(in, under || d.kind() == NodeKind::kInterleave);
  };
  walk(ds, false);
  return out;
}

std::optional<BatchInfo> find_batch(const Dataset& ds) {
  Dataset d = ds;
  while (true) {
    const NodeKind k = d.kind();
    if (k == NodeKind::kBatch || k == NodeKind::kPaddedBatch)
      return BatchInfo{k, node_batch_size(d), node_drop_remainder(d)};
    if (!is_pass_through(k) || k == NodeKind::kUnbatch || k == NodeKind::kRebatch ||
        k == NodeKind::kLegacyRebatch)
      return std::nullopt;
    d = d.inputs()[0];
  }
}

int64_t static_batch_size(const Dataset& ds) {
  if (auto b = find_batch(ds)) return b->batch_size;
  int64_t b = -2;
  for (const TensorSpec& s : ds.element_spec()) {
    if (!s.shape.has_known_rank() || s.shape.rank() == 0 || s.shape.dim(0) < 0) return -1;
    if (b != -2 && b != s.shape.dim(0)) return -1;
    b = s.shape.dim(0);
  }
  return b < 0 ? -1 : b;
}

Dataset rewrite(const Dataset& ds, const RewriteFn& fn) {
  std::map<const DatasetNode*, Dataset> done;
  std::function<Dataset(const Dataset&)> rec = [&](const Dataset& d) -> Dataset {
    if (auto it = done.find(d.node().get()); it != done.end()) return it->second;
    std::vector<Dataset> in = rewritten_inputs(d, rec);
    bool same = true;
    for (size_t i = 0; i < in.size(); ++i) same = same && in[i].node() == d.inputs()[i].node();
    Dataset cur = same ? d : with_inputs(d, std::move(in));
    Dataset out = fn(cur).value_or(cur);
    done.emplace(d.node().get(), out);
    return out;
  };
  return rec(ds);
}

Dataset apply_before_prefetch(const Dataset& ds, const std::function<Dataset(const Dataset&)>& fn) {
  if (ds.kind() == NodeKind::kPrefetch || ds.kind() == NodeKind::kOptions)
    return with_inputs(ds, {apply_before_prefetch(ds.inputs()[0], fn)});
  return fn(ds);
}

Dataset shard_by_files(const Dataset& ds, int64_t num_workers, int64_t index) {
  check_shard_params(num_workers, index, 0);
  if (num_workers == 1) return ds;
  return shard_files_rec(ds, num_workers, index, false);
}

Dataset shard_by_data(const Dataset& ds, int64_t num_workers, int64_t index, int64_t num_replicas) {
  check_shard_params(num_workers, index, num_replicas);
  return apply_before_prefetch(ds, [&](const Dataset& d) {
    Dataset point = d;
    if (d.kind() == NodeKind::kRebatch && num_replicas > 0)
      point = d.inputs()[0].rebatch_legacy(num_replicas);
    return internal::shard_require_non_empty(point, num_workers, index);
  });
}

Dataset apply_shard_hints(const Dataset& ds, int64_t num_workers, int64_t index) {
  check_shard_params(num_workers, index, 0);
  return rewrite(ds, [&](const Dataset& d) -> std::optional<Dataset> {
    if (d.kind() == NodeKind::kShard && node_num_shards(d) == SHARD_HINT)
      return internal::shard_require_non_empty(d.inputs()[0], num_workers, index);
    return std::nullopt;
  });
}

Dataset auto_shard(const Dataset& ds, AutoShardPolicy policy, int64_t num_workers, int64_t index,
                   int64_t num_replicas) {
  check_shard_params(num_workers, index, num_replicas);
  switch (policy) {
    case AutoShardPolicy::OFF: return ds;
    case AutoShardPolicy::FILE: return shard_by_files(ds, num_workers, index);
    case AutoShardPolicy::DATA: return shard_by_data(ds, num_workers, index, num_replicas);
    case AutoShardPolicy::HINT: return apply_shard_hints(ds, num_workers, index);
    case AutoShardPolicy::AUTO: try { return shard_by_files(ds, num_workers, index);
      } catch (const NotFoundError&) {
        // TF logs "AUTO sharding policy will apply DATA sharding policy ..." here.
        return shard_by_data(ds, num_workers, index, num_replicas);
      }
  }
  STRATA_CHECK_ARG(false, "auto_shard: expected a valid AutoShardPolicy, got ",
                   static_cast<int>(policy));
  return ds;
}

}  // namespace strata::data
