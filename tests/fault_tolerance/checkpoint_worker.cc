// One worker of the multi-worker checkpoint tests (multi_worker_checkpoint_test.cc
// starts two under `strata launch`). Every worker trains the same small MLP
// with Model::fit under MultiWorkerMirroredStrategy (TF_CONFIG from launch):
//
//   checkpoint_worker --dir D --scenario checkpoint
//       ModelCheckpoint D/ckpt/weights-{epoch:02d}.weights (every epoch, weights
//       only) and D/ckpt/model-latest.keras (every 5 batches, weights and
//       optimizer), then model.save_weights(D/final.weights). A non-chief worker
//       first leaves a marker in its would-be temporary directory
//       D/ckpt/workertemp_<id>/, which its first save must remove.
//   checkpoint_worker --dir D --scenario backup [--kill-worker K --kill-at E:B]
//                     [--save-freq N]
//       BackupAndRestore(D/backup) at every epoch end (or every N batches);
//       worker K SIGKILLs itself after batch B of epoch E. After fit:
//       model.save_weights(D/final.weights).
//
// Each worker prints "epochs-run <e,...>", "resumed-at <epoch|none>",
// "resumed-step <batch>" and "weights-crc <crc32c of every weight's bytes>" on
// stdout.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "strata/base/crc32c.h"
#include "strata/strata.h"

namespace tf = strata;
namespace sd = strata::distribute;
namespace keras = strata::keras;
namespace fs = std::filesystem;

namespace {

constexpr int kExamples = 256;
constexpr int64_t kGlobalBatch = 16;  // 16 steps per epoch

keras::ModelPtr make_model() {
  auto model = keras::Sequential({
      keras::layers::Dense(16,
                           {.activation = "relu",
                            .kernel_initializer = keras::initializers::glorot_uniform({.seed = 1}),
                            .input_shape = {8}}),
      keras::layers::Dense(
          3, {.kernel_initializer = keras::initializers::glorot_uniform({.seed = 2})}),
  });
  model->compile(
      {.optimizer = keras::optimizers::SGD({.learning_rate = 0.1, .momentum = 0.9}),
       .loss = keras::LossFunction([](const tf::Tensor& labels, const tf::Tensor& logits) {
         return keras::losses::sparse_categorical_crossentropy(labels, logits,
                                                               {.from_logits = true});
       }),
       .seed = 7});
  return model;
}

uint32_t weights_crc(const keras::Model& model) {
  uint32_t crc = 0;
  for (const tf::Variable& v : model.weights()) {
    const tf::Tensor t = v.value();
    crc = tf::crc32c::extend(
        crc, std::string_view(static_cast<const char*>(t.raw_data()), t.size_bytes()));
  }
  return crc;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, scenario;
  int kill_worker = -1, kill_epoch = -1, kill_batch = -1, epochs = 4, save_freq = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--dir") {
      dir = value;
    } else if (flag == "--scenario") {
      scenario = value;
    } else if (flag == "--kill-worker") {
      kill_worker = std::atoi(value.c_str());
    } else if (flag == "--kill-at") {
      std::sscanf(value.c_str(), "%d:%d", &kill_epoch, &kill_batch);
    } else if (flag == "--epochs") {
      epochs = std::atoi(value.c_str());
    } else if (flag == "--save-freq") {
      save_freq = std::atoi(value.c_str());
    } else {
      std::cerr << "checkpoint_worker: unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (dir.empty() || (scenario != "checkpoint" && scenario != "backup")) {
    std::cerr << "usage: checkpoint_worker --dir D --scenario checkpoint|backup "
                 "[--kill-worker K --kill-at EPOCH:BATCH] [--epochs N] [--save-freq N]\n";
    return 2;
  }
  try {
    sd::MultiWorkerMirroredStrategy strategy({.communication_options = {.timeout_seconds = 20}});
    const int task_id = strategy.extended().task_id();
    const bool chief = strategy.extended().should_checkpoint();
    keras::ModelPtr model;
    {
      sd::StrategyScope scope = strategy.scope();
      model = make_model();
    }
    const tf::Tensor x = tf::random::uniform({kExamples, 8}, {.seed = 5});
    const tf::Tensor y =
        tf::cast(tf::random::uniform_int({kExamples}, 0, 3, {.seed = 6}), tf::DType::int64);

    std::vector<keras::callbacks::CallbackPtr> callbacks;
    std::shared_ptr<keras::callbacks::BackupAndRestoreCallback> backup;
    if (scenario == "checkpoint") {
      const fs::path ckpt = fs::path(dir) / "ckpt";
      fs::create_directories(ckpt);
      if (!chief) {
        const fs::path temp = ckpt / ("workertemp_" + std::to_string(task_id));
        fs::create_directories(temp);
        std::ofstream(temp / "marker") << "left before fit\n";
      }
      callbacks.push_back(keras::callbacks::ModelCheckpoint(
          (ckpt / "weights-{epoch:02d}.weights").string(), {.save_weights_only = true}));
      callbacks.push_back(keras::callbacks::ModelCheckpoint((ckpt / "model-latest.keras").string(),
                                                            {.save_freq = 5}));
    } else {
      keras::callbacks::BackupAndRestoreOptions options;
      if (save_freq > 0) options.save_freq = save_freq;
      backup = keras::callbacks::BackupAndRestore((fs::path(dir) / "backup").string(), options);
      callbacks.push_back(backup);
    }
    int current_epoch = 0;
    std::string epochs_run;
    callbacks.push_back(keras::callbacks::LambdaCallback(
        {.on_epoch_begin =
             [&](int epoch, keras::Logs&) {
               current_epoch = epoch;
               if (!epochs_run.empty()) epochs_run.push_back(',');
               epochs_run.append(std::to_string(epoch));
             },
         .on_batch_end =
             [&](int64_t batch, keras::Logs&) {
               if (task_id == kill_worker && current_epoch == kill_epoch && batch == kill_batch) {
                 std::cout << "killing myself (SIGKILL) after batch " << batch << " of epoch "
                           << current_epoch << std::endl;
                 ::kill(::getpid(), SIGKILL);
               }
             }}));
    model->fit(x, y,
               {.batch_size = kGlobalBatch,
                .epochs = epochs,
                .verbose = 0,
                .callbacks = callbacks,
                .shuffle = true});
    model->save_weights((fs::path(dir) / "final.weights").string());
    std::cout << "epochs-run " << epochs_run << "\n";
    const std::optional<int> resumed = backup ? backup->resumed_epoch() : std::nullopt;
    std::cout << "resumed-at " << (resumed ? std::to_string(*resumed) : std::string("none"))
              << "\n";
    std::cout << "resumed-step " << (backup ? backup->resumed_step() : 0) << "\n";
    char crc[16];
    std::snprintf(crc, sizeof(crc), "%08x", weights_crc(*model));
    std::cout << "weights-crc " << crc << std::endl;
  } catch (const tf::Error& e) {
    std::cerr << "error (" << tf::error_code_name(e.code()) << "): " << e.what() << "\n";
    return 1;
  }
  return 0;
}
