#include "strata/tpu/sharded/sharded_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "strata/autodiff/gradient_tape.h"
#include "strata/core/config.h"
#include "strata/core/device.h"
#include "strata/core/variable.h"
#include "strata/kernels/nn.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"
#include "strata/ops/random_ops.h"
#include "strata/testing/logical_devices.h"
#include "strata/tpu/device_assignment.h"
#include "strata/tpu/sharded/internal/sharded_exec.h"

namespace strata::tpu::sharded {
namespace {

class ShardedOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    strata::testing::use_logical_cpus(8);
    reset_fallback_counts();
  }

  static std::vector<const Device*> devices(int n) {
    std::vector<const Device*> all = local_devices();
    return std::vector<const Device*>(all.begin(), all.begin() + n);
  }
  static tpu::Sharding split(const Tensor& t, const std::vector<int64_t>& parts) {
    int64_t n = 1;
    for (int64_t p : parts) n *= p;
    return tpu::Sharding::split_to_logical_devices(t.shape(), parts, static_cast<int>(n));
  }
  static ShardedTensor sharded(const Tensor& t, const std::vector<int64_t>& parts) {
    tpu::Sharding s = split(t, parts);
    return shard(t, s, devices(s.num_logical_devices()));
  }
};

Tensor randn(const TensorShape& shape, uint64_t seed, DType dtype = DType::float32) {
  return random::normal(shape, {.dtype = dtype, .seed = seed});
}

// max |a - b| / max |b|: the relative error of a whole tensor.
double relative_error(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const Tensor x = cast(a, DType::float64), y = cast(b, DType::float64);
  const double* p = x.data<double>();
  const double* q = y.data<double>();
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    diff = std::max(diff, std::abs(p[i] - q[i]));
    scale = std::max(scale, std::abs(q[i]));
  }
  return scale == 0 ? diff : diff / scale;
}

// Each shard of a sharded op runs under its own logical device, as the
// per-core programs of a TPU computation do (tf.tpu's
// split/replicate model parallelism): the caller runs the first, each other
// one is a task of its device's pool.
TEST_F(ShardedOpsTest, RunShardsRunsEachShardUnderItsDeviceAndRethrowsTheFirstError) {
  const std::vector<const Device*> devs = devices(4);
  std::vector<std::string> ran_under(devs.size());
  std::vector<std::thread::id> ran_on(devs.size());
  std::vector<Tensor> out = internal::run_shards(devs, {0, 1, 3}, [&](int d) {
    ran_under[static_cast<size_t>(d)] = current_device().name();
    ran_on[static_cast<size_t>(d)] = std::this_thread::get_id();
    return strata::constant(static_cast<float>(d));
  });
  for (int d : {0, 1, 3}) {
    EXPECT_EQ(ran_under[static_cast<size_t>(d)], devs[static_cast<size_t>(d)]->name());
    EXPECT_EQ(out[static_cast<size_t>(d)].scalar_as_double(), d);
  }
  EXPECT_FALSE(out[2].defined());  // not in `which`
  EXPECT_EQ(ran_on[0], std::this_thread::get_id());

  // Every shard runs to completion; the error of the first failing one (in
  // `which` order) reaches the caller.
  std::atomic<int> ran{0};
  try {
    internal::run_shards(devs, {0, 1, 2, 3}, [&](int d) -> Tensor {
      ran.fetch_add(1);
      if (d == 1 || d == 3) throw InvalidArgumentError(str_cat("shard ", d, " failed"));
      return Tensor();
    });
    ADD_FAILURE() << "run_shards returned although shards 1 and 3 threw";
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "shard 1 failed");
  }
  EXPECT_EQ(ran.load(), 4);
}

TEST_F(ShardedOpsTest, ShardsMayRunShardedWorkOfTheirOwn) {
  // A shard (on a pool thread, or on the caller) that starts shards of its own
  // on the same devices' pools finishes: a waiter runs what no thread started.
  const std::vector<const Device*> devs = devices(4);
  std::vector<Tensor> out = internal::run_shards(devs, {0, 1, 2, 3}, [&](int d) {
    std::vector<Tensor> inner = internal::run_shards(devs, {0, 1, 2, 3}, [&](int e) {
      return strata::constant(static_cast<float>(10 * d + e));
    });
    return add_n(inner);
  });
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(out[static_cast<size_t>(d)].scalar_as_double(), 40 * d + 6) << "shard " << d;
  }
}

