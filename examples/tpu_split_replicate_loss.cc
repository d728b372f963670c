// The seed page's experimental_replicate_to_logical_devices example: images
// split [1, 2, 4, 1] (2 ways in width, 4 in height) over the 8 logical devices
// of one replica, the model run spatially partitioned, and the loss computed
// on every logical device from replicated labels and logits.
//
//   STRATA_CPU_DEVICES=8 build/examples/tpu_split_replicate_loss
//   (8 devices: a 2x2x1x2 mesh; computation_shape [2, 2, 1, 2] = 8 cores per replica)
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "strata/strata.h"
#include "strata/tpu/sharded/sharded_ops.h"

namespace tf = strata;
namespace sd = strata::distribute;
namespace sh = strata::tpu::sharded;
namespace tpu = strata::tpu::experimental;

namespace {
int failures = 0;
void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::cerr << "unexpected result: " << what << "\n";
    ++failures;
  }
}

// model(): Conv 8 3x3 SAME + ReLU, MaxPool 2, Flatten, Dense 10.
struct Model {
  tf::Tensor w1 = tf::random::normal({3, 3, 3, 8}, {.stddev = 0.3, .seed = 1});
  tf::Tensor b1 = tf::random::normal({8}, {.stddev = 0.1, .seed = 2});
  tf::Tensor w2 = tf::random::normal({8 * 8 * 8, 10}, {.stddev = 0.05, .seed = 3});
  // Plain ops: on images annotated inside a TPUStrategy replica they run
  // sharded (strata/tpu/sharded/sharded_ops.h, "The normal op API"); Flatten mixes the
  // split dimensions, so it gathers (counted) and the Dense runs replicated.
  tf::Tensor operator()(const tf::Tensor& images) const {
    tf::Tensor h = tf::relu(tf::add(tf::nn::conv2d(images, w1, {.padding = "SAME"}), b1));
    h = tf::nn::max_pool2d(h, {2, 2}, {2, 2}, "VALID");
    return tf::matmul(tf::reshape(h, {images.shape()[0], -1}), w2);
  }
};

tf::Tensor loss_fn(const tf::Tensor& labels, const tf::Tensor& logits) {
  return tf::reduce_mean(tf::nn::sparse_softmax_cross_entropy_with_logits(labels, logits));
}
}  // namespace

int main() {
  tpu::Topology topology = tpu::initialize_tpu_system();
  tpu::DeviceAssignment device_assignment = tpu::DeviceAssignment::build(
      topology, {.computation_shape = {2, 2, 1, 2}, .num_replicas = 1});
  sd::TPUStrategy strategy(device_assignment);
  std::cout << strategy.num_replicas_in_sync() << " replica x "
            << strategy.num_logical_devices_per_replica() << " logical devices\n";
  const Model model;

  tf::Tensor images = tf::random::uniform({4, 16, 16, 3}, {.seed = 4});
  tf::Tensor labels = tf::random::uniform_int({4}, 0, 10, {.seed = 5});
  auto dataset = tf::data::Dataset::from_tensor_slices({images, labels}).batch(4);
  sd::DistributedDataset dist_dataset = strategy.experimental_distribute_dataset(dataset);
  sd::DistributedIterator iterator = dist_dataset.iter();

  sh::reset_fallback_counts();
  auto step_fn = [&](const tf::data::Element& inputs) {
    tf::Tensor batch_images =
        strategy.experimental_split_to_logical_devices(inputs[0], {1, 2, 4, 1});
    // model() runs on the 8 logical devices with the images split 2 * 4 ways.
    tf::Tensor output = model(batch_images);
    // For the loss, all logical devices share the same logits and labels:
    // every logical device computes the loss from its copy.
    tf::Tensor batch_labels = strategy.experimental_replicate_to_logical_devices(inputs[1]);
    tf::Tensor logits = strategy.experimental_replicate_to_logical_devices(output);
    return loss_fn(batch_labels, logits);
  };
  sd::PerReplica<tf::Tensor> out = strategy.run(step_fn, iterator.get_next());
  const sh::ShardedTensor* carried = sh::carried_shards(out.values()[0]);
  expect(carried != nullptr && carried->sharding().is_replicated(), "a replicated loss");
  if (carried == nullptr) return 1;
  const sh::ShardedTensor& loss = *carried;

  const double expected = loss_fn(labels, model(images)).scalar_as_double();
  std::cout << "loss on each logical device:";
  for (int d = 0; d < loss.num_logical_devices(); ++d) {
    const double l = loss.shard(d).scalar_as_double();
    std::cout << " " << l;
    expect(std::abs(l - expected) <= 1e-5 * std::abs(expected),
           "logical device " + std::to_string(d) + ": the unpartitioned model's loss");
    expect(loss.shard(d).device() == strategy.logical_devices(0)[static_cast<size_t>(d)]->name(),
           "each loss copy on its logical device");
  }
  std::cout << "\nunpartitioned loss: " << expected << "\n";
  std::cout << "fallbacks: conv2d " << sh::fallback_count("conv2d") << ", max_pool2d "
            << sh::fallback_count("max_pool2d") << ", reshape (flatten) "
            << sh::fallback_count("reshape") << "\n";
  expect(sh::fallback_count("conv2d") == 0 && sh::fallback_count("max_pool2d") == 0,
         "convolution and pooling ran spatially partitioned");
  tpu::shutdown_tpu_system();
  return failures == 0 ? 0 : 1;
}
