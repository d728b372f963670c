// CommunicationOptions.check_divergence_every_n_steps: the replicas' copies of
// every MirroredVariable are compared every N steps (TensorFlow has no such
// check; it trusts every replica to apply the same update).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/base/errors.h"
#include "strata/core/config.h"
#include "strata/distribute/distributed_variable.h"
#include "strata/distribute/mirrored_strategy.h"
#include "strata/ops/math_ops.h"
#include "strata/testing/expect_error.h"
#include "strata/testing/logical_devices.h"

namespace strata::distribute {
namespace {

class DivergenceCheckTest : public ::testing::Test {
 protected:
  void SetUp() override { strata::testing::use_logical_cpus(3); }
};

// Every replica adds the same value to its own copy (an optimizer's update).
void same_update_on_every_replica(Strategy& s, const Variable& v) {
  s.run([&] { v.assign_add(strata::constant(std::vector<float>{1.f, 2.f}, TensorShape({2}))); });
}

TEST_F(DivergenceCheckTest, CorruptedCopyIsReportedAtTheNextCheckNamingVariableReplicasAndStep) {
  MirroredStrategy s({"CPU:0", "CPU:1", "CPU:2"}, {.check_divergence_every_n_steps = 2});
  Variable w, b;
  {
    auto scope = s.scope();
    w = Variable(strata::constant(std::vector<float>{0.f, 0.f}, TensorShape({2})), {.name = "w"});
    b = Variable(strata::constant(std::vector<float>{5.f, 5.f}, TensorShape({2})), {.name = "b"});
  }
  same_update_on_every_replica(s, w);
  same_update_on_every_replica(s, w);  // step 2: checked, every copy equal
  EXPECT_EQ(s.steps_completed(), 2);
  // Replica 1's copy drifts (a bit flip, a buggy custom update...).
  distributed_components(w).at(1).assign(
      strata::constant(std::vector<float>{2.f, 4.000001f}, TensorShape({2})));
  same_update_on_every_replica(s, w);  // step 3: not a check step
  testing::expect_error([&] { same_update_on_every_replica(s, w); }, ErrorCode::DATA_LOSS,
                        {"MirroredStrategy", "1 of 2 mirrored variables", "differ at step 4",
                         "check_divergence_every_n_steps = 2", "variable 'w' (shape [2])",
                         "replicas [0, 2] hold fingerprint", "replica [1] holds fingerprint"});
  // The report names only the variables that differ.
  try {
    same_update_on_every_replica(s, w);
    same_update_on_every_replica(s, w);
    ADD_FAILURE() << "step 6 should have failed the check again";
  } catch (const DataLossError& e) {
    EXPECT_EQ(std::string(e.what()).find("variable 'b'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("differ at step 6"), std::string::npos) << e.what();
  }
}

TEST_F(DivergenceCheckTest, EqualCopiesPassEveryCheckAndTheValuesAreUntouched) {
  MirroredStrategy s({"CPU:0", "CPU:1"}, {.check_divergence_every_n_steps = 1});
  Variable w;
  {
    auto scope = s.scope();
    w = Variable(strata::constant(std::vector<float>{0.f, 0.f}, TensorShape({2})), {.name = "w"});
  }
  for (int i = 0; i < 5; ++i) same_update_on_every_replica(s, w);
  for (const Variable& c : distributed_components(w)) {
    EXPECT_EQ(c.value().to_vector<float>(), (std::vector<float>{5.f, 10.f}));
  }
}

TEST_F(DivergenceCheckTest, SyncOnReadVariablesMayDifferAndAreNotChecked) {
  MirroredStrategy s({"CPU:0", "CPU:1"}, {.check_divergence_every_n_steps = 1});
  Variable total;
  {
    auto scope = s.scope();
    total = Variable(strata::constant(0.f), {.name = "total",
                                             .synchronization = VariableSynchronization::ON_READ,
                                             .aggregation = VariableAggregation::SUM});
  }
  // Each replica accumulates its own part, as a metric does.
  s.run([&] {
    total.assign_add(
        strata::constant(float(get_replica_context()->replica_id_in_sync_group() + 1)));
  });
  EXPECT_EQ(total.value().item<float>(), 3.f);
}

TEST_F(DivergenceCheckTest, OptionsAreValidated) {
  testing::expect_invalid_argument(
      [] {
        MirroredStrategy s({"CPU:0", "CPU:1"}, {.check_divergence_every_n_steps = -1});
      },
      {"check_divergence_every_n_steps", "-1"});
  testing::expect_invalid_argument(
      [] {
        MirroredStrategy s({"CPU:0", "CPU:1"}, {.deterministic_micro_batches = 6});
      },
      {"deterministic_micro_batches", "power of two", "6"});
  testing::expect_invalid_argument(
      [] {
        MirroredStrategy s({"CPU:0", "CPU:1", "CPU:2"},
                           {.deterministic_reduction = true, .deterministic_micro_batches = 8});
      },
      {"multiple of the 3 replicas", "got 8"});
}

}  // namespace
}  // namespace strata::distribute