TEST_F(ShardedOpsTest, ShardPlacesOneTilePerLogicalDeviceAndUnshardRestoresTheTensor) {
  Tensor x = randn({2, 8, 12, 3}, 1);
  ShardedTensor s = sharded(x, {1, 2, 4, 1});
  ASSERT_EQ(s.num_logical_devices(), 8);
  for (int d = 0; d < 8; ++d) {
    EXPECT_EQ(s.shard(d).shape(), TensorShape({2, 4, 3, 3}));
    EXPECT_EQ(s.shard(d).device(), local_devices()[static_cast<size_t>(d)]->name());
  }
  EXPECT_EQ(unshard(s).to_vector<float>(), x.to_vector<float>());
  ShardedTensor r = shard(x, tpu::Sharding::replicated(4), devices(4));
  EXPECT_EQ(unshard(r).to_vector<float>(), x.to_vector<float>());
  ShardedTensor m = shard(x, tpu::Sharding::maximal(2, 4), devices(4));
  EXPECT_EQ(unshard(m).to_vector<float>(), x.to_vector<float>());
  EXPECT_THROW(m.shard(1), InvalidArgumentError);
  EXPECT_EQ(unshard(reshard(s, tpu::Sharding::tiled({2, 2, 2, 1}))).to_vector<float>(),
            x.to_vector<float>());
}

TEST_F(ShardedOpsTest, ShardsRunOnTheirOwnDevicesInParallelThreads) {
  ShardedTensor s = sharded(randn({1, 4, 4, 2}, 2), {1, 2, 2, 1});
  ShardedTensor y = relu(s);
  for (int d = 0; d < 4; ++d)
    EXPECT_EQ(y.shard(d).device(), local_devices()[static_cast<size_t>(d)]->name());
}

struct ConvCase {
  std::vector<int64_t> parts;
  int64_t size;
  int64_t k;
  int64_t stride;
  const char* padding;
};

TEST_F(ShardedOpsTest, Conv2dWithHaloExchangeEqualsTheUnpartitionedConvolution) {
  const std::vector<ConvCase> cases = {
      {{1, 2, 2, 1}, 16, 3, 1, "SAME"}, {{1, 2, 2, 1}, 16, 3, 1, "VALID"},
      {{1, 2, 2, 1}, 16, 3, 2, "SAME"}, {{1, 2, 2, 1}, 18, 3, 2, "VALID"},
      {{1, 2, 4, 1}, 16, 3, 1, "SAME"}, {{1, 2, 4, 1}, 16, 5, 2, "SAME"},
      {{2, 2, 1, 1}, 12, 3, 1, "SAME"}, {{1, 4, 2, 1}, 12, 5, 1, "VALID"},
      {{1, 4, 1, 1}, 8, 7, 1, "SAME"},  {{1, 1, 2, 1}, 16, 7, 1, "SAME"},
      {{1, 2, 1, 1}, 16, 4, 2, "SAME"},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "parts " << TensorShape(c.parts) << " size " << c.size << " k " << c.k
                 << " stride " << c.stride << " " << c.padding);
    Tensor x = randn({2, c.size, c.size, 3}, 3);
    Tensor w = randn({c.k, c.k, 3, 4}, 4);
    const nn::Conv2DOptions o{.strides = {c.stride, c.stride}, .padding = c.padding};
    Tensor expected = nn::conv2d(x, w, o);
    reset_fallback_counts();
    ShardedTensor y = conv2d(sharded(x, c.parts), w, o);
    EXPECT_LE(relative_error(unshard(y), expected), 1e-5);
    EXPECT_EQ(fallback_count("conv2d"), 0);
  }
}

