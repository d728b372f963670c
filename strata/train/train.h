#pragma once
// strata::train: TensorFlow's object-based checkpoints (tf.train.Checkpoint,
// tf.train.CheckpointManager, tf.train.latest_checkpoint).
//
//   namespace train = strata::train;
//   strata::Variable step(strata::constant(int64_t{1}), {.trainable = false, .name = "step"});
//   train::Checkpoint ckpt({{"step", step}, {"optimizer", opt}, {"net", net}});
//   train::CheckpointManager manager(ckpt, "./tf_ckpts", {.max_to_keep = 3});
//   ckpt.restore(manager.latest_checkpoint());          // deferred until net is built
//   for (int i = 0; i < 50; ++i) {
//     train_step(net, batch, *opt);
//     step.assign_add(strata::constant(int64_t{1}));
//     if (step.value().item<int64_t>() % 10 == 0) manager.save();   // ./tf_ckpts/ckpt-<n>
//   }
//
// trackable.h: what can be saved and how objects join the graph;
// checkpoint.h: save / write / restore / read and the load status;
// checkpoint_manager.h: numbering, retention and the `checkpoint` state file;
// checkpoint_reader.h: reading a checkpoint's tensors by key.
// The file format is docs/formats/checkpoint.md.

#include "strata/train/checkpoint.h"
#include "strata/train/checkpoint_manager.h"
#include "strata/train/checkpoint_reader.h"
#include "strata/train/object_graph.h"
#include "strata/train/trackable.h"
