#pragma once
// tf.distribute.InputContext, InputOptions and InputReplicationMode (spec §5.5–5.7).
//
//   strategy.experimental_distribute_datasets_from_function([](const sd::InputContext& ctx) {
//     auto b = ctx.get_per_replica_batch_size(64);   // InvalidArgumentError if 64 % R != 0
//     return make_ds().batch(b).shard(ctx.num_input_pipelines(), ctx.input_pipeline_id());
//   });
//
// Immutable value types.

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace strata::distribute {

class InputContext {
 public:
  explicit InputContext(int num_input_pipelines = 1, int input_pipeline_id = 0,
                        int num_replicas_in_sync = 1);
  int num_input_pipelines() const noexcept { return num_input_pipelines_; }
  int input_pipeline_id() const noexcept { return input_pipeline_id_; }
  int num_replicas_in_sync() const noexcept { return num_replicas_in_sync_; }
  // global_batch_size / num_replicas_in_sync; InvalidArgumentError ("The
  // `global_batch_size` G is not divisible by `num_replicas_in_sync` R") otherwise.
  int64_t get_per_replica_batch_size(int64_t global_batch_size) const;
  // "tf.distribute.InputContext(input pipeline id i, total: n)".
  std::string to_string() const;

 private:
  int num_input_pipelines_;
  int input_pipeline_id_;
  int num_replicas_in_sync_;
};

std::ostream& operator<<(std::ostream& os, const InputContext& ctx);

enum class InputReplicationMode { PER_WORKER, PER_REPLICA };

// tf.distribute.InputOptions, fields in TensorFlow's order.
struct InputOptions {
  std::optional<bool> experimental_fetch_to_device = std::nullopt;  // None -> true
  InputReplicationMode experimental_replication_mode = InputReplicationMode::PER_WORKER;
  bool experimental_place_dataset_on_device = false;
  int experimental_per_replica_buffer_size = 1;
};

// TF's option checks for experimental_distribute_dataset (`for_function` =
// false) and distribute_datasets_from_function (true): PER_REPLICA is
// UnimplementedError outside the latter; place_dataset_on_device needs
// PER_REPLICA and fetch_to_device false (InvalidArgumentError); a negative
// buffer size is InvalidArgumentError.
void validate_input_options(const InputOptions& options, bool for_function);

}  // namespace strata::distribute
