#pragma once
// strata::keras: Keras's API in C++ (tf.keras 2.x semantics).
//
//   namespace keras = strata::keras;
//   auto [train, test] = keras::datasets::fashion_mnist::load_data();
//   auto model = keras::Sequential({keras::layers::Flatten({.input_shape = {28, 28}}),
//                                   keras::layers::Dense(128, {.activation = "relu"}),
//                                   keras::layers::Dense(10)});
//   model->compile({.optimizer = keras::optimizers::Adam({}),
//                   .loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = true}),
//                   .metrics = {"accuracy"}});
//   keras::History h = model->fit(x_train, y_train, {.epochs = 5, .validation_data = {{x_test,
//   y_test}}}); model->evaluate(x_test, y_test); model->save_weights("/tmp/fmnist.weights");
//
// Objects with identity (layers, models, optimizers, losses, metrics,
// callbacks) come from factories named like the Python classes and are
// shared_ptr handles; see layer.h for the object model, model.h for the
// training loop, callbacks/ for the hooks, weights_io.h for the file format.

#include "strata/keras/callbacks/backup_and_restore.h"
#include "strata/keras/callbacks/callback.h"
#include "strata/keras/callbacks/csv_logger.h"
#include "strata/keras/callbacks/early_stopping.h"
#include "strata/keras/callbacks/history.h"
#include "strata/keras/callbacks/lambda_callback.h"
#include "strata/keras/callbacks/learning_rate_scheduler.h"
#include "strata/keras/callbacks/model_checkpoint.h"
#include "strata/keras/callbacks/progbar_logger.h"
#include "strata/keras/callbacks/tensorboard.h"
#include "strata/keras/datasets/fashion_mnist.h"
#include "strata/keras/functional.h"
#include "strata/keras/initializers.h"
#include "strata/keras/keras_tensor.h"
#include "strata/keras/layer.h"
#include "strata/keras/layers/layers.h"
#include "strata/keras/losses.h"
#include "strata/keras/metric.h"
#include "strata/keras/metrics/metrics.h"
#include "strata/keras/model.h"
#include "strata/keras/optimizer.h"
#include "strata/keras/optimizers/optimizers.h"
#include "strata/keras/progbar.h"
#include "strata/keras/regularizers.h"
#include "strata/keras/saving/object_registration.h"
#include "strata/keras/saving/saving_api.h"
#include "strata/keras/sequential.h"
#include "strata/keras/summary.h"
#include "strata/keras/tfjs/converters.h"
#include "strata/keras/weights_io.h"
