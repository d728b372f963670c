// Writes a checkpoint whose every value read_checkpoint.py works out on its
// own, to test the format document against an independent reader:
//   write_known_checkpoint <path>
// The values (the reader repeats these rules):
//   w       float32 [2,3]  0.25 * i - 1
//   step    int64   []     42
//   d       float64 [4]    1 / (i + 1)
//   flags   bool    [3]    true, false, true
//   bytes   uint8   [5]    51 * i
//   counts  int32   [2,2]  -3, 0, 7, 2147483647
//   inner/v float32 []     3.5                      (a nested Checkpoint)
//   model   Sequential([Dense(2)]) on 3 inputs: kernel [3,2] 0.1 * i, bias [0.5, -0.5],
//           then one SGD step (learning rate 0.1, momentum 0.9) with gradients of ones:
//           momentum slot m = -0.1 everywhere, kernel = 0.1 * i - 0.1, bias = [0.4, -0.6],
//           optimizer iterations 1.

#include <cstdint>
#include <exception>
#include <iostream>
#include <vector>

#include "strata/strata.h"

int main(int argc, char** argv) {
  namespace keras = strata::keras;
  namespace train = strata::train;
  using strata::constant;
  using strata::Variable;
  if (argc != 2) {
    std::cerr << "usage: write_known_checkpoint <path>\n";
    return 2;
  }
  try {
    std::vector<float> w(6);
    for (int i = 0; i < 6; ++i) w[i] = 0.25f * static_cast<float>(i) - 1.0f;
    std::vector<double> d(4);
    for (int i = 0; i < 4; ++i) d[i] = 1.0 / (i + 1);
    std::vector<uint8_t> bytes(5);
    for (int i = 0; i < 5; ++i) bytes[i] = static_cast<uint8_t>(51 * i);

    Variable vw(constant(w, {2, 3}), {.name = "w"});
    Variable vstep(constant(int64_t{42}), {.name = "step", .trainable = false});
    Variable vd(constant(d, {4}), {.name = "d"});
    Variable vflags(constant(std::vector<bool>{true, false, true}, {3}), {.name = "flags"});
    Variable vbytes(constant(bytes, {5}), {.name = "bytes"});
    Variable vcounts(constant(std::vector<int32_t>{-3, 0, 7, 2147483647}, {2, 2}),
                     {.name = "counts"});
    train::Checkpoint inner({{"v", Variable(constant(3.5f), {.name = "v"})}});

    auto model = keras::Sequential({keras::layers::Dense(2, {.input_shape = {3}})});
    std::vector<float> k(6);
    for (int i = 0; i < 6; ++i) k[i] = 0.1f * static_cast<float>(i);
    model->layers()[0]->set_weights(
        {constant(k, {3, 2}), constant(std::vector<float>{0.5f, -0.5f}, {2})});
    auto opt = keras::optimizers::SGD({.learning_rate = 0.1, .momentum = 0.9});
    const auto vars = model->trainable_variables();
    keras::optimizers::GradsAndVars gv;
    for (const Variable& v : vars) gv.emplace_back(strata::ones(v.shape()), v);
    opt->apply_gradients(gv);

    train::Checkpoint ckpt({{"w", vw},
                            {"step", vstep},
                            {"d", vd},
                            {"flags", vflags},
                            {"bytes", vbytes},
                            {"counts", vcounts},
                            {"inner", inner},
                            {"model", model},
                            {"optimizer", opt}});
    ckpt.write(argv[1]);
  } catch (const std::exception& e) {
    std::cerr << "write_known_checkpoint: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
