// The seed page's scope example: a variable created inside strategy.scope() is
// a MirroredVariable (one copy per replica, kept equal); one created outside is
// an ordinary variable. Inside the scope get_strategy() is the strategy and we
// are in the cross-replica context; outside it is the default strategy.
//
//   build/examples/mirrored_scope
#include <iostream>

#include "example_check.h"
#include "strata/strata.h"

namespace tf = strata;
namespace sd = strata::distribute;
using example::expect;

int main() {
  sd::MirroredStrategy strategy;
  tf::Variable mirrored_variable;
  {
    auto scope = strategy.scope();
    expect(&sd::get_strategy() == &strategy, "get_strategy() is the strategy inside its scope");
    expect(sd::in_cross_replica_context(), "the scope enters the cross-replica context");
    mirrored_variable = tf::Variable(tf::constant(1.f));
  }
  std::cout << mirrored_variable << "\n";
  expect(sd::is_mirrored_variable(mirrored_variable), "a variable created in scope is mirrored");
  expect(static_cast<int>(sd::distributed_components(mirrored_variable).size()) ==
             strategy.num_replicas_in_sync(),
         "one copy per replica");

  // Variable created outside scope:
  tf::Variable regular_variable(tf::constant(1.f));
  std::cout << regular_variable << "\n";
  expect(!sd::is_distributed_variable(regular_variable), "a variable created outside is ordinary");
  expect(sd::get_strategy().is_default(), "outside every scope the default strategy is current");

  // Updates in a replica context with SUM aggregation keep every copy equal.
  tf::Variable total;
  {
    auto scope = strategy.scope();
    total = tf::Variable(tf::constant(0.f), {.aggregation = tf::VariableAggregation::SUM});
  }
  strategy.run([&] { total.assign_add(tf::constant(1.f) * tf::constant(1.f)); });
  for (const tf::Variable& copy : sd::distributed_components(total)) {
    expect(copy.value().item<float>() == static_cast<float>(strategy.num_replicas_in_sync()),
           "SUM adds every replica's value to every copy");
  }
  std::cout << total << "\n";
  return example::exit_code();
}
