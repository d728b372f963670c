// Checkpoint benchmarks: a train::CheckpointManager save and a Checkpoint
// restore of `strata train`'s MLP (tools/strata/models.h: 535,818 parameters)
// with its Adam slots, the epoch and step counters, against a plain write()
// + fsync and read() of a file of the same size in the same folder.
//   checkpoint_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Both report bytes_per_second counting the bytes written plus the bytes read
// (twice the file's size per iteration).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "strata/base/file.h"
#include "strata/keras/keras.h"
#include "strata/strata.h"
#include "strata/train/checkpoint.h"
#include "strata/train/checkpoint_manager.h"
#include "tools/strata/models.h"

namespace {

using namespace strata;  // NOLINT: benchmark program

// `strata train`'s model and optimizer (Adam 1e-3, seed 1) after one step, so
// the slots exist and the checkpoint holds what `--checkpoint-dir` saves.
keras::ModelPtr trained_mlp() {
  keras::ModelPtr model = tools::build_model("mlp", 1);
  model->compile({.optimizer = keras::optimizers::Adam({.learning_rate = 0.001}),
                  .loss = keras::LossFunction([](const Tensor& labels, const Tensor& logits) {
                    return keras::losses::sparse_categorical_crossentropy(labels, logits,
                                                                          {.from_logits = true});
                  }),
                  .seed = 1});
  const Tensor x = random::uniform({128, 28, 28}, {.seed = 1});
  const Tensor y = cast(random::uniform_int({128}, 0, 10, {.seed = 2}), DType::int64);
  model->fit(x, y, {.batch_size = 128, .epochs = 1, .verbose = 0});
  return model;
}

void BM_CheckpointSaveRestoreMlp(benchmark::State& state) {
  const keras::ModelPtr model = trained_mlp();
  Variable epoch(constant(int64_t{1}), {.name = "epoch", .trainable = false});
  Variable step(constant(int64_t{1}), {.name = "step", .trainable = false});
  train::Checkpoint ckpt(
      {{"model", model}, {"optimizer", model->optimizer()}, {"epoch", epoch}, {"step", step}});
  const TempDir dir("strata_checkpoint_bench");
  train::CheckpointManager manager(ckpt, dir.path(), {.max_to_keep = 1});
  uintmax_t file_bytes = 0;
  for (auto _ : state) {
    const std::optional<std::string> path = manager.save();
    ckpt.restore(path).assert_consumed();
    file_bytes = std::filesystem::file_size(*path);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * file_bytes));
  state.counters["file_bytes"] = static_cast<double>(file_bytes);
}
BENCHMARK(BM_CheckpointSaveRestoreMlp)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same number of bytes as the MLP's checkpoint: write() + fsync of a new
// file, then read() of it.
void BM_PlainWriteReadCheckpointSize(benchmark::State& state) {
  uintmax_t size = 0;
  {
    const keras::ModelPtr model = trained_mlp();
    const TempDir probe("strata_checkpoint_bench");
    train::Checkpoint ckpt({{"model", model}, {"optimizer", model->optimizer()}});
    size = std::filesystem::file_size(ckpt.write(probe.file("probe")));
  }
  const TempDir dir("strata_checkpoint_bench");
  const std::string path = dir.file("plain");
  std::vector<char> data(size, '\x5a'), back(size);
  for (auto _ : state) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ::write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size()) ||
        ::fsync(fd) != 0 || ::close(fd) != 0) {
      state.SkipWithError("cannot write the plain file");
      break;
    }
    const int in = ::open(path.c_str(), O_RDONLY);
    const ssize_t n = in < 0 ? -1 : ::read(in, back.data(), back.size());
    if (in >= 0) ::close(in);
    if (n != static_cast<ssize_t>(size)) {
      state.SkipWithError("cannot read the plain file back");
      break;
    }
    benchmark::DoNotOptimize(back.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * size));
  state.counters["file_bytes"] = static_cast<double>(size);
}
BENCHMARK(BM_PlainWriteReadCheckpointSize)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
