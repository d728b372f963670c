// TensorFlow's guide "Distributed input" (tensorflow.org/tutorials/distribute/input),
// statement by statement. Each Python statement is quoted above its C++;
// docs/porting.md lists where the C++ cannot read the same.
//
//   build/examples/tutorials/input               # the guide: 10 and 5 epochs
//   build/examples/tutorials/input --epochs 2    # the test
//
// The guide splits the CPU into 2 logical devices itself (its first cell), so
// every MirroredStrategy here has 2 replicas. The values the guide's text
// gives (the split of partial batches, the StringLookup indices, the
// predictions of the enumerate example) are checked.
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "../example_check.h"
#include "strata/keras/keras.h"
#include "strata/strata.h"
#include "tutorial.h"

namespace tf = strata;
namespace sd = strata::distribute;
namespace keras = strata::keras;

namespace {

// print(x) of a distributed dataset element: Python's element is a tuple of
// PerReplica values, one per component; Strata's is a PerReplica of tuples.
std::ostream& operator<<(std::ostream& os, const sd::PerReplica<tf::data::Element>& x) {
  const size_t components = x.component(0).size();
  os << "(";
  for (size_t k = 0; k < components; ++k) {
    std::vector<tf::Tensor> values;
    for (const tf::data::Element& e : x.values()) values.push_back(e[k]);
    os << (k > 0 ? ", " : "") << sd::PerReplica<tf::Tensor>(values);
  }
  return os << ")";
}

// tf.print of a tuple of tensors: "([0 1], [2 3])".
std::string tf_print(const std::vector<tf::Tensor>& values) {
  std::string s = "(";
  for (size_t i = 0; i < values.size(); ++i) s += (i > 0 ? ", " : "") + values[i].values_string();
  return s + ")";
}

std::vector<int64_t> as_int64(const tf::Tensor& t) {
  return tf::cast(t, tf::DType::int64).to_vector<int64_t>();
}

}  // namespace

