#include "strata/keras/callbacks/tensorboard.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/str_cat.h"
#include "strata/io/tfrecord.h"
#include "strata/keras/callbacks/event.pb.h"

namespace strata::keras::callbacks {
namespace {

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

// TensorFlow's file name: events.out.tfevents.<%010d seconds>.<host>.<pid>.<uid>.v2,
// where uid counts the files this process opened. The pid and the counter keep two
// runs that start in the same second (two processes, or two fits in one) from
// writing the same file.
std::string event_file_name(double now) {
  static std::atomic<int64_t> files_opened{0};
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%010lld", static_cast<long long>(now));
  return str_cat("events.out.tfevents.", seconds, ".", hostname(), ".", int64_t(::getpid()), ".",
                 files_opened.fetch_add(1) + 1, ".v2");
}

}  // namespace

TensorBoardCallback::TensorBoardCallback(const TensorBoardOptions& options) : options_(options) {
  STRATA_CHECK_ARG(!options.log_dir.empty(), "TensorBoard: log_dir is empty");
  STRATA_CHECK(UNIMPLEMENTED, options.histogram_freq == 0,
               "TensorBoard: histogram_freq=", options.histogram_freq,
               " (histograms) is not supported; only scalar summaries are written");
  STRATA_CHECK(UNIMPLEMENTED, !options.write_images, "TensorBoard: write_images is not supported");
  STRATA_CHECK(UNIMPLEMENTED, options.update_freq == "epoch", "TensorBoard: update_freq='",
               options.update_freq, "' is not supported; only 'epoch'");
  STRATA_CHECK(UNIMPLEMENTED, options.profile_batch == 0,
               "TensorBoard: profiling is not supported");
  STRATA_CHECK(UNIMPLEMENTED, options.embeddings_freq == 0,
               "TensorBoard: embeddings are not supported");
}

std::shared_ptr<TensorBoardCallback> TensorBoard(const TensorBoardOptions& options) {
  return std::make_shared<TensorBoardCallback>(options);
}

TensorBoardCallback::Writer& TensorBoardCallback::writer(const std::string& run) {
  auto it = writers_.find(run);
  if (it != writers_.end()) return it->second;
  const std::filesystem::path dir = std::filesystem::path(options_.log_dir) / run;
  strata::make_dirs(dir.string());
  Writer w;
  const double now = wall_time();
  w.path = (dir / event_file_name(now)).string();
  tensorflow::Event version;
  version.set_wall_time(now);
  version.set_file_version("brain.Event:2");
  w.records.push_back(version.SerializeAsString());
  return writers_.emplace(run, std::move(w)).first->second;
}

std::string TensorBoardCallback::event_file(const std::string& run) const {
  auto it = writers_.find(run);
  return it == writers_.end() ? std::string() : it->second.path;
}

void TensorBoardCallback::write_run_scalars(const std::string& run, int64_t step,
                                            const Logs& values) {
  write_scalars(run, step, values, /*tag_prefix=*/"");
}

void TensorBoardCallback::write_scalars(const std::string& run, int64_t step, const Logs& logs,
                                        const std::string& tag_prefix) {
  if (logs.empty()) return;
  Writer& w = writer(run);
  tensorflow::Event event;
  event.set_wall_time(wall_time());
  event.set_step(step);
  for (const auto& [name, value] : logs) {
    tensorflow::Summary::Value* v = event.mutable_summary()->add_value();
    v->set_tag(tag_prefix + name);
    v->set_simple_value(float(value));
  }
  w.records.push_back(event.SerializeAsString());
  io::TFRecordWriter out(w.path);
  for (const std::string& r : w.records) out.write(r);
  out.close();
}

void TensorBoardCallback::on_train_begin(Logs&) {
  writers_.clear();
  // Each run writes new event files; a run killed while rewriting one left its
  // temporary file beside it: gone now.
  for (const char* run : {"train", "validation"}) {
    strata::remove_interrupted_writes_in((std::filesystem::path(options_.log_dir) / run).string(),
                                         "events.out.tfevents.");
  }
}

void TensorBoardCallback::on_epoch_begin(int, Logs&) {
  epoch_start_ = wall_time();
  epoch_steps_ = 0;
}

void TensorBoardCallback::on_train_batch_end(int64_t batch, Logs&) { epoch_steps_ = batch + 1; }

void TensorBoardCallback::on_epoch_end(int epoch, Logs& logs) {
  Logs train, validation;
  for (const auto& [name, value] : logs) {
    if (name.rfind("val_", 0) == 0) {
      validation.set(name.substr(4), value);
    } else {
      train.set(name, value);
    }
  }
  if (options_.write_steps_per_second) {
    const double elapsed = wall_time() - epoch_start_;
    train.set("steps_per_second", elapsed > 0 ? double(epoch_steps_) / elapsed : 0.0);
  }
  write_scalars("train", epoch, train);
  write_scalars("validation", epoch, validation);
}

}  // namespace strata::keras::callbacks
