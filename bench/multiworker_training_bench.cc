// MLP (or CNN) training under MultiWorkerMirroredStrategy over 2 real processes x 1
// thread on 127.0.0.1, the multi-worker training figure. Same model, optimizer,
// loss and global batch as training_bench's BM_MirroredTrainMLP (the MLP
// 784-512-256-10, ReLU, Adam 1e-3, sparse CCE from logits, global batch 128 =
// 64 per worker, one synthetic batch in memory per worker fed through a
// dataset at every step); the peer is bench/peers/torch_ddp.py (PyTorch DDP,
// 2 processes x 1 thread, gloo), run right after it.
//
//   multiworker_training_bench [--workers 2] [--steps 200] [--warmup 10] [--repetitions 3]
//                              [--profile 0|1] [--shared-memory 1]
//                              [--shard-weight-update 0|1] [--overlap 0|1]
//                              [--bucket-kib 256] [--model mlp|cnn]
//
// Without TF_CONFIG the program is the launcher: it picks free loopback ports,
// starts itself once per worker with TF_CONFIG set (worker i = task i), waits
// (at most --deadline seconds, default 300; then it kills the workers and
// fails) and exits non-zero if a worker fails. Each worker builds the
// strategy (1 logical CPU device, 1 intra-op thread), runs --warmup untimed
// steps, then --repetitions timed runs of --steps steps, each between two
// cross-worker barriers (an all-reduce), so a run's time is the slowest
// worker's. Worker 0 prints one JSON line:
//   {"impl": "strata_multiworker", "workers": 2, "threads": 1, "batch_size": 128,
//    "examples_per_second": <median>, "seconds_per_step": <median>,
//    "process_cpu_ms_per_step": <median CPU of every worker per step>, "runs": [...],
//    "forward_ms": ..., "gradient_ms": ..., "apply_ms": ..., "load1": ...}
// where forward/gradient/apply split worker 0's step (apply = apply_gradients,
// with the cross-worker all-reduce). `--profile 1` turns on the strategy's
// step profile (strategy.enable_step_profile(): every phase timed and a
// barrier before each cross-worker all-reduce), to measure what it costs;
// the JSON line then carries "profile": 1. `--shard-weight-update 1` sets
// CommunicationOptions.shard_weight_update (the sharded weight update).
// `--overlap 0|1` sets CommunicationOptions.overlap_gradient_reduction (the
// all-reduce in buckets of --bucket-kib KiB during the backward pass; the
// library's defaults: on, 256 KiB); the JSON line counts the buckets per step
// and the all-reduces they answered.
// `--model cnn` trains training_bench's CNN (Conv 32 3x3, MaxPool 2, Conv 64
// 3x3, MaxPool 2, Dense 128, Dense 10) on 28x28x1 inputs instead of the MLP.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "bench/process_clock.h"
#include "strata/keras/keras.h"
#include "strata/strata.h"

extern char** environ;

