#pragma once
// Strata: TensorFlow's tf.distribute system, native in C++20.
//
//   #include <strata/strata.h>
//   namespace tf = strata;
//   tf::Tensor x = tf::constant({1.f, 2.f, 3.f, 4.f}, {2, 2});
//   tf::Tensor y = tf::matmul(x, x, {.transpose_b = true});
//
// This umbrella header includes every public layer header.

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/base/zip.h"
#include "strata/cluster/cluster.h"
#include "strata/collective/collectives.h"
#include "strata/collective/gloo_collectives.h"
#include "strata/collective/hierarchical_collectives.h"
#include "strata/collective/local_collectives.h"
#include "strata/collective/rendezvous_store.h"
#include "strata/core/config.h"
#include "strata/core/device.h"
#include "strata/core/device_spec.h"
#include "strata/core/dtype.h"
#include "strata/core/random.h"
#include "strata/core/tensor.h"
#include "strata/core/tensor_shape.h"
#include "strata/core/tensor_spec.h"
#include "strata/core/variable.h"
#include "strata/data/dataset.h"
#include "strata/data/example_tensors.h"
#include "strata/distribute/communication_options.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/input_context.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/distribute/multi_worker_mirrored_strategy.h"
#include "strata/distribute/partitioners.h"
#include "strata/distribute/rebatch.h"
#include "strata/distribute/reduce_op.h"
#include "strata/distribute/sharded_variable.h"
#include "strata/distribute/strategy.h"
#include "strata/distribute/tpu_strategy.h"
#include "strata/distribute/tpu_system.h"
#include "strata/distribute/values.h"
#include "strata/io/io.h"
#include "strata/keras/activations.h"
#include "strata/keras/keras.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"
#include "strata/ops/operators.h"
#include "strata/ops/random_ops.h"
#include "strata/tpu/tpu.h"