int main(int argc, char** argv) {
  const tutorial::Flags flags = tutorial::parse_flags(argc, argv, {.epochs = 10});

  // ## Distributed datasets

  // # Simulate multiple CPUs with virtual devices
  // N_VIRTUAL_DEVICES = 2
  // physical_devices = tf.config.list_physical_devices("CPU")
  // tf.config.set_logical_device_configuration(
  //     physical_devices[0], [tf.config.LogicalDeviceConfiguration() for _ in
  //     range(N_VIRTUAL_DEVICES)])
  const int N_VIRTUAL_DEVICES = 2;
  auto physical_devices = tf::config::list_physical_devices("CPU");
  tf::config::set_logical_device_configuration(
      physical_devices[0], std::vector<tf::config::LogicalDeviceConfiguration>(N_VIRTUAL_DEVICES));

  // print("Available devices:")
  // for i, device in enumerate(tf.config.list_logical_devices()):
  //   print("%d) %s" % (i, device))
  std::cout << "Available devices:\n";
  int i = 0;
  for (const tf::config::LogicalDevice& device : tf::config::list_logical_devices()) {
    std::cout << i << ") " << device << "\n";
    ++i;
  }

  // global_batch_size = 16
  // # Create a tf.data.Dataset object.
  // dataset = tf.data.Dataset.from_tensors(([1.], [1.])).repeat(100).batch(global_batch_size)
  int64_t global_batch_size = 16;
  auto dataset = tf::data::Dataset::from_tensors({tf::constant({1.f}), tf::constant({1.f})})
                     .repeat(100)
                     .batch(global_batch_size);

  // @tf.function
  // def train_step(inputs):
  auto train_step = [](const tf::data::Element& inputs) {
    //   features, labels = inputs
    const tf::Tensor& features = inputs[0];
    const tf::Tensor& labels = inputs[1];
    //   return labels - 0.3 * features
    return labels - 0.3f * features;
  };

  // # Iterate over the dataset using the for..in construct.
  // for inputs in dataset:
  //   print(train_step(inputs))
  int64_t rows = 0;
  for (const tf::data::Element& inputs : dataset) {
    tf::Tensor out = train_step(inputs);
    std::cout << out << "\n";
    rows += out.shape()[0];
  }
  example::expect(rows == 100, "the batches hold the 100 examples");

  // ### `tf.distribute.Strategy.experimental_distribute_dataset`

  // #### Usage

  // global_batch_size = 16
  // mirrored_strategy = tf.distribute.MirroredStrategy()
  global_batch_size = 16;
  sd::MirroredStrategy mirrored_strategy;
  example::expect(mirrored_strategy.num_replicas_in_sync() == N_VIRTUAL_DEVICES,
                  "one replica per virtual device");

  // dataset = tf.data.Dataset.from_tensors(([1.], [1.])).repeat(100).batch(global_batch_size)
  dataset = tf::data::Dataset::from_tensors({tf::constant({1.f}), tf::constant({1.f})})
                .repeat(100)
                .batch(global_batch_size);
  // # Distribute input using the `experimental_distribute_dataset`.
  // dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset)
  sd::DistributedDataset dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset);
  // # 1 global batch of data fed to the model in 1 step.
  // print(next(iter(dist_dataset)))
  sd::PerReplica<tf::data::Element> first = dist_dataset.iter().get_next();
  std::cout << first << "\n";
  example::expect(first.component(0)[0].shape() == tf::TensorShape({8, 1}) &&
                      first.component(1)[0].shape() == tf::TensorShape({8, 1}),
                  "a global batch of 16 gives each of 2 replicas 8 examples");

  // #### Properties

  // ##### Sharding

  // dataset = tf.data.Dataset.from_tensors(([1.], [1.])).repeat(64).batch(16)
  // options = tf.data.Options()
  // options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
  // dataset = dataset.with_options(options)
  dataset = tf::data::Dataset::from_tensors({tf::constant({1.f}), tf::constant({1.f})})
                .repeat(64)
                .batch(16);
  tf::data::Options options;
  options.experimental_distribute.auto_shard_policy = tf::data::AutoShardPolicy::DATA;
  dataset = dataset.with_options(options);

  // ### `tf.distribute.Strategy.distribute_datasets_from_function`

  // #### Usage

  // mirrored_strategy = tf.distribute.MirroredStrategy()
  // (A second strategy over the same devices; the C++ keeps the first.)

  // def dataset_fn(input_context):
  auto dataset_fn = [&](const sd::InputContext& input_context) {
    //   batch_size = input_context.get_per_replica_batch_size(global_batch_size)
    const int64_t batch_size = input_context.get_per_replica_batch_size(global_batch_size);
    //   dataset = tf.data.Dataset.from_tensors(([1.], [1.])).repeat(64).batch(16)
    auto ds = tf::data::Dataset::from_tensors({tf::constant({1.f}), tf::constant({1.f})})
                  .repeat(64)
                  .batch(16);
    //   dataset = dataset.shard(
    //       input_context.num_input_pipelines, input_context.input_pipeline_id)
    ds = ds.shard(input_context.num_input_pipelines(), input_context.input_pipeline_id());
    //   dataset = dataset.batch(batch_size)
    ds = ds.batch(batch_size);
    //   dataset = dataset.prefetch(2)  # This prefetches 2 batches per device.
    ds = ds.prefetch(2);
    //   return dataset
    return ds;
  };

  // dist_dataset = mirrored_strategy.distribute_datasets_from_function(dataset_fn)
  dist_dataset = mirrored_strategy.distribute_datasets_from_function(dataset_fn);
  // (Not in the guide: the dataset's per-replica shape, [batch_size, 16, 1].)
  std::cout << "element_spec: " << dist_dataset.element_spec()[0] << "\n";

  // ## Distributed iterators

  // ### Usages

  // #### Use a Pythonic for loop construct

  // global_batch_size = 16
  // mirrored_strategy = tf.distribute.MirroredStrategy()
  global_batch_size = 16;

  // dataset = tf.data.Dataset.from_tensors(([1.], [1.])).repeat(100).batch(global_batch_size)
  // dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset)
  dataset = tf::data::Dataset::from_tensors({tf::constant({1.f}), tf::constant({1.f})})
                .repeat(100)
                .batch(global_batch_size);
  dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset);

  // @tf.function
  // def train_step(inputs):
  //   features, labels = inputs
  //   return labels - 0.3 * features
  // (the same train_step as above)

  // for x in dist_dataset:
  //   # train_step trains the model using the dataset elements
  //   loss = mirrored_strategy.run(train_step, args=(x,))
  //   print("Loss is ", loss)
  int64_t examples = 0;
  for (const auto& x : dist_dataset) {
    sd::PerReplica<tf::Tensor> loss = mirrored_strategy.run(train_step, x);
    std::cout << "Loss is  " << loss << "\n";
    for (const tf::Tensor& l : mirrored_strategy.experimental_local_results(loss)) {
      examples += l.shape()[0];
      for (float v : l.to_vector<float>())
        example::expect(std::abs(v - 0.7f) < 1e-6, "the loss is 1 - 0.3 * 1");
    }
  }
  example::expect(examples == 100, "the replicas see the 100 examples once");

  // #### Use `iter` to create an explicit iterator

  // num_epochs = 10
  // steps_per_epoch = 5
  int num_epochs = flags.epochs;
  int steps_per_epoch = 5;
  // for epoch in range(num_epochs):
  for (int epoch = 0; epoch < num_epochs; ++epoch) {
    //   dist_iterator = iter(dist_dataset)
    sd::DistributedIterator dist_iterator = dist_dataset.iter();
    //   for step in range(steps_per_epoch):
    for (int step = 0; step < steps_per_epoch; ++step) {
      //     # train_step trains the model using the dataset elements
      //     loss = mirrored_strategy.run(train_step, args=(next(dist_iterator),))
      //     # which is the same as
      //     # loss = mirrored_strategy.run(train_step, args=(dist_iterator.get_next(),))
      //     print("Loss is ", loss)
      sd::PerReplica<tf::Tensor> loss = mirrored_strategy.run(train_step, dist_iterator.get_next());
      std::cout << "Loss is  " << loss << "\n";
    }
  }

  // # You can break the loop with `get_next_as_optional` by checking if the `Optional` contains a
  // # value
  // global_batch_size = 4
  // steps_per_loop = 5
  // strategy = tf.distribute.MirroredStrategy()
  global_batch_size = 4;
  const int steps_per_loop = 5;
  sd::MirroredStrategy& strategy = mirrored_strategy;

  // dataset = tf.data.Dataset.range(9).batch(global_batch_size)
  // distributed_iterator = iter(strategy.experimental_distribute_dataset(dataset))
  // (made after train_fn: C++'s parameter would shadow it)
  dataset = tf::data::Dataset::range(9).batch(global_batch_size);

  // @tf.function
  // def train_fn(distributed_iterator):
  std::vector<int64_t> seen;
  auto train_fn = [&](sd::DistributedIterator& distributed_iterator) {
    //   for _ in tf.range(steps_per_loop):
    for (int step = 0; step < steps_per_loop; ++step) {
      //     optional_data = distributed_iterator.get_next_as_optional()
      std::optional<sd::PerReplica<tf::data::Element>> optional_data =
          distributed_iterator.get_next_as_optional();
      //     if not optional_data.has_value():
      //       break
      if (!optional_data.has_value()) break;
      //     per_replica_results = strategy.run(lambda x: x, args=(optional_data.get_value(),))
      sd::PerReplica<tf::Tensor> per_replica_results =
          strategy.run([](const tf::data::Element& x) { return x[0]; }, optional_data.value());
      //     tf.print(strategy.experimental_local_results(per_replica_results))
      std::cout << tf_print(strategy.experimental_local_results(per_replica_results)) << "\n";
      for (const tf::Tensor& t : strategy.experimental_local_results(per_replica_results))
        for (int64_t v : as_int64(t)) seen.push_back(v);
    }
  };
  sd::DistributedIterator distributed_iterator =
      strategy.experimental_distribute_dataset(dataset).iter();
  // train_fn(distributed_iterator)
  train_fn(distributed_iterator);
  example::expect(seen == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8},
                  "the replicas' batches hold 0..8 once, in order");

  // ## Using the `element_spec` property

  // global_batch_size = 16
  // epochs = 5
  // steps_per_epoch = 5
  // mirrored_strategy = tf.distribute.MirroredStrategy()
  global_batch_size = 16;
  const int epochs = flags.epochs < 5 ? flags.epochs : 5;
  steps_per_epoch = 5;

  // dataset = tf.data.Dataset.from_tensors(([1.], [1.])).repeat(100).batch(global_batch_size)
  // dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset)
  dataset = tf::data::Dataset::from_tensors({tf::constant({1.f}), tf::constant({1.f})})
                .repeat(100)
                .batch(global_batch_size);
  dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset);

  // @tf.function(input_signature=[dist_dataset.element_spec])
  // def train_step(per_replica_inputs):
  std::cout << "element_spec: (" << dist_dataset.element_spec()[0] << ", "
            << dist_dataset.element_spec()[1] << ")\n";
  auto train_step_2 = [&](const sd::PerReplica<tf::data::Element>& per_replica_inputs) {
    //   def step_fn(inputs):
    //     return 2 * inputs
    // (`inputs` is the (features, labels) tuple, so Python's `2 * inputs` repeats it:
    // (features, labels, features, labels), which tf.print shows below.)
    auto step_fn = [](const tf::data::Element& inputs) {
      return std::tuple{inputs[0], inputs[1], inputs[0], inputs[1]};
    };
    //   return mirrored_strategy.run(step_fn, args=(per_replica_inputs,))
    return mirrored_strategy.run(step_fn, per_replica_inputs);
  };

  // for _ in range(epochs):
  for (int e = 0; e < epochs; ++e) {
    //   iterator = iter(dist_dataset)
    sd::DistributedIterator iterator = dist_dataset.iter();
    //   for _ in range(steps_per_epoch):
    for (int s = 0; s < steps_per_epoch; ++s) {
      //     output = train_step(next(iterator))
      //     tf.print(output)
      auto output = train_step_2(iterator.get_next());
      std::cout << "(" << std::get<0>(output) << ", " << std::get<1>(output) << ", "
                << std::get<2>(output) << ", " << std::get<3>(output) << ")\n";
      for (const tf::Tensor& f : mirrored_strategy.experimental_local_results(std::get<2>(output)))
        example::expect(f.to_vector<float>() == std::vector<float>(8, 1.f),
                        "2 * inputs repeats the (features, labels) tuple");
    }
  }

  // ## Data preprocessing

  // ### Preprocessing with a custom training loop

  // strategy = tf.distribute.MirroredStrategy()
  // vocab = ["a", "b", "c", "d", "f"]
  const std::vector<std::string> vocab = {"a", "b", "c", "d", "f"};

  std::shared_ptr<keras::layers::StringLookupLayer> layer;
  // with strategy.scope():
  {
    auto scope = strategy.scope();
    //   # Create the layer(s) under scope.
    //   layer = tf.keras.layers.StringLookup(vocabulary=vocab)
    layer = keras::layers::StringLookup({.vocabulary = vocab});
  }

  // def dataset_fn(input_context):
  auto lookup_dataset_fn = [&](const sd::InputContext& input_context) {
    //   # a tf.data.Dataset
    //   dataset = tf.data.Dataset.from_tensor_slices(["a", "c", "e"]).repeat()
    auto ds = tf::data::Dataset::from_tensor_slices(
                  {tf::constant(std::vector<std::string>{"a", "c", "e"})})
                  .repeat();

    //   # Custom your batching, sharding, prefetching, etc.
    //   global_batch_size = 4
    //   batch_size = input_context.get_per_replica_batch_size(global_batch_size)
    //   dataset = dataset.batch(batch_size)
    //   dataset = dataset.shard(
    //       input_context.num_input_pipelines,
    //       input_context.input_pipeline_id)
    const int64_t lookup_global_batch_size = 4;
    const int64_t batch_size = input_context.get_per_replica_batch_size(lookup_global_batch_size);
    ds = ds.batch(batch_size);
    ds = ds.shard(input_context.num_input_pipelines(), input_context.input_pipeline_id());

    //   # Apply the preprocessing layer(s) to the tf.data.Dataset
    //   def preprocess_with_kpl(input):
    //     return layer(input)
    auto preprocess_with_kpl = [&](const tf::data::Element& input) -> tf::data::Element {
      return {(*layer)(input[0])};
    };

    //   processed_ds = dataset.map(preprocess_with_kpl)
    //   return processed_ds
    auto processed_ds = ds.map(preprocess_with_kpl);
    return processed_ds;
  };

  // distributed_dataset = strategy.distribute_datasets_from_function(dataset_fn)
  sd::DistributedDataset distributed_dataset =
      strategy.distribute_datasets_from_function(lookup_dataset_fn);

  // # Print out a few example batches.
  // distributed_dataset_iterator = iter(distributed_dataset)
  // for _ in range(3):
  //   print(next(distributed_dataset_iterator))
  sd::DistributedIterator distributed_dataset_iterator = distributed_dataset.iter();
  std::vector<int64_t> indices;
  for (int k = 0; k < 3; ++k) {
    sd::PerReplica<tf::data::Element> batch = distributed_dataset_iterator.get_next();
    std::cout << sd::PerReplica<tf::Tensor>({batch.values()[0][0], batch.values()[1][0]}) << "\n";
    for (const tf::data::Element& e : batch.values())
      for (int64_t v : as_int64(e[0])) indices.push_back(v);
  }
  // "a" is 1, "c" is 3 and the out-of-vocabulary "e" is 0, repeating.
  example::expect(indices == std::vector<int64_t>{1, 3, 0, 1, 3, 0, 1, 3, 0, 1, 3, 0},
                  "StringLookup maps a, c, e to 1, 3, 0");

  // ## Caveats

  // mirrored_strategy = tf.distribute.MirroredStrategy()
  // dataset_size = 24
  // batch_size = 6
  // dataset = tf.data.Dataset.range(dataset_size).enumerate().batch(batch_size)
  // dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset)
  const int64_t dataset_size = 24;
  const int64_t batch_size = 6;
  dataset = tf::data::Dataset::range(dataset_size).enumerate().batch(batch_size);
  dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset);

  // def predict(index, inputs):
  //   outputs = 2 * inputs
  //   return index, outputs
  auto predict = [](const tf::data::Element& element) {
    const tf::Tensor& index = element[0];
    const tf::Tensor& inputs = element[1];
    tf::Tensor outputs = 2 * inputs;
    return std::tuple{index, outputs};
  };

  // result = {}
  std::map<int64_t, int64_t> result;
  // for index, inputs in dist_dataset:
  for (const auto& index_and_inputs : dist_dataset) {
    //   output_index, outputs = mirrored_strategy.run(predict, args=(index, inputs))
    auto [output_index, outputs] = mirrored_strategy.run(predict, index_and_inputs);
    //   indices = list(mirrored_strategy.experimental_local_results(output_index))
    //   rindices = []
    //   for a in indices:
    //     rindices.extend(a.numpy())
    std::vector<int64_t> rindices;
    for (const tf::Tensor& a : mirrored_strategy.experimental_local_results(output_index))
      for (int64_t v : as_int64(a)) rindices.push_back(v);
    //   outputs = list(mirrored_strategy.experimental_local_results(outputs))
    //   routputs = []
    //   for a in outputs:
    //     routputs.extend(a.numpy())
    std::vector<int64_t> routputs;
    for (const tf::Tensor& a : mirrored_strategy.experimental_local_results(outputs))
      for (int64_t v : as_int64(a)) routputs.push_back(v);
    //   for i, value in zip(rindices, routputs):
    //     result[i] = value
    for (size_t k = 0; k < rindices.size(); ++k) result[rindices[k]] = routputs[k];
  }

  // print(result)
  std::cout << "{";
  for (const auto& [index, value] : result)
    std::cout << (index > 0 ? ", " : "") << index << ": " << value;
  std::cout << "}\n";
  bool all_predicted = result.size() == static_cast<size_t>(dataset_size);
  for (const auto& [index, value] : result) all_predicted = all_predicted && value == 2 * index;
  example::expect(all_predicted, "every index gets its prediction 2 * index");

  // ## Tensor inputs instead of tf.data

  // ### Use experimental_distribute_values_from_function for arbitrary tensor inputs

  // mirrored_strategy = tf.distribute.MirroredStrategy()

  // def value_fn(ctx):
  //   return tf.constant(ctx.replica_id_in_sync_group)
  auto value_fn = [](const sd::ValueContext& ctx) {
    return tf::constant(ctx.replica_id_in_sync_group());
  };

  // distributed_values = mirrored_strategy.experimental_distribute_values_from_function(value_fn)
  auto distributed_values =
      mirrored_strategy.experimental_distribute_values_from_function(value_fn);
  // for _ in range(4):
  //   result = mirrored_strategy.run(lambda x: x, args=(distributed_values,))
  //   print(result)
  for (int k = 0; k < 4; ++k) {
    sd::PerReplica<tf::Tensor> values =
        mirrored_strategy.run([](const tf::Tensor& x) { return x; }, distributed_values);
    std::cout << values << "\n";
    const auto local = mirrored_strategy.experimental_local_results(values);
    example::expect(local[0].item<int32_t>() == 0 && local[1].item<int32_t>() == 1,
                    "each replica gets its replica id");
  }

  // ### Use tf.data.Dataset.from_generator if your input is from a generator

  // mirrored_strategy = tf.distribute.MirroredStrategy()
  // def input_gen():
  //   while True:
  //     yield np.random.rand(4)
  int64_t draws = 0;
  auto input_gen = [&draws]() -> tf::data::GeneratorFn {
    return [&draws]() -> std::optional<tf::data::Element> {
      return tf::data::Element{tf::random::uniform({4}, {.seed = ++draws})};
    };
  };

  // # use Dataset.from_generator
  // dataset = tf.data.Dataset.from_generator(
  //     input_gen, output_types=(tf.float32), output_shapes=tf.TensorShape([4]))
  // dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset)
  // iterator = iter(dist_dataset)
  dataset = tf::data::Dataset::from_generator(
      input_gen, {tf::TensorSpec(tf::TensorShape({4}), tf::DType::float32)});
  dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset);
  sd::DistributedIterator iterator = dist_dataset.iter();
  // for _ in range(4):
  //   result = mirrored_strategy.run(lambda x: x, args=(next(iterator),))
  //   print(result)
  for (int k = 0; k < 4; ++k) {
    sd::PerReplica<tf::Tensor> values =
        mirrored_strategy.run([](const tf::data::Element& x) { return x[0]; }, iterator.get_next());
    std::cout << values << "\n";
    int64_t total = 0;
    for (const tf::Tensor& t : mirrored_strategy.experimental_local_results(values))
      total += t.shape()[0];
    example::expect(total == 4, "the generator's 4 values are split between the replicas");
  }

  return example::exit_code();
}
