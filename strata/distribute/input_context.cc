#include "strata/distribute/input_context.h"

#include "strata/base/errors.h"

namespace strata::distribute {

InputContext::InputContext(int num_input_pipelines, int input_pipeline_id, int num_replicas_in_sync)
    : num_input_pipelines_(num_input_pipelines),
      input_pipeline_id_(input_pipeline_id),
      num_replicas_in_sync_(num_replicas_in_sync) {
  STRATA_CHECK_ARG(num_input_pipelines >= 1, "InputContext: num_input_pipelines must be >= 1, got ",
                   num_input_pipelines);
  STRATA_CHECK_ARG(input_pipeline_id >= 0 && input_pipeline_id < num_input_pipelines,
                   "InputContext: input_pipeline_id must be in [0, ", num_input_pipelines,
                   "), got ", input_pipeline_id);
  STRATA_CHECK_ARG(num_replicas_in_sync >= 1,
                   "InputContext: num_replicas_in_sync must be >= 1, got ", num_replicas_in_sync);
}

int64_t InputContext::get_per_replica_batch_size(int64_t global_batch_size) const {
  STRATA_CHECK_ARG(global_batch_size % num_replicas_in_sync_ == 0, "The `global_batch_size` ",
                   global_batch_size, " is not divisible by `num_replicas_in_sync` ",
                   num_replicas_in_sync_);
  return global_batch_size / num_replicas_in_sync_;
}

std::string InputContext::to_string() const {
  return str_cat("tf.distribute.InputContext(input pipeline id ", input_pipeline_id_,
                 ", total: ", num_input_pipelines_, ")");
}

std::ostream& operator<<(std::ostream& os, const InputContext& ctx) {
  return os << ctx.to_string();
}

void validate_input_options(const InputOptions& options, bool for_function) {
  const bool per_replica =
      options.experimental_replication_mode == InputReplicationMode::PER_REPLICA;
  const bool fetch_to_device = options.experimental_fetch_to_device.value_or(true);
  if (per_replica && !for_function) {
    throw UnimplementedError(
        "InputReplicationMode.PER_REPLICA is only supported in "
        "`distribute_datasets_from_function`.");
  }
  STRATA_CHECK_ARG(!options.experimental_place_dataset_on_device || per_replica,
                   "When `experimental_place_dataset_on_device` is set for dataset placement, you "
                   "must also specify `PER_REPLICA` for the replication mode");
  STRATA_CHECK_ARG(
      !(per_replica && fetch_to_device && options.experimental_place_dataset_on_device),
      "`experimental_place_dataset_on_device` can not be set to True when "
      "experimental_fetch_to_device is True and replication mode is set to `PER_REPLICA`");
  STRATA_CHECK_ARG(options.experimental_per_replica_buffer_size >= 0,
                   "InputOptions.experimental_per_replica_buffer_size must be >= 0, got ",
                   options.experimental_per_replica_buffer_size);
}

}  // namespace strata::distribute
