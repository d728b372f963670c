// The seed page's multi-worker example: every process runs this program with a
// TF_CONFIG naming the cluster and its own task; MultiWorkerMirroredStrategy()
// reads it, and the program branches on cluster_resolver()->task_type().
//
//   strata launch --nproc 2 -- build/examples/multi_worker
//   strata launch --nproc 3 --devices-per-worker 2 -- build/examples/multi_worker
//   strata launch --nproc 2 -- build/examples/multi_worker --kill-worker 1   # failure detection
//
// Each worker checks all-reduces of every dtype and op across the cluster
// (uneven sizes, many small tensors), then trains a small MLP for 20 steps on
// global batches of 32 and compares its weights with a single-process run of
// the same global batches (relative difference <= 1e-5). With --kill-worker K,
// worker K dies in the middle of training and the others must report the
// failure (UnavailableError / DeadlineExceededError) instead of hanging.
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "example_check.h"
#include "strata/strata.h"

namespace tf = strata;
namespace sd = strata::distribute;
namespace keras = strata::keras;
using example::expect;

namespace {

constexpr int64_t kGlobalBatch = 32;
constexpr int kSteps = 20;

tf::data::Dataset training_data() {
  tf::Tensor x = tf::random::uniform({kSteps * kGlobalBatch, 20}, {.seed = 5});
  tf::Tensor y = tf::cast(tf::random::uniform_int({kSteps * kGlobalBatch}, 0, 4, {.seed = 6}),
                          tf::DType::int64);
  tf::data::Options o;
  o.experimental_distribute.auto_shard_policy = tf::data::AutoShardPolicy::DATA;
  return tf::data::Dataset::from_tensor_slices({x, y}).batch(kGlobalBatch).with_options(o);
}

std::shared_ptr<keras::SequentialModel> make_model() {
  return keras::Sequential({
      keras::layers::Dense(32,
                           {.activation = "relu",
                            .kernel_initializer = keras::initializers::glorot_uniform({.seed = 1}),
                            .input_shape = {20}}),
      keras::layers::Dense(
          4, {.kernel_initializer = keras::initializers::glorot_uniform({.seed = 2})}),
  });
}

// Trains under `strategy` (nullptr: plainly, on this process alone).
std::vector<tf::Tensor> train(sd::Strategy* strategy, int kill_worker, int worker_index) {
  std::shared_ptr<keras::SequentialModel> model;
  std::shared_ptr<keras::optimizers::SGDOptimizer> optimizer;
  {
    std::optional<sd::StrategyScope> scope;
    if (strategy) scope.emplace(*strategy);
    model = make_model();
    optimizer = keras::optimizers::SGD({.learning_rate = 0.1, .momentum = 0.9});
    optimizer->build(model->trainable_variables());
  }
  auto step = [&](const tf::data::Element& batch) {
    tf::GradientTape tape;
    tf::Tensor logits = (*model)(batch[0], true);
    tf::Tensor per_example =
        keras::losses::sparse_categorical_crossentropy(batch[1], logits, {.from_logits = true});
    tf::Tensor loss =
        tf::nn::compute_average_loss(per_example, {.global_batch_size = kGlobalBatch});
    auto grads = tape.gradient(loss, model->trainable_variables());
    optimizer->apply_gradients(tf::zip(grads, model->trainable_variables()));
  };
  if (!strategy) {
    for (const auto& batch : training_data()) step(batch);
    return model->get_weights();
  }
  int n = 0;
  for (const auto& batch : strategy->experimental_distribute_dataset(training_data())) {
    if (++n == kSteps / 2 && worker_index == kill_worker) {
      std::cerr << "worker " << worker_index << " dies now (--kill-worker)\n";
      std::_Exit(3);
    }
    strategy->run(step, batch);
  }
  return model->get_weights();
}

void check_all_reduces(sd::MultiWorkerMirroredStrategy& strategy) {
  const int total = strategy.num_replicas_in_sync();
  // Every dtype through the replica context's SUM and MEAN (the strategy-level ReduceOps, as in
  // TF). The collectives' MAX/MIN over Gloo are checked by
  // GlooCollectives.AllReduceEveryOpOverTwoAndThreeRanks (strata/collective).
  auto results = strategy.run([&] {
    sd::ReplicaContext& ctx = *sd::get_replica_context();
    const int id = ctx.replica_id_in_sync_group();
    std::vector<tf::Tensor> values{
        tf::constant(static_cast<float>(id)),
        tf::constant(static_cast<double>(id)),
        tf::constant(static_cast<int32_t>(id)),
        tf::constant(static_cast<int64_t>(id)),
        tf::fill({1001}, tf::constant(static_cast<float>(id + 1))),  // an odd size
    };
    for (int i = 0; i < 50; ++i)
      values.push_back(tf::constant(static_cast<float>(i)));  // many small tensors
    auto sums = ctx.all_reduce(sd::ReduceOp::SUM, values);
    auto means = ctx.all_reduce(sd::ReduceOp::MEAN,
                                std::vector<tf::Tensor>{tf::constant(static_cast<double>(id))});
    return std::vector<double>{sums[0].item<float>(),
                               sums[1].item<double>(),
                               static_cast<double>(sums[2].item<int32_t>()),
                               static_cast<double>(sums[3].item<int64_t>()),
                               sums[4].to_vector<float>().back(),
                               sums[54].item<float>(),
                               means[0].item<double>()};
  });
  const double id_sum = total * (total - 1) / 2.0;
  for (const auto& r : strategy.experimental_local_results(results)) {
    expect(r[0] == id_sum && r[1] == id_sum && r[2] == id_sum && r[3] == id_sum,
           "SUM of every dtype");
    expect(r[4] == total * (total + 1) / 2.0, "SUM of a 1001-element tensor");
    expect(r[5] == 49.0 * total, "SUM of the 50th small tensor");
    expect(std::abs(r[6] - (total - 1) / 2.0) < 1e-12, "MEAN across every worker's replicas");
  }
  auto ids = strategy.run(
      [] { return tf::constant(sd::get_replica_context()->replica_id_in_sync_group()); });
  expect(strategy.reduce(sd::ReduceOp::SUM, ids, std::nullopt).item<int32_t>() ==
             static_cast<int32_t>(id_sum),
         "Strategy.reduce adds every worker's replicas");
}

double relative_difference(const std::vector<tf::Tensor>& a, const std::vector<tf::Tensor>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    auto u = a[i].to_vector<float>();
    auto v = b[i].to_vector<float>();
    for (size_t k = 0; k < u.size(); ++k) {
      num += (double(u[k]) - v[k]) * (double(u[k]) - v[k]);
      den += double(v[k]) * v[k];
    }
  }
  return std::sqrt(num / den);
}

}  // namespace