namespace strata {
namespace {

namespace keras = strata::keras;
namespace sd = strata::distribute;

constexpr int64_t kGlobalBatch = 128;

struct Args {
  int workers = 2;
  int steps = 200;
  int warmup = 10;
  int repetitions = 3;
  int deadline_s = 300;
  bool profile = false;
  // CommunicationOptions.shared_memory: 1 AUTO (the workers share this host,
  // so shared memory), 0 OFF (Gloo over TCP).
  int shared_memory = 1;
  bool shard_weight_update = false;
  bool overlap = true;
  int bucket_kib = 256;
  bool cnn = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    STRATA_CHECK_ARG(i + 1 < argc, "multiworker_training_bench: ", name, " needs a value");
    if (name == "--model") {
      const std::string model = argv[++i];
      STRATA_CHECK_ARG(model == "mlp" || model == "cnn",
                       "multiworker_training_bench: --model must be mlp or cnn, got ", model);
      a.cnn = model == "cnn";
      continue;
    }
    const int value = std::stoi(argv[++i]);
    STRATA_CHECK_ARG(value >= 0, "multiworker_training_bench: ", name, " must be >= 0, got ",
                     value);
    if (name == "--workers") {
      a.workers = value;
    } else if (name == "--steps") {
      a.steps = value;
    } else if (name == "--warmup") {
      a.warmup = value;
    } else if (name == "--repetitions") {
      a.repetitions = value;
    } else if (name == "--deadline") {
      a.deadline_s = value;
    } else if (name == "--profile") {
      a.profile = value != 0;
    } else if (name == "--shared-memory") {
      a.shared_memory = value;
    } else if (name == "--shard-weight-update") {
      a.shard_weight_update = value != 0;
    } else if (name == "--overlap") {
      a.overlap = value != 0;
    } else if (name == "--bucket-kib") {
      a.bucket_kib = value;
    } else {
      STRATA_CHECK_ARG(false, "multiworker_training_bench: unknown flag ", name);
    }
  }
  STRATA_CHECK_ARG(a.workers >= 1 && a.steps >= 1 && a.repetitions >= 1,
                   "multiworker_training_bench: expected --workers, --steps, --repetitions >= 1");
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// --- launcher ----------------------------------------------------------------

int launch(const Args& args, char** argv) {
  const std::vector<int> ports = cluster::pick_free_ports(args.workers);
  std::string cluster;
  for (int p : ports) cluster += str_cat(cluster.empty() ? "" : ", ", "\"127.0.0.1:", p, "\"");
  std::vector<pid_t> pids;
  for (int i = 0; i < args.workers; ++i) {
    const std::string tf_config =
        str_cat("TF_CONFIG={\"cluster\": {\"worker\": [", cluster,
                "]}, \"task\": {\"type\": \"worker\", \"index\": ", i, "}}");
    std::vector<std::string> env_strings{tf_config};
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "TF_CONFIG=", 10) != 0) env_strings.emplace_back(*e);
    }
    std::vector<char*> env;
    env.reserve(env_strings.size() + 1);
    for (std::string& s : env_strings) env.push_back(s.data());
    env.push_back(nullptr);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, env.data());
    STRATA_CHECK(UNAVAILABLE, rc == 0, "posix_spawn worker ", i, ": ", std::strerror(rc));
    pids.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(args.deadline_s);
  int failures = 0, running = args.workers;
  while (running > 0) {
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done > 0) {
      --running;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok) {
        ++failures;
        std::cerr << "multiworker_training_bench: worker pid " << done << " failed (status "
                  << status << ")\n";
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::cerr << "multiworker_training_bench: workers still running after " << args.deadline_s
                << " s; killing them\n";
      for (pid_t p : pids) ::kill(p, SIGKILL);
      while (::waitpid(-1, &status, 0) > 0) {
      }
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return failures == 0 ? 0 : 1;
}

// --- worker ------------------------------------------------------------------

std::shared_ptr<keras::SequentialModel> make_model(bool cnn) {
  namespace L = keras::layers;
  if (cnn) {
    return keras::Sequential(
        {L::Conv2D(32, {3, 3}, {.activation = "relu", .input_shape = {28, 28, 1}}),
         L::MaxPooling2D({2, 2}), L::Conv2D(64, {3, 3}, {.activation = "relu"}),
         L::MaxPooling2D({2, 2}), L::Flatten(), L::Dense(128, {.activation = "relu"}),
         L::Dense(10)});
  }
  return keras::Sequential({L::Dense(512, {.activation = "relu", .input_shape = {784}}),
                            L::Dense(256, {.activation = "relu"}), L::Dense(10)});
}

