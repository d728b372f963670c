// One worker of the fault-injection tests (fault_injection_test.cc starts the
// processes of a job itself, so that it can stop, kill or disturb one of them):
//
//   fault_worker --timeout S --steps N [--profile 1] [--shared-memory 0]
//
// builds a MultiWorkerMirroredStrategy from TF_CONFIG with a collective
// timeout of S seconds (the start-up deadline too; --shared-memory 0: Gloo over
// TCP only, CommunicationOptions.shared_memory OFF), prints "ready (<how
// collectives cross workers>)" once the workers met, then runs N all-reduces of 1 across the
// workers, 20 ms apart, checking each sum, and prints "done". With --profile 1 the strategy keeps a
// step profile, each all-reduce is a step and the 20 ms between them its
// input phase (what a worker stopped there was last doing). A failure prints
// "error (<CODE>): <message>" and exits 1. Every line goes to stdout, flushed.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>

#include "strata/strata.h"

namespace tf = strata;
namespace sd = strata::distribute;

int main(int argc, char** argv) {
  double timeout_s = 10;
  int steps = 100;
  bool profile = false;
  bool shared_memory = true;
  for (int i = 1; i + 1 < argc; i += 2) {
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