TEST_F(ShardedOpsTest, ParallelConv2dGradientsEqualTheUnpartitionedBackprops) {
  const std::vector<ConvCase> cases = {
      {{1, 2, 1, 1}, 16, 3, 1, "SAME"},  {{1, 2, 2, 1}, 16, 3, 2, "SAME"},
      {{1, 2, 4, 1}, 20, 5, 1, "VALID"}, {{2, 2, 1, 1}, 18, 3, 2, "VALID"},
      {{1, 4, 1, 1}, 8, 7, 1, "SAME"},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "parts " << TensorShape(c.parts) << " size " << c.size << " k " << c.k
                 << " stride " << c.stride << " " << c.padding);
    Tensor x = randn({2, c.size, c.size, 3}, 61);
    Tensor w = randn({c.k, c.k, 3, 4}, 62);
    const nn::Conv2DOptions o{.strides = {c.stride, c.stride}, .padding = c.padding};
    Tensor dy = randn(nn::conv2d(x, w, o).shape(), 63);
    reset_fallback_counts();
    ShardedTensor sx = sharded(x, c.parts);
    Conv2DGradients g = conv2d_gradients(sx, w, shard(dy, sx.sharding(), sx.devices()), o);
    EXPECT_EQ(fallback_count("conv2d_gradients"), 0);
    EXPECT_EQ(g.input.sharding(), sx.sharding());
    EXPECT_LE(relative_error(unshard(g.input), nn::conv2d_backprop_input(x.shape(), w, dy, o)),
              1e-5);
    EXPECT_LE(relative_error(g.filters, nn::conv2d_backprop_filter(x, w.shape(), dy, o)), 1e-5);
  }
}

// With 16 output channels (float32, no tape) the shards go to the tiled
// direct kernels, which read the halo in place from the neighbours' shards:
// the forward and the input gradient are then the very sums of the
// unpartitioned kernels (bit-identical), the filter gradient the sum of the
// shards' parts.
TEST_F(ShardedOpsTest, TiledKernelsReadTheHaloInPlaceAndEqualTheUnpartitionedKernels) {
  const kernels::ConvGeometry first_case{.batch = 2,
                                         .in_h = 16,
                                         .in_w = 16,
                                         .in_c = 8,
                                         .filter_h = 3,
                                         .filter_w = 3,
                                         .out_c = 16,
                                         .out_h = 16,
                                         .out_w = 16,
                                         .pad_top = 1,
                                         .pad_left = 1};
  if (!kernels::tiled_conv2d_supported(first_case)) {
    GTEST_SKIP() << "no AVX-512F on this CPU (or STRATA_CONV_DIRECT=0): no tiled kernels";
  }
  struct Case {
    std::vector<int64_t> parts;
    int64_t size, k, stride, dilation;
    const char* padding;
  };
  const std::vector<Case> cases = {
      {{1, 2, 1, 1}, 16, 3, 1, 1, "SAME"}, {{1, 2, 2, 1}, 16, 3, 1, 1, "SAME"},
      {{1, 2, 4, 1}, 16, 3, 1, 1, "SAME"}, {{1, 4, 1, 1}, 16, 5, 1, 1, "SAME"},
      {{2, 2, 1, 1}, 12, 3, 1, 1, "SAME"}, {{1, 2, 2, 1}, 18, 3, 1, 1, "VALID"},
      {{1, 2, 1, 1}, 16, 3, 1, 2, "SAME"}, {{1, 2, 2, 1}, 16, 3, 2, 1, "SAME"},
      {{1, 1, 2, 1}, 16, 4, 2, 1, "SAME"}, {{1, 4, 2, 1}, 20, 5, 1, 1, "VALID"},
      {{1, 8, 1, 1}, 16, 7, 1, 1, "SAME"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "parts " << TensorShape(c.parts) << " size " << c.size << " k " << c.k
                 << " stride " << c.stride << " dilation " << c.dilation << " " << c.padding);
    Tensor x = randn({2, c.size, c.size, 8}, 71);
    Tensor w = randn({c.k, c.k, 8, 16}, 72);
    const nn::Conv2DOptions o{.strides = {c.stride, c.stride},
                              .padding = c.padding,
                              .dilations = {c.dilation, c.dilation}};
    const Tensor expected = nn::conv2d(x, w, o);
    reset_fallback_counts();
    ShardedTensor sx = sharded(x, c.parts);
    ShardedTensor y = conv2d(sx, w, o);
    EXPECT_EQ(unshard(y).to_vector<float>(), expected.to_vector<float>());
    Tensor dy = randn(expected.shape(), 73);
    Conv2DGradients g = conv2d_gradients(sx, w, shard(dy, sx.sharding(), sx.devices()), o);
    EXPECT_EQ(fallback_count("conv2d") + fallback_count("conv2d_gradients"), 0);
    for (int d = 0; d < sx.num_logical_devices(); ++d) {
      EXPECT_EQ(y.shard(d).device(), sx.devices()[static_cast<size_t>(d)]->name());
      EXPECT_EQ(g.input.shard(d).device(), sx.devices()[static_cast<size_t>(d)]->name());
    }
    const Tensor dx = nn::conv2d_backprop_input(x.shape(), w, dy, o);
    if (c.stride == 1) {
      EXPECT_EQ(unshard(g.input).to_vector<float>(), dx.to_vector<float>());
    } else {
      EXPECT_LE(relative_error(unshard(g.input), dx), 1e-5);
    }
    EXPECT_LE(relative_error(g.filters, nn::conv2d_backprop_filter(x, w.shape(), dy, o)), 1e-5);
  }
}

