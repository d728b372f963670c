#pragma once
// keras.optimizers: every optimizer and learning-rate schedule.
//
//   #include "strata/keras/optimizers/optimizers.h"
//   namespace keras = strata::keras;
//   auto opt = keras::optimizers::SGD({.learning_rate = 0.1, .momentum = 0.9});
//   auto adam = keras::optimizers::Adam({});
//   auto lr = keras::optimizers::schedules::ExponentialDecay(
//       {.initial_learning_rate = 0.1, .decay_steps = 100, .decay_rate = 0.5});
//   auto rms = keras::optimizers::RMSprop({.learning_rate = lr, .centered = true});
//   opt->apply_gradients(strata::zip(grads, model->trainable_variables()));
//   auto by_name = keras::optimizers::get("adam");   // Keras's defaults
//
// The base class and the update pipeline are in strata/keras/optimizer.h.

#include <memory>
#include <string>

#include "strata/keras/optimizer.h"
#include "strata/keras/optimizers/adagrad.h"
#include "strata/keras/optimizers/adam.h"
#include "strata/keras/optimizers/adamw.h"
#include "strata/keras/optimizers/rmsprop.h"
#include "strata/keras/optimizers/schedules.h"
#include "strata/keras/optimizers/sgd.h"

namespace strata::keras::optimizers {

// keras.optimizers.get for a string: a fresh optimizer with Keras's defaults.
// Names are matched case-insensitively: "sgd", "adam", "adamw", "rmsprop",
// "adagrad". InvalidArgumentError naming an unknown one.
std::shared_ptr<Optimizer> get(const std::string& name);

}  // namespace strata::keras::optimizers
