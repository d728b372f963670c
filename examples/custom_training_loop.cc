// The seed page's custom training loop with a Keras model, in C++, and the
// same training through model.fit:
//
//   with strategy.scope():
//     model = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(5,))])
//     optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
//   dist_dataset = strategy.experimental_distribute_datasets_from_function(dataset_fn)
//   def step_fn(inputs):
//     features, labels = inputs
//     with tf.GradientTape() as tape:
//       logits = model(features, training=True)
//       loss = tf.keras.losses.sparse_categorical_crossentropy(labels, logits)
//     grads = tape.gradient(loss, model.trainable_variables)
//     optimizer.apply_gradients(zip(grads, model.trainable_variables))
//   strategy.run(step_fn, args=(next(iterator),))
//
// Under a MirroredStrategy over every local device (STRATA_CPU_DEVICES=2: two
// replicas), each replica takes a batch of one example; the per-replica loss
// is divided by the global batch size (tf.nn.compute_average_loss), so the
// all-reduced (summed) gradients are the gradient of the mean over the global
// batch. A second model, given the same initial weights, is trained with
// compile/fit on one device with batches holding both examples: the two must
// end with the same weights.
//
//   STRATA_CPU_DEVICES=2 build/examples/custom_training_loop
#include <cmath>
#include <iostream>
#include <vector>

#include "example_check.h"
#include "strata/keras/keras.h"
#include "strata/strata.h"

namespace tf = strata;
namespace sd = strata::distribute;
namespace keras = strata::keras;

int main() {
  sd::MirroredStrategy strategy;
  const int replicas = strategy.num_replicas_in_sync();
  std::cout << "replicas in sync: " << replicas << "\n";

  std::shared_ptr<keras::SequentialModel> model;
  std::shared_ptr<keras::optimizers::SGDOptimizer> optimizer;
  {
    auto scope = strategy.scope();
    model = keras::Sequential({keras::layers::Dense(2, {.input_shape = {5}})});
    optimizer = keras::optimizers::SGD({.learning_rate = 0.1});
    // The slots (none for plain SGD) and the variable list, built in the scope.
    optimizer->build(model->trainable_variables());
  }
  model->summary();
  const std::vector<tf::Tensor> initial = model->get_weights();

  // The seed's data: as many random examples as replicas, labels in {0, 1}.
  const tf::Tensor x = tf::random::uniform({replicas, 5}, {.seed = 1});
  const tf::Tensor y = tf::random::uniform_int({replicas, 1}, 0, 2, {.seed = 2});
  auto dataset_fn = [&](const sd::InputContext&) {
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
    tf::Tensor per_example =
        keras::losses::sparse_categorical_crossentropy(labels, logits, {.from_logits = true});
    tf::Tensor loss = tf::nn::compute_average_loss(per_example, {.global_batch_size = replicas});
    std::vector<tf::Tensor> grads = tape.gradient(loss, model->trainable_variables());
    // Under the strategy apply_gradients sums the replicas' gradients (an
    // all-reduce) and applies the same update on every replica.
    optimizer->apply_gradients(tf::zip(grads, model->trainable_variables()));
    return loss;
  };

  const int steps = 20;
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    sd::PerReplica<tf::Tensor> per_replica = strategy.run(step_fn, iterator.get_next());
    // Each replica's loss is its share of the global mean: their SUM is the mean.
    losses.push_back(
        strategy.reduce(sd::ReduceOp::SUM, per_replica, std::nullopt).scalar_as_double());
    if (step % 5 == 0) std::cout << "step " << step << ": loss " << losses.back() << "\n";
  }
  example::expect(std::isfinite(losses.back()) && losses.back() < losses.front(),
                  "the loss decreases");
  for (const tf::Variable& v : model->trainable_variables()) {
    for (const tf::Variable& c : sd::distributed_components(v)) {
      example::expect(c.value().to_vector<float>() == v.value().to_vector<float>(),
                      "mirrored copies agree");
    }
  }

  // The same training through Keras's loop, on one device.
  auto reference = keras::Sequential({keras::layers::Dense(2, {.input_shape = {5}})});
  reference->set_weights(initial);
  reference->compile({.optimizer = keras::optimizers::SGD({.learning_rate = 0.1}),
                      .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true})});
  keras::History h = reference->fit(
      x, y, {.batch_size = replicas, .epochs = steps, .verbose = 0, .shuffle = false});
  double max_diff = 0;
  const std::vector<tf::Tensor> a = model->get_weights(), b = reference->get_weights();
  for (size_t i = 0; i < a.size(); ++i) {
    const std::vector<float> va = a[i].to_vector<float>(), vb = b[i].to_vector<float>();
    for (size_t j = 0; j < va.size(); ++j)
      max_diff = std::max(max_diff, double(std::abs(va[j] - vb[j])));
  }
  std::cout << "fit: loss " << h.history["loss"].front() << " -> " << h.history["loss"].back()
            << "; max |custom loop - fit| weight difference " << max_diff << "\n";
  example::expect(max_diff < 1e-5, "the custom loop and fit end with the same weights");
  example::expect(std::abs(h.history["loss"].back() - losses.back()) < 1e-5,
                  "the last losses agree");
  return example::exit_code();
}