TEST_F(ShardedOpsTest, Conv2dWhoseOutputDoesNotDivideFallsBackAndIsStillCorrect) {
  Tensor x = randn({1, 16, 16, 3}, 5);
  Tensor w = randn({3, 3, 3, 2}, 6);
  const nn::Conv2DOptions o{.padding = "VALID"};  // 14 rows: not divisible by 4
  ShardedTensor y = conv2d(sharded(x, {1, 4, 1, 1}), w, o);
  EXPECT_EQ(fallback_count("conv2d"), 1);
  EXPECT_LE(relative_error(unshard(y), nn::conv2d(x, w, o)), 1e-6);
  // A channel split has no rule either.
  ShardedTensor z = conv2d(sharded(randn({1, 8, 8, 4}, 7), {1, 1, 1, 2}), randn({3, 3, 4, 2}, 8));
  EXPECT_EQ(fallback_count("conv2d"), 2);
  EXPECT_EQ(z.shape(), TensorShape({1, 6, 6, 2}));
}

TEST_F(ShardedOpsTest, PoolingWithHaloExchangeEqualsTheUnpartitionedPools) {
  struct PoolCase {
    std::vector<int64_t> parts;
    int64_t size, k, stride;
    const char* padding;
  };
  const std::vector<PoolCase> cases = {
      {{1, 2, 2, 1}, 16, 2, 2, "VALID"}, {{1, 2, 2, 1}, 16, 3, 1, "SAME"},
      {{1, 2, 4, 1}, 16, 3, 2, "SAME"},  {{1, 2, 2, 1}, 18, 3, 2, "VALID"},
      {{1, 4, 2, 1}, 8, 3, 1, "SAME"},
  };
  for (const PoolCase& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "parts " << TensorShape(c.parts) << " size " << c.size << " k " << c.k
                 << " stride " << c.stride << " " << c.padding);
    Tensor x = randn({2, c.size, c.size, 3}, 9);
    reset_fallback_counts();
    ShardedTensor sx = sharded(x, c.parts);
    EXPECT_LE(relative_error(unshard(max_pool2d(sx, {c.k, c.k}, {c.stride, c.stride}, c.padding)),
                             nn::max_pool2d(x, {c.k, c.k}, {c.stride, c.stride}, c.padding)),
              1e-6);
    EXPECT_LE(relative_error(unshard(avg_pool2d(sx, {c.k, c.k}, {c.stride, c.stride}, c.padding)),
                             nn::avg_pool2d(x, {c.k, c.k}, {c.stride, c.stride}, c.padding)),
              1e-6);
    EXPECT_EQ(fallback_count("max_pool2d") + fallback_count("avg_pool2d"), 0);
  }
}

