// The seed page's custom training loop under TPUStrategy, in C++: a
// Dense(2, input_shape=(5,)) model and SGD(0.1) created in the strategy's
// scope, a dataset per input pipeline (2 examples, repeated, batches of 1),
// and a step that records a GradientTape, takes the sparse categorical
// cross-entropy and applies the gradients on every replica.
//
//   STRATA_CPU_DEVICES=2 build/examples/tpu_custom_training_loop
//   (2 logical CPU devices: the local TPU system is a 1x1x1x2 mesh, 2 replicas)
#include <cmath>
#include <iostream>
#include <vector>

#include "strata/keras/optimizers/optimizers.h"
#include "strata/strata.h"

namespace tf = strata;
namespace sd = strata::distribute;
namespace tpu = strata::tpu::experimental;
namespace keras = strata::keras;

namespace {
int failures = 0;
void expect(bool ok, const char* what) {
  if (!ok) {
    std::cerr << "unexpected result: " << what << "\n";
    ++failures;
  }
}
}  // namespace

int main() {
  // resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu='')
  // tf.config.experimental_connect_to_cluster(resolver)
  // tf.tpu.experimental.initialize_tpu_system(resolver)
  // strategy = tf.distribute.TPUStrategy(resolver)
  sd::cluster_resolver::TPUClusterResolver resolver("");
  tf::config::experimental_connect_to_cluster(resolver);
  tpu::Topology topology = tpu::initialize_tpu_system(resolver);
  std::cout << "TPU system: mesh "
            << tf::TensorShape(
                   std::vector<int64_t>(topology.mesh_shape().begin(), topology.mesh_shape().end()))
            << "\n";
  sd::TPUStrategy strategy(resolver);
  std::cout << "replicas in sync: " << strategy.num_replicas_in_sync() << "\n";

  std::shared_ptr<keras::layers::DenseLayer> model;
  std::shared_ptr<keras::optimizers::SGDOptimizer> optimizer;
  {
    auto scope = strategy.scope();
    model = keras::layers::Dense(2, {.input_shape = {5}});
    optimizer = keras::optimizers::SGD({.learning_rate = 0.1});
    // Build the weights (mirrored) and the optimizer's state here, in the
    // scope, as Keras does when input_shape is given.
    if (model->trainable_variables().empty()) (*model)(tf::zeros({1, 5}));
    optimizer->build(model->trainable_variables());
  }

  auto dataset_fn = [](const sd::InputContext&) {
    tf::Tensor x = tf::random::uniform({2, 5}, {.seed = 1});
    tf::Tensor y = tf::random::uniform_int({2, 1}, 0, 2, {.seed = 2});
    return tf::data::Dataset::from_tensor_slices({x, y}).repeat().batch(1, /*drop_remainder=*/true);
  };
  sd::DistributedDataset dist_dataset =
      strategy.experimental_distribute_datasets_from_function(dataset_fn);
  sd::DistributedIterator iterator = dist_dataset.iter();

  auto step_fn = [&](const tf::data::Element& inputs) {
    const tf::Tensor& features = inputs[0];
    const tf::Tensor& labels = inputs[1];
    tf::GradientTape tape;
    tf::Tensor logits = (*model)(features, /*training=*/true);
    tf::Tensor loss = tf::reduce_mean(
        keras::losses::sparse_categorical_crossentropy(labels, tf::softmax(logits)));
    std::vector<tf::Tensor> grads = tape.gradient(loss, model->trainable_variables());
    // TF's apply_gradients sums the replicas' gradients (an all-reduce) and
    // applies the same update on every replica. The optimizer's own
    // cross-replica aggregation is pending (keras issue 6), so the step
    // all-reduces here and asks apply_gradients to skip it.
    grads = sd::get_replica_context()->all_reduce(sd::ReduceOp::SUM, grads);
    optimizer->apply_gradients(tf::zip(grads, model->trainable_variables()),
                               {.skip_gradients_aggregation = true});
    return loss;
  };
  auto train_step = [&](sd::DistributedIterator& it) {
    return strategy.run(step_fn, it.get_next());
  };

  std::vector<float> kernel_before =
      model->trainable_variables().empty()
          ? std::vector<float>{}
          : model->trainable_variables()[0].value().to_vector<float>();
  double first_loss = 0, last_loss = 0;
  for (int step = 0; step < 30; ++step) {
    sd::PerReplica<tf::Tensor> losses = train_step(iterator);
    const double loss =
        strategy.reduce(sd::ReduceOp::MEAN, losses, std::nullopt).scalar_as_double();
    if (step == 0) first_loss = loss;
    last_loss = loss;
    if (step % 10 == 0) std::cout << "step " << step << ": loss " << loss << "\n";
  }
  std::cout << "loss " << first_loss << " -> " << last_loss << "\n";
  expect(std::isfinite(last_loss) && last_loss < first_loss, "the loss decreases");
  // The mirrored weights stay identical on every replica and moved.
  for (const tf::Variable& v : model->trainable_variables()) {
    std::vector<tf::Variable> copies = sd::distributed_components(v);
    expect(copies.size() == static_cast<size_t>(strategy.num_replicas_in_sync()),
           "one copy per replica");
    for (const tf::Variable& c : copies) {
      expect(c.value().to_vector<float>() == copies[0].value().to_vector<float>(),
             "mirrored copies agree");
    }
  }
  expect(kernel_before.empty() ||
             model->trainable_variables()[0].value().to_vector<float>() != kernel_before,
         "the kernel was updated");
  tpu::shutdown_tpu_system();
  return failures == 0 ? 0 : 1;
}
