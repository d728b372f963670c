// One worker of the fault-injection tests (fault_injection_test.cc starts the
// processes of a job itself, so that it can stop, kill or disturb one of them):
//
//   fault_worker --timeout S --steps N [--profile 1] [--shared-memory 0] [--train 1]
//
// builds a MultiWorkerMirroredStrategy from TF_CONFIG with a collective
// timeout of S seconds (the start-up deadline too; --shared-memory 0: Gloo over
// TCP only, CommunicationOptions.shared_memory OFF), prints "ready (<how
// collectives cross workers>)" once the workers met, then runs N all-reduces of 1 across the
// workers, 20 ms apart, checking each sum, and prints "done". With --profile 1 the strategy keeps a
// step profile, each all-reduce is a step and the 20 ms between them its
// input phase (what a worker stopped there was last doing). A failure prints
// "error (<CODE>): <message>" and exits 1. Every line goes to stdout, flushed.
// With --train 1 each step is instead a training step of a 32-256-256 ReLU
// network (tape.gradient of its two kernels, then their SUM all-reduce, as
// apply_gradients runs it), 20 ms apart, with the default
// CommunicationOptions: the all-reduce runs in buckets during the backward
// pass (overlap_gradient_reduction). Every worker computes the same local
// gradients, so each sum must be exactly num_workers times them; after the
// first step it prints "overlapped (<buckets per step>)" once the all-reduce
// took the early sums.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "strata/strata.h"

namespace tf = strata;
namespace sd = strata::distribute;

namespace {

// The --train 1 steps (see above); 0 when every sum was right, else 1.
int train_steps(sd::MultiWorkerMirroredStrategy& strategy, int steps) {
  std::vector<tf::Variable> kernels;
  {
    const sd::StrategyScope scope(strategy);
    kernels.emplace_back(tf::random::uniform({32, 256}, {.seed = 1}), tf::VariableOptions{});
    kernels.emplace_back(tf::random::uniform({256, 256}, {.seed = 2}), tf::VariableOptions{});
  }
  const tf::Tensor x = tf::random::uniform({8, 32}, {.seed = 3});
  const float workers = static_cast<float>(strategy.num_workers());
  for (int step = 0; step < steps; ++step) {
    const auto wrong = strategy.run([&] {
      std::vector<tf::Tensor> grads;
      {
        tf::GradientTape tape;
        const tf::Tensor h = tf::relu(tf::matmul(x, kernels[0].value()));
        grads =
            tape.gradient(tf::reduce_sum(tf::square(tf::matmul(h, kernels[1].value()))), kernels);
      }
      const std::vector<tf::Tensor> sums =
          sd::get_replica_context()->all_reduce(sd::ReduceOp::SUM, grads);
      int64_t differing = 0;
      for (size_t i = 0; i < sums.size(); ++i) {
        const std::vector<float> mine = grads[i].to_vector<float>();
        const std::vector<float> all = sums[i].to_vector<float>();
        for (size_t k = 0; k < mine.size(); ++k) differing += all[k] != workers * mine[k];
      }
      return tf::constant(differing);
    });
    const int64_t differing = strategy.experimental_local_results(wrong).front().item<int64_t>();
    if (differing != 0) {
      std::cout << "error (WRONG_SUM): step " << step << ": " << differing << " sums differ"
                << std::endl;
      return 1;
    }
    if (step == 0) {
      const sd::GradientOverlapCounts counts = strategy.gradient_overlap_counts();
      if (counts.used == 1) std::cout << "overlapped (" << counts.buckets << ")" << std::endl;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::cout << "done" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  double timeout_s = 10;
  int steps = 100;
  bool profile = false;
  bool shared_memory = true;
  bool train = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--train") == 0) train = std::atoi(argv[i + 1]) != 0;
    if (std::strcmp(argv[i], "--timeout") == 0) timeout_s = std::atof(argv[i + 1]);
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--profile") == 0) profile = std::atoi(argv[i + 1]) != 0;
    if (std::strcmp(argv[i], "--shared-memory") == 0) shared_memory = std::atoi(argv[i + 1]) != 0;
  }
  try {
    sd::MultiWorkerMirroredStrategy strategy(
        {.communication_options = {
             .timeout_seconds = timeout_s,
             .shared_memory = shared_memory ? sd::SharedMemory::AUTO : sd::SharedMemory::OFF}});
    if (profile) strategy.enable_step_profile();
    std::cout << "ready (" << strategy.cross_worker_transport() << ")" << std::endl;
    if (train) return train_steps(strategy, steps);
    const tf::Tensor one = tf::constant(1.0f);
    const sd::StrategyScope scope(strategy);
    for (int step = 0; step < steps; ++step) {
      if (profile) strategy.step_profiler()->count_step();
      const float sum = strategy.sum_across_workers(one).item<float>();
      if (sum != static_cast<float>(strategy.num_workers())) {
        std::cout << "error (WRONG_SUM): step " << step << " summed to " << sum << std::endl;
        return 1;
      }
      const sd::ScopedStepPhase input(sd::StepPhase::kInput);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::cout << "done" << std::endl;
    return 0;
  } catch (const tf::Error& e) {
    std::cout << "error (" << tf::error_code_name(e.code()) << "): " << e.what() << std::endl;
    return 1;
  }
}