TEST_F(ShardedOpsTest, ElementwiseOpsRunShardWiseWithBroadcastOperands) {
  Tensor a = randn({2, 4, 4, 3}, 10), b = randn({2, 4, 4, 3}, 11), bias = randn({3}, 12);
  Tensor row = randn({4, 1, 3}, 13);
  ShardedTensor sa = sharded(a, {1, 2, 2, 1}), sb = sharded(b, {1, 2, 2, 1});
  EXPECT_EQ(unshard(add(sa, sb)).to_vector<float>(), strata::add(a, b).to_vector<float>());
  EXPECT_EQ(unshard(add(sa, bias)).to_vector<float>(), strata::add(a, bias).to_vector<float>());
  EXPECT_EQ(unshard(multiply(sa, row)).to_vector<float>(),
            strata::multiply(a, row).to_vector<float>());
  ShardedTensor rep = shard(b, tpu::Sharding::replicated(4), devices(4));
  EXPECT_EQ(unshard(subtract(sa, rep)).to_vector<float>(),
            strata::subtract(a, b).to_vector<float>());
  EXPECT_EQ(unshard(relu(sa)).to_vector<float>(), strata::relu(a).to_vector<float>());
  EXPECT_EQ(fallback_count("add") + fallback_count("multiply") + fallback_count("subtract"), 0);
  // Different tilings: the fallback, still correct.
  ShardedTensor other = sharded(b, {1, 4, 1, 1});
  EXPECT_EQ(unshard(add(sa, other)).to_vector<float>(), strata::add(a, b).to_vector<float>());
  EXPECT_EQ(fallback_count("add"), 1);
}

TEST_F(ShardedOpsTest, MatmulSplitInTheBatchOrTheContractionDimension) {
  Tensor a = randn({8, 12}, 14), b = randn({12, 5}, 15);
  Tensor expected = strata::matmul(a, b);
  ShardedTensor rows = matmul(sharded(a, {4, 1}), b);
  EXPECT_TRUE(rows.sharding().is_tiled());
  EXPECT_LE(relative_error(unshard(rows), expected), 1e-6);
  ShardedTensor contraction = matmul(sharded(a, {1, 4}), b);
  EXPECT_TRUE(contraction.sharding().is_replicated());
  for (int d = 0; d < 4; ++d) EXPECT_LE(relative_error(contraction.shard(d), expected), 1e-5);
  EXPECT_EQ(fallback_count("matmul"), 0);
  ShardedTensor both = matmul(sharded(a, {2, 2}), b);
  EXPECT_EQ(fallback_count("matmul"), 1);
  EXPECT_LE(relative_error(unshard(both), expected), 1e-6);
}

TEST_F(ShardedOpsTest, ReductionsCombineLocalResultsAcrossShards) {
  Tensor x = randn({4, 6, 8}, 16);
  ShardedTensor s = sharded(x, {2, 1, 4});
  EXPECT_LE(relative_error(unshard(reduce_sum(s)), strata::reduce_sum(x)), 1e-5);
  EXPECT_LE(relative_error(unshard(reduce_mean(s)), strata::reduce_mean(x)), 1e-5);
  ShardedTensor over_middle = reduce_sum(s, {.axis = {1}});
  EXPECT_EQ(over_middle.sharding().partition_dimensions(), (std::vector<int64_t>{2, 4}));
  EXPECT_LE(relative_error(unshard(over_middle), strata::reduce_sum(x, {.axis = {1}})), 1e-6);
  EXPECT_LE(relative_error(unshard(reduce_mean(s, {.axis = {0, 2}, .keepdims = true})),
                           strata::reduce_mean(x, {.axis = {0, 2}, .keepdims = true})),
            1e-6);
  EXPECT_EQ(fallback_count("reduce_sum") + fallback_count("reduce_mean"), 0);
  // Reducing one split dimension but not another has no rule.
  EXPECT_LE(
      relative_error(unshard(reduce_sum(s, {.axis = {2}})), strata::reduce_sum(x, {.axis = {2}})),
      1e-6);
  EXPECT_EQ(fallback_count("reduce_sum"), 1);
}