int work(const Args& args) {
  config::set_intra_op_parallelism_threads(1);
  sd::MultiWorkerMirroredStrategy strategy(
      {.communication_options = {.timeout_seconds = 120,
                                 .shared_memory = args.shared_memory != 0 ? sd::SharedMemory::AUTO
                                                                          : sd::SharedMemory::OFF,
                                 .shard_weight_update = args.shard_weight_update,
                                 .overlap_gradient_reduction = args.overlap,
                                 .gradient_bucket_bytes = int64_t{args.bucket_kib} << 10}});
  if (args.profile) strategy.enable_step_profile();
  const int worker = strategy.input_pipeline_id();
  std::shared_ptr<keras::SequentialModel> model;
  std::shared_ptr<keras::optimizers::AdamOptimizer> optimizer;
  {
    auto scope = strategy.scope();
    model = make_model(args.cnn);
    optimizer = keras::optimizers::Adam({.learning_rate = 1e-3});
    optimizer->build(model->trainable_variables());
  }
  // Every worker's own synthetic batch of 64 (as torch_ddp.py's processes).
  sd::DistributedDataset dd =
      strategy.experimental_distribute_datasets_from_function([&](const sd::InputContext& ctx) {
        const int64_t b = ctx.get_per_replica_batch_size(kGlobalBatch);
        const TensorShape shape = args.cnn ? TensorShape{b, 28, 28, 1} : TensorShape{b, 784};
        const Tensor x = random::uniform(shape, {.seed = 1 + ctx.input_pipeline_id()});
        const Tensor y = cast(
            random::uniform_int({b}, 0, 10, {.seed = 2 + ctx.input_pipeline_id()}), DType::int64);
        return data::Dataset::from_tensors({x, y}).repeat();
      });
  sd::DistributedIterator it = dd.iter();
  bool timing = false;
  double phase[3] = {0, 0, 0};
  auto step = [&](const data::Element& batch) {
    const double t0 = bench::wall_seconds();
    double t1 = 0;
    std::vector<Tensor> grads;
    {
      GradientTape tape;
      Tensor logits = (*model)(batch[0], /*training=*/true);
      Tensor per_example =
          keras::losses::sparse_categorical_crossentropy(batch[1], logits, {.from_logits = true});
      Tensor loss = nn::compute_average_loss(per_example, {.global_batch_size = kGlobalBatch});
      t1 = bench::wall_seconds();
      grads = tape.gradient(loss, model->trainable_variables());
    }
    const double t2 = bench::wall_seconds();
    optimizer->apply_gradients(zip(grads, model->trainable_variables()));
    if (timing) {
      phase[0] += t1 - t0;
      phase[1] += t2 - t1;
      phase[2] += bench::wall_seconds() - t2;
    }
  };
  // A barrier across every worker that also sums `value` over them.
  auto sum_over_workers = [&](double value) {
    auto r = strategy.run(
        [&] { return sd::get_replica_context()->all_reduce(sd::ReduceOp::SUM, constant(value)); });
    return strategy.experimental_local_results(r).front().item<double>();
  };
  for (int i = 0; i < args.warmup; ++i) strategy.run(step, it.get_next());
  timing = true;
  std::vector<double> rates, step_seconds, cpu_ms;
  for (int r = 0; r < args.repetitions; ++r) {
    sum_over_workers(0);
    const double wall0 = bench::wall_seconds();
    const double cpu0 = bench::process_cpu_seconds();
    for (int i = 0; i < args.steps; ++i) strategy.run(step, it.get_next());
    const double cpu = bench::process_cpu_seconds() - cpu0;
    const double total_cpu = sum_over_workers(cpu);  // also the closing barrier
    const double wall = bench::wall_seconds() - wall0;
    step_seconds.push_back(wall / args.steps);
    rates.push_back(static_cast<double>(kGlobalBatch) * args.steps / wall);
    cpu_ms.push_back(1e3 * total_cpu / args.steps);
  }
  if (worker == 0) {
    const double steps = static_cast<double>(args.steps) * args.repetitions;
    const sd::GradientOverlapCounts counts = strategy.gradient_overlap_counts();
    const int64_t steps_run = int64_t{args.warmup} + int64_t{args.steps} * args.repetitions;
    std::string runs;
    for (double r : rates) runs += str_cat(runs.empty() ? "" : ", ", static_cast<int64_t>(r));
    double load[1] = {0.0};
    ::getloadavg(load, 1);
    std::printf(
        "{\"impl\": \"strata_multiworker\", \"transport\": \"%s\", \"workers\": %d, \"threads\": "
        "1, "
        "\"batch_size\": %lld, "
        "\"examples_per_second\": %.1f, \"seconds_per_step\": %.6f, "
        "\"process_cpu_ms_per_step\": %.3f, \"runs\": [%s], \"forward_ms\": %.3f, "
        "\"gradient_ms\": %.3f, \"apply_ms\": %.3f, \"profile\": %d, \"model\": \"%s\", "
        "\"overlap\": %d, \"bucket_kib\": %d, \"buckets_per_step\": %.2f, "
        "\"early_reductions_used\": %lld, \"load1\": %.2f}\n",
        strategy.cross_worker_transport().c_str(), args.workers,
        static_cast<long long>(kGlobalBatch), median(rates), median(step_seconds), median(cpu_ms),
        runs.c_str(), 1e3 * phase[0] / steps, 1e3 * phase[1] / steps, 1e3 * phase[2] / steps,
        args.profile ? 1 : 0, args.cnn ? "cnn" : "mlp", args.overlap ? 1 : 0, args.bucket_kib,
        static_cast<double>(counts.buckets) / static_cast<double>(steps_run),
        static_cast<long long>(counts.used), load[0]);
    std::fflush(stdout);
  }
  sum_over_workers(0);  // keep the chief's store up until every worker is done
  return 0;
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  try {
    const strata::Args args = strata::parse(argc, argv);
    const char* tf_config = std::getenv("TF_CONFIG");
    if (tf_config == nullptr || *tf_config == '\0') return strata::launch(args, argv);
    return strata::work(args);
  } catch (const std::exception& e) {
    std::cerr << "multiworker_training_bench: " << e.what() << "\n";
    return 1;
  }
}
