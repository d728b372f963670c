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

#include <nlohmann/json_fwd.hpp>

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

// keras.optimizers.serialize: {"module": "keras.optimizers", "class_name":
// "Adam", "config": {...}, "registered_name": null}. The config has Keras's
// keys: "name", "weight_decay", "clipnorm", "global_clipnorm", "clipvalue",
// "use_ema" (false), "ema_momentum" (0.99), "ema_overwrite_frequency" (null),
// "jit_compile" (false), "is_legacy_optimizer" (false), "learning_rate", then
// the class's own ("momentum", "nesterov"; "beta_1", "beta_2", "epsilon",
// "amsgrad"; "rho", "momentum", "epsilon", "centered";
// "initial_accumulator_value", "epsilon"). UnimplementedError for an
// optimizer class other than SGD, Adam, AdamW, RMSprop and Adagrad, and for a
// learning-rate schedule (schedules have no config here).
nlohmann::json serialize(const Optimizer& optimizer);
// keras.optimizers.deserialize: a fresh optimizer (no slots, iterations 0)
// from serialize()'s output or from a name string (get). Missing keys take
// Keras's defaults; InvalidArgumentError for an unknown class or a mistyped
// key, naming it.
std::shared_ptr<Optimizer> deserialize(const nlohmann::json& config);

}  // namespace strata::keras::optimizers
