// CommunicationOptions{.check_divergence_every_n_steps = N} on a Keras fit:
// every N steps each replica fingerprints its copy of every mirrored variable
// (the weights and the optimizer's slots) and the copies are compared. Here
// one bit of replica 1's copy of the first kernel is flipped between two fits
// (what a memory error or a buggy custom update would do); the next check stops
// training with a DataLossError that names the variable, the replicas and the
// step. TensorFlow has no such check: its replicas would train on apart.
//
//   STRATA_CPU_DEVICES=2 build/examples/divergence_check
#include <bit>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "example_check.h"
#include "strata/strata.h"

namespace sd = strata::distribute;
namespace keras = strata::keras;

int main() {
  sd::MirroredStrategy strategy({"CPU:0", "CPU:1"}, {.check_divergence_every_n_steps = 10});
  keras::ModelPtr model;
  {
    auto scope = strategy.scope();
    model = keras::Sequential({keras::layers::Dense(16, {.activation = "relu", .input_shape = {8}}),
                               keras::layers::Dense(3)});
    model->compile({.optimizer = keras::optimizers::Adam({}),
                    .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true})});
  }
  const strata::Tensor x = strata::random::uniform({64, 8}, {.seed = 1});
  const strata::Tensor y =
      strata::cast(strata::random::uniform_int({64}, 0, 3, {.seed = 2}), strata::DType::int64);
  const auto ds = strata::data::Dataset::from_tensor_slices({x, y}).batch(16).repeat();
  model->fit(ds, {.epochs = 1, .verbose = 0, .steps_per_epoch = 10});  // checked at step 10
  std::cout << "steps 1-10 trained; the copies agreed at step 10\n";

  // One mantissa bit of one float of replica 1's copy of the first kernel
  // flips (a relative change of 2^-11). Both copies then take the same
  // updates, so the difference stays; a one-ulp change could be rounded away
  // by them (when the weight's exponent changes) before the next check.
  const strata::Variable kernel = model->trainable_variables().front();
  const strata::Variable copy = sd::distributed_components(kernel).at(1);
  std::vector<float> values = copy.value().to_vector<float>();
  values[0] = std::bit_cast<float>(std::bit_cast<uint32_t>(values[0]) ^ (uint32_t{1} << 12));
  copy.assign(strata::constant(values, copy.shape()));

  bool caught = false;
  try {
    model->fit(ds, {.epochs = 1, .verbose = 0, .steps_per_epoch = 10});
  } catch (const strata::DataLossError& e) {
    caught = true;
    std::cout << "DataLossError: " << e.what() << "\n";
    example::expect(std::string(e.what()).find("differ at step 20") != std::string::npos,
                    "the check of step 20 reports the change");
  }
  example::expect(caught, "the second fit stops at the next check");
  return example::exit_code();
}