TEST_F(ShardedOpsTest, ReshapeKeepsTheSplitWhenItSurvivesElseFallsBack) {
  Tensor x = randn({4, 3, 2, 2}, 17);
  ShardedTensor batch = sharded(x, {4, 1, 1, 1});
  ShardedTensor flat = reshape(batch, {4, -1});
  EXPECT_EQ(flat.sharding().partition_dimensions(), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(unshard(flat).to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(fallback_count("reshape"), 0);
  ShardedTensor spatial = sharded(randn({2, 4, 4, 3}, 18), {1, 2, 2, 1});
  ShardedTensor flat2 = reshape(spatial, {2, -1});
  EXPECT_EQ(fallback_count("reshape"), 1);
  EXPECT_EQ(flat2.shape(), TensorShape({2, 48}));
}

// The CNN of the Keras issue, written with the sharded ops: Conv 32 3x3 ReLU,
// MaxPool 2, Conv 64 3x3 ReLU, MaxPool 2, Dense 128 ReLU, Dense 10. SAME
// convolutions on 32x32 images keep every height/width divisible by 2 and 4.
struct Cnn {
  Variable w1, b1, w2, b2, w3, b3, w4, b4;
  explicit Cnn(DType dtype) {
    auto init = [&](const TensorShape& s, uint64_t seed, double scale) {
      return Variable(multiply(randn(s, seed, dtype), cast(constant(scale), dtype)));
    };
    w1 = init({3, 3, 3, 32}, 21, 0.2);
    b1 = init({32}, 22, 0.1);
    w2 = init({3, 3, 32, 64}, 23, 0.06);
    b2 = init({64}, 24, 0.1);
    w3 = init({8 * 8 * 64, 128}, 25, 0.02);
    b3 = init({128}, 26, 0.1);
    w4 = init({128, 10}, 27, 0.1);
    b4 = init({10}, 28, 0.1);
  }
  std::vector<Variable> variables() const { return {w1, b1, w2, b2, w3, b3, w4, b4}; }

  Tensor dense_head(const Tensor& flat) const {
    Tensor h = strata::relu(strata::add(strata::matmul(flat, w3.value()), b3.value()));
    return strata::add(strata::matmul(h, w4.value()), b4.value());
  }
  Tensor forward(const Tensor& x) const {
    const nn::Conv2DOptions same{.padding = "SAME"};
    Tensor h = strata::relu(strata::add(nn::conv2d(x, w1.value(), same), b1.value()));
    h = nn::max_pool2d(h, {2, 2}, {2, 2}, "VALID");
    h = strata::relu(strata::add(nn::conv2d(h, w2.value(), same), b2.value()));
    h = nn::max_pool2d(h, {2, 2}, {2, 2}, "VALID");
    return dense_head(strata::reshape(h, {x.shape()[0], -1}));
  }
  Tensor forward(const ShardedTensor& x) const {
    const nn::Conv2DOptions same{.padding = "SAME"};
    ShardedTensor h = relu(add(conv2d(x, w1.value(), same), b1.value()));
    h = max_pool2d(h, {2, 2}, {2, 2}, "VALID");
    h = relu(add(conv2d(h, w2.value(), same), b2.value()));
    h = max_pool2d(h, {2, 2}, {2, 2}, "VALID");
    // Flatten mixes the split height/width into one dimension: gathered.
    return dense_head(unshard(reshape(h, {x.shape()[0], -1})));
  }
};

Tensor loss_of(const Tensor& logits, const Tensor& labels) {
  return strata::reduce_mean(nn::sparse_softmax_cross_entropy_with_logits(labels, logits));
}

class CnnModelParallelTest : public ShardedOpsTest,
                             public ::testing::WithParamInterface<std::vector<int64_t>> {};

TEST_P(CnnModelParallelTest, ForwardGradientsAndTwentySgdStepsEqualTheUnpartitionedModel) {
  const std::vector<int64_t> parts = GetParam();
  Tensor images = random::uniform({4, 32, 32, 3}, {.seed = 31});
  Tensor labels = random::uniform_int({4}, 0, 10, {.seed = 32});
  Cnn plain(DType::float32), parallel(DType::float32);

  // Forward.
  EXPECT_LE(relative_error(parallel.forward(sharded(images, parts)), plain.forward(images)), 1e-5);
  EXPECT_EQ(fallback_count("conv2d") + fallback_count("max_pool2d") + fallback_count("add"), 0);
  EXPECT_EQ(fallback_count("reshape"), 1);

  // Gradients of every weight.
  auto grads = [&](const Cnn& m, bool sharded_input) {
    GradientTape tape;
    Tensor logits = sharded_input ? m.forward(sharded(images, parts)) : m.forward(images);
    return tape.gradient(loss_of(logits, labels), m.variables());
  };
  std::vector<Tensor> g_plain = grads(plain, false), g_parallel = grads(parallel, true);
  ASSERT_EQ(g_plain.size(), g_parallel.size());
  for (size_t i = 0; i < g_plain.size(); ++i) {
    ASSERT_TRUE(g_parallel[i].defined()) << "variable " << i;
    EXPECT_LE(relative_error(g_parallel[i], g_plain[i]), 1e-5) << "variable " << i;
  }

  // The sharded gradients are deterministic: the shards' records are
  // replayed in logical-device order.
  std::vector<Tensor> g_again = grads(parallel, true);
  for (size_t i = 0; i < g_parallel.size(); ++i) {
    EXPECT_EQ(g_again[i].to_vector<float>(), g_parallel[i].to_vector<float>()) << "variable " << i;
  }

  // 20 SGD steps (learning rate 0.1) from the same start, in float64: the
  // partitioned model sums gradient contributions in another order than the
  // unpartitioned one, and over 20 steps float32 rounding differences of that
  // order grow past 1e-5.
  const Tensor images64 = cast(images, DType::float64);
  Cnn plain64(DType::float64), parallel64(DType::float64);
  auto grads64 = [&](const Cnn& m, bool sharded_input) {
    GradientTape tape;
    Tensor logits = sharded_input ? m.forward(sharded(images64, parts)) : m.forward(images64);
    return tape.gradient(loss_of(logits, labels), m.variables());
  };
  const Tensor lr = constant(0.1);
  for (int step = 0; step < 20; ++step) {
    for (bool sharded_input : {false, true}) {
      Cnn& m = sharded_input ? parallel64 : plain64;
      std::vector<Tensor> g = grads64(m, sharded_input);
      std::vector<Variable> vars = m.variables();
      for (size_t i = 0; i < vars.size(); ++i) vars[i].assign_sub(strata::multiply(lr, g[i]));
    }
  }
  std::vector<Variable> vp = plain64.variables(), vq = parallel64.variables();
  for (size_t i = 0; i < vp.size(); ++i) {
    EXPECT_LE(relative_error(vq[i].value(), vp[i].value()), 1e-5) << "variable " << i;
    // The steps changed the weights (the comparison is not of two untouched starts).
    EXPECT_GT(relative_error(vp[i].value(), Cnn(DType::float64).variables()[i].value()), 1e-4) << i;
  }
  const double start = loss_of(Cnn(DType::float64).forward(images64), labels).scalar_as_double();
  const double end_plain = loss_of(plain64.forward(images64), labels).scalar_as_double();
  const double end_parallel =
      loss_of(parallel64.forward(sharded(images64, parts)), labels).scalar_as_double();
  EXPECT_LT(end_plain, start);
  EXPECT_LE(std::abs(end_parallel - end_plain), 1e-5 * std::abs(end_plain));
}

INSTANTIATE_TEST_SUITE_P(ImageSplits, CnnModelParallelTest,
                         ::testing::Values(std::vector<int64_t>{1, 2, 2, 1},
                                           std::vector<int64_t>{1, 2, 4, 1}));

TEST_F(ShardedOpsTest, DenseModelWithASplitContractionEqualsTheUnpartitionedModel) {
  Tensor x = randn({6, 16}, 41);
  Tensor labels = random::uniform_int({6}, 0, 4, {.seed = 42});
  Variable w1(multiply(randn({16, 8}, 43), constant(0.3f))),
      w2(multiply(randn({8, 4}, 44), constant(0.3f)));
  auto run = [&](bool split) {
    GradientTape tape;
    Tensor h =
        split ? unshard(matmul(sharded(x, {1, 4}), w1.value())) : strata::matmul(x, w1.value());
    Tensor logits = strata::matmul(strata::relu(h), w2.value());
    Tensor loss = loss_of(logits, labels);
    std::vector<Tensor> g = tape.gradient(loss, std::vector<Variable>{w1, w2});
    g.insert(g.begin(), loss);
    return g;
  };
  std::vector<Tensor> a = run(false), b = run(true);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(relative_error(b[i], a[i]), 1e-5) << i;
  EXPECT_EQ(fallback_count("matmul"), 0);
}

}  // namespace
}  // namespace strata::tpu::sharded