int main(int argc, char** argv) {
  int kill_worker = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--kill-worker") == 0 && i + 1 < argc)
      kill_worker = std::atoi(argv[++i]);
  }
  // In the failure drill the survivors must live to report what they saw:
  // `strata launch` sends SIGTERM to them as soon as the killed worker exits.
  if (kill_worker >= 0) std::signal(SIGTERM, SIG_IGN);
  try {
    // This implicitly uses TF_CONFIG for the cluster and current task info.
    sd::MultiWorkerMirroredStrategy strategy;
    const auto* resolver = strategy.cluster_resolver();
    const std::string task_type = resolver->task_type().value_or("");
    if (task_type == "worker" || task_type == "chief") {
      // Perform something that's only applicable on workers.
      std::cout << task_type << ":" << resolver->task_id().value_or(0) << " of "
                << strategy.num_workers() << " workers, " << strategy.num_replicas_in_sync()
                << " replicas in sync\n";
    } else if (task_type == "ps") {
      std::cout << "a parameter server has nothing to do under MultiWorkerMirroredStrategy\n";
      return 0;
    }
    check_all_reduces(strategy);
    const std::vector<tf::Tensor> distributed =
        train(&strategy, kill_worker, strategy.worker_index());
    const std::vector<tf::Tensor> single = train(nullptr, -1, 0);
    const double diff = relative_difference(distributed, single);
    std::cout << "weights vs one process: relative difference " << diff << "\n";
    expect(diff <= 1e-5, "multi-worker training equals one process on the same global batches");
  } catch (const tf::Error& e) {
    std::cerr << "error (" << tf::error_code_name(e.code()) << "): " << e.what() << "\n";
    return 1;
  }
  return example::exit_code();
}
