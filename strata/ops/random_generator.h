#pragma once
// tf.random.Generator: a random-number generator whose state is a Variable,
// so that it is saved with a train::Checkpoint and distributed by a strategy.
//
//   auto g = strata::random::Generator::from_seed(1234);
//   g.state().value();                     // int64 [1234, 0, 0]
//   Tensor n = g.normal({2, 3});           // state: [2770, 0, 0]
//   Tensor u = g.uniform({4}, {.minval = -1, .maxval = 1});
//   train::Checkpoint ckpt({{"generator", g}});   // saves "generator/_state_var"
//
// The state is TensorFlow's Philox layout, three int64: a 128-bit counter (two
// words, low first) and the key. from_seed(s) starts at [s, 0, 0], as TF's.
// A call that draws n values reads the state and advances the counter by
// 256 * n (TF's RngReadAndSkip increment, so the state after each call equals
// TF's); value i comes from Philox block (counter + i) of stream 0 under the
// key. The values themselves are Strata's transforms of those bits (as
// strata::random::uniform / normal draw), not TF's kernels' values.
//
// Under a strategy (TF's rules): a generator created inside strategy.scope()
// has a mirrored state; in a replica context every replica advances its copy
// by the same amount (the copies stay equal) and mixes its replica id into the
// key, so each replica draws a different, reproducible stream. A generator
// created outside every scope and used inside strategy.run is shared: the
// replicas' calls are serialised and each gets the next numbers.
//
// Copies share one generator (as Python references). Thread-safety: each call
// reads and advances the state atomically.

#include <cstdint>
#include <memory>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/core/variable.h"

namespace strata::random {

struct GeneratorUniformOptions {
  double minval = 0.0;
  double maxval = 1.0;
  DType dtype = DType::float32;
};

struct GeneratorNormalOptions {
  double mean = 0.0;
  double stddev = 1.0;
  DType dtype = DType::float32;
};

class Generator {
 public:
  // tf.random.Generator.from_seed(seed, alg="philox"): state [seed, 0, 0].
  static Generator from_seed(uint64_t seed);
  // tf.random.Generator.from_state(state, alg="philox"): an int64 [3] tensor.
  // InvalidArgumentError naming its shape and dtype otherwise.
  static Generator from_state(const Tensor& state);
  // tf.random.Generator.from_non_deterministic_state().
  static Generator from_non_deterministic_state();

  // Values in [minval, maxval) (float32 or float64; InvalidArgumentError else).
  Tensor uniform(const TensorShape& shape, const GeneratorUniformOptions& options = {});
  // Normal values (Box-Muller over one Philox block per value).
  Tensor normal(const TensorShape& shape, const GeneratorNormalOptions& options = {});
  // Integers in [minval, maxval), int32 or int64.
  Tensor uniform_int(const TensorShape& shape, int64_t minval, int64_t maxval,
                     DType dtype = DType::int64);
  // tf.random.Generator.split(count): `count` new generators whose states
  // come from this one's next numbers (this one advances).
  std::vector<Generator> split(int count);
  // tf.random.Generator.skip(delta): advances the counter as `delta` values would.
  void skip(int64_t delta);

  // The state variable (TF's `state` property); int64 [3].
  const Variable& state() const;
  // "philox" (TF's algorithm name; the only one here).
  const char* algorithm() const { return "philox"; }

 private:
  struct Impl;
  explicit Generator(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  // Reads the (key, counter) for `n` values and advances the state.
  struct Draw {
    uint64_t key;
    uint64_t counter;
    uint64_t stream;
  };
  Draw read_and_skip(int64_t n);
  std::shared_ptr<Impl> impl_;
};

}  // namespace strata::random
