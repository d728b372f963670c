// The seed page's experimental_split_to_logical_devices example: a TPU system
// of 8 logical devices and 1 replica (DeviceAssignment.build with
// computation_shape [1, 2, 2, 2] on a 1x2x2x2 mesh), and a step that splits
// the images [1, 2, 4, 1] (2 ways in width, 4 in height) and runs the model
// on the 8 logical devices. The output equals the unpartitioned model's.
//
//   STRATA_CPU_DEVICES=8 STRATA_TPU_TOPOLOGY=1x2x2x2 build/examples/tpu_split_eight_devices
#include <algorithm>
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

// model(): Conv 16 3x3 SAME + ReLU, AvgPool 2, Conv 16 3x3 stride 2 SAME + ReLU, global mean.
struct Model {
  tf::Tensor w1 = tf::random::normal({3, 3, 3, 16}, {.stddev = 0.3, .seed = 11});
  tf::Tensor w2 = tf::random::normal({3, 3, 16, 16}, {.stddev = 0.1, .seed = 12});
  // Plain ops: on a tensor annotated inside a TPUStrategy replica they run
  // sharded (strata/tpu/sharded/sharded_ops.h, "The normal op API"); elsewhere as usual.
  tf::Tensor operator()(const tf::Tensor& x) const {
    tf::Tensor h = tf::relu(tf::nn::conv2d(x, w1, {.padding = "SAME"}));
    h = tf::nn::avg_pool2d(h, {2, 2}, {2, 2}, "VALID");
    h = tf::relu(tf::nn::conv2d(h, w2, {.strides = {2, 2}, .padding = "SAME"}));
    return tf::reduce_mean(h, {.axis = {1, 2}});
  }
};

double relative_error(const tf::Tensor& a, const tf::Tensor& b) {
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(x[i] - y[i])));
    scale = std::max(scale, static_cast<double>(std::abs(y[i])));
  }
  return diff / scale;
}
}  // namespace

int main() {
  tpu::Topology topology = tpu::initialize_tpu_system();
  std::cout << "mesh "
            << tf::TensorShape(
                   std::vector<int64_t>(topology.mesh_shape().begin(), topology.mesh_shape().end()))
            << "\n";
  tpu::DeviceAssignment device_assignment = tpu::DeviceAssignment::build(
      topology, {.computation_shape = {1, 2, 2, 2}, .num_replicas = 1});
  sd::TPUStrategy strategy(device_assignment);
  expect(strategy.num_logical_devices_per_replica() == 8, "8 logical devices");
  const Model model;

  tf::Tensor images = tf::random::uniform({2, 32, 32, 3}, {.seed = 13});
  sd::DistributedDataset dist_dataset = strategy.experimental_distribute_dataset(
      tf::data::Dataset::from_tensor_slices({images}).batch(2));
  sd::DistributedIterator iterator = dist_dataset.iter();

  sh::reset_fallback_counts();
  auto step_fn = [&](const tf::data::Element& inputs) {
    tf::Tensor split = strategy.experimental_split_to_logical_devices(inputs[0], {1, 2, 4, 1});
    // model() runs on the 8 logical devices with the inputs split 2 * 4 ways:
    // its result carries the shards it was computed as.
    return model(split);
  };
  sd::PerReplica<tf::Tensor> out = strategy.run(step_fn, iterator.get_next());
  const tf::Tensor& full = out.values()[0];
  const sh::ShardedTensor* carried = sh::carried_shards(full);
  expect(carried != nullptr, "the output carries its shards");
  if (carried == nullptr) return 1;
  const sh::ShardedTensor& output = *carried;
  std::cout << "output sharding " << output.sharding().to_string() << ", shape " << output.shape()
            << "\n";
  for (int d = 0; d < 8; ++d) {
    std::cout << "logical device " << d << " -> " << output.shard(d).device() << "\n";
  }
  const double err = relative_error(full, model(images));
  std::cout << "relative error vs unpartitioned: " << err << "\n";
  expect(err <= 1e-5, "equal to the unpartitioned model");
  expect(sh::fallback_count("conv2d") + sh::fallback_count("avg_pool2d") +
                 sh::fallback_count("reduce_mean") ==
             0,
         "no op needed the gather fallback");
  tpu::shutdown_tpu_system();
  return failures == 0 ? 0 : 1;
}
