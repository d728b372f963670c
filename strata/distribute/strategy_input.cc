// Strategy's input distribution entry points (spec §5.2, §5.5).
#include "strata/base/errors.h"
#include "strata/distribute/strategy.h"

namespace strata::distribute {

namespace {
std::vector<const Device*> local_devices_of(const Strategy& s) {
  std::vector<const Device*> devices;
  devices.reserve(s.num_local_replicas());
  for (int i = 0; i < s.num_local_replicas(); ++i) devices.push_back(&s.local_device(i));
  return devices;
}
}  // namespace

DistributedDataset Strategy::experimental_distribute_dataset(const data::Dataset& dataset,
                                                             const InputOptions& options) {
  check_cross_replica("experimental_distribute_dataset");
  validate_input_options(options, /*for_function=*/false);
  STRATA_CHECK_ARG(num_replicas_in_sync() % num_input_pipelines() == 0,
                   "tf.distribute expects every worker to have the same number of replicas, got ",
                   num_replicas_in_sync(), " replicas over ", num_input_pipelines(), " workers");
  const bool contiguous = deterministic_micro_batches() > 0;
  data::Dataset per_replica =
      distribute_dataset_for_worker(dataset, num_input_pipelines(), input_pipeline_id(),
                                    num_replicas_in_sync() / num_input_pipelines(), contiguous);
  if (options.experimental_per_replica_buffer_size > 0 && num_local_replicas() > 1) {
    per_replica = per_replica.prefetch(int64_t{options.experimental_per_replica_buffer_size} *
                                       num_local_replicas());
  }
  // One step per global batch: on one worker, and across workers when every
  // worker takes part of every global batch (DATA sharding, contiguous blocks).
  std::optional<int64_t> steps;
  if (num_input_pipelines() == 1 || contiguous ||
      dataset.options().experimental_distribute.policy() == data::AutoShardPolicy::DATA) {
    steps = dataset.cardinality();
  }
  return DistributedDataset(per_replica, local_devices_of(*this), step_agreement(), steps);
}

DistributedDataset Strategy::distribute_datasets_from_function(
    const std::function<data::Dataset(const InputContext&)>& dataset_fn,
    const InputOptions& options) {
  check_cross_replica("distribute_datasets_from_function");
  validate_input_options(options, /*for_function=*/true);
  const int buffer = options.experimental_per_replica_buffer_size;
  if (options.experimental_replication_mode == InputReplicationMode::PER_REPLICA) {
    // TF gives every replica an input pipeline of its own: dataset_fn runs
    // once per replica, under the replica's device, with an InputContext whose
    // pipelines are the replicas (num_input_pipelines = num_replicas_in_sync,
    // input_pipeline_id = the replica's global id).
    std::vector<data::Dataset> datasets;
    datasets.reserve(num_local_replicas());
    for (int local = 0; local < num_local_replicas(); ++local) {
      DeviceScope device_scope(local_device(local));
      const InputContext ctx(num_replicas_in_sync(), global_replica_id(local),
                             num_replicas_in_sync());
      data::Dataset ds = dataset_fn(ctx);
      if (buffer > 0) ds = ds.prefetch(buffer);
      datasets.push_back(std::move(ds));
    }
    return DistributedDataset(std::move(datasets), local_devices_of(*this), step_agreement());
  }
  const InputContext ctx(num_input_pipelines(), input_pipeline_id(), num_replicas_in_sync());
  data::Dataset ds = dataset_fn(ctx);
  if (buffer > 0 && num_local_replicas() > 1) {
    ds = ds.prefetch(int64_t{buffer} * num_local_replicas());
  }
  return DistributedDataset(ds, local_devices_of(*this), step_agreement());
}

DistributedDataset Strategy::experimental_distribute_datasets_from_function(
    const std::function<data::Dataset(const InputContext&)>& dataset_fn,
    const InputOptions& options) {
  return distribute_datasets_from_function(dataset_fn, options);
}

data::Dataset Strategy::experimental_make_numpy_dataset(const Tensor& array) const {
  return data::Dataset::from_tensor_slices({array});
}

}  // namespace strata::distribute
