// The seed page's experimental_distribute_values_from_function examples, in C++:
// a constant per replica, values picked from an array by replica id, values from
// num_replicas_in_sync, and values placed on each worker device beforehand.
//
//   build/examples/values_from_function
#include <iostream>
#include <vector>

#include "strata/strata.h"

namespace tf = strata;
namespace sd = strata::distribute;

namespace {
int failures = 0;
void expect(bool ok, const char* what) {
  if (!ok) {
    std::cerr << "unexpected result: " << what << "\n";
    ++failures;
  }
}
}  // namespace

int main() {
  sd::MirroredStrategy strategy;
  const int n = strategy.num_replicas_in_sync();

  // 1. A constant value for every replica.
  auto constants = strategy.experimental_distribute_values_from_function(
      [](const sd::ValueContext&) { return tf::constant(1.f); });
  for (const tf::Tensor& t : strategy.experimental_local_results(constants)) {
    std::cout << t << "\n";
    expect(t.item<float>() == 1.f, "constant 1.0 on every replica");
  }

  // 2. Values picked from an array by replica id.
  const std::vector<float> array_value{3.f, 2.f, 1.f};
  auto picked = strategy.experimental_distribute_values_from_function(
      [&](const sd::ValueContext& ctx) { return array_value.at(ctx.replica_id_in_sync_group()); });
  const std::vector<float> picked_values = strategy.experimental_local_results(picked);
  for (int i = 0; i < n; ++i) {
    std::cout << picked_values[i] << "\n";
    expect(picked_values[i] == array_value[i], "array_value[replica_id]");
  }

  // 3. Values from num_replicas_in_sync.
  auto counts = strategy.experimental_distribute_values_from_function(
      [](const sd::ValueContext& ctx) { return ctx.num_replicas_in_sync(); });
  for (int v : strategy.experimental_local_results(counts)) {
    std::cout << v << "\n";
    expect(v == n, "num_replicas_in_sync");
  }

  // 4. Values placed on the worker devices first, then distributed.
  const std::vector<std::string> worker_devices = strategy.extended().worker_devices();
  std::vector<tf::Tensor> multiple_values;
  for (int i = 0; i < strategy.num_replicas_in_sync(); ++i) {
    auto scope = tf::device(worker_devices[i]);
    multiple_values.push_back(tf::constant(1.0f));
  }
  auto placed = strategy.experimental_distribute_values_from_function(
      [&](const sd::ValueContext& ctx) { return multiple_values[ctx.replica_id_in_sync_group()]; });
  const std::vector<tf::Tensor> placed_values = strategy.experimental_local_results(placed);
  for (int i = 0; i < n; ++i) {
    std::cout << placed_values[i].device() << ": " << placed_values[i] << "\n";
    expect(placed_values[i].device() == worker_devices[i], "value placed on its worker device");
  }
  return failures == 0 ? 0 : 1;
}
