// Saves checkpoints in a loop until killed, for checkpoint_kill_test:
//   checkpoint_kill_writer <dir>
// Checkpoint n holds step = n and a 256x256 kernel and a bias filled with n, so
// a reader can tell a consistent checkpoint from a mix of two. After each save
// it prints "saved <n>" on stdout.

#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>

#include "strata/strata.h"

int main(int argc, char** argv) {
  namespace keras = strata::keras;
  namespace train = strata::train;
  if (argc != 2) {
    std::cerr << "usage: checkpoint_kill_writer <dir>\n";
    return 2;
  }
  try {
    auto model = keras::Sequential({keras::layers::Dense(256, {.input_shape = {256}})});
    strata::Variable step(strata::constant(int64_t{0}), {.name = "step", .trainable = false});
    train::Checkpoint ckpt({{"model", model}, {"step", step}});
    train::CheckpointManager manager(ckpt, argv[1], {.max_to_keep = 2});
    for (int64_t n = 1;; ++n) {
      step.assign(strata::constant(n));
      const float value = static_cast<float>(n);
      model->set_weights({strata::fill({256, 256}, strata::constant(value)),
                          strata::fill({256}, strata::constant(value))});
      manager.save();
      std::printf("saved %lld\n", static_cast<long long>(n));
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::cerr << "checkpoint_kill_writer: " << e.what() << "\n";
    return 1;
  }
}
