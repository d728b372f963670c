#include <gtest/gtest.h>

#include "strata/base/errors.h"
#include "strata/distribute/input_context.h"
#include "strata/distribute/rebatch.h"

namespace strata::distribute {
namespace {

TEST(RebatchSizes, MatchTheSpecExamples) {
  EXPECT_EQ(rebatch_sizes(8, 1, 2, 0), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(rebatch_sizes(7, 2, 2, 0), (std::vector<int64_t>{2, 2, 2, 1}));
  EXPECT_EQ(rebatch_sizes(7, 2, 2, 1), (std::vector<int64_t>{2, 1, 2, 2}));
  EXPECT_EQ(rebatch_sizes(4, 1, 3, 0), (std::vector<int64_t>{2, 1, 1}));
  EXPECT_EQ(rebatch_sizes(2, 1, 4, 0), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(rebatch_sizes(0, 1, 2, 0), (std::vector<int64_t>{0, 0}));
}

TEST(RebatchSizes, EveryStepAcrossWorkersSumsToTheGlobalBatch) {
  for (int64_t b = 0; b < 40; ++b) {
    for (int w = 1; w <= 4; ++w) {
      for (int r = 1; r <= 3; ++r) {
        std::vector<std::vector<int64_t>> lists;
        lists.reserve(w);
        for (int i = 0; i < w; ++i) lists.push_back(rebatch_sizes(b, w, r, i));
        for (const auto& l : lists) {
          ASSERT_EQ(static_cast<int>(l.size()), w * r);
          int64_t sum = 0, lo = b, hi = 0;
          for (int64_t s : l) {
            sum += s;
            lo = std::min(lo, s);
            hi = std::max(hi, s);
          }
          ASSERT_EQ(sum, b);
          ASSERT_LE(hi - lo, 1);
        }
        for (int step = 0; step < w; ++step) {
          int64_t step_sum = 0;
          for (int i = 0; i < w; ++i)
            for (int j = 0; j < r; ++j) step_sum += lists[i][step * r + j];
          ASSERT_EQ(step_sum, b) << "B=" << b << " W=" << w << " r=" << r << " step " << step;
        }
      }
    }
  }
}

TEST(RebatchSizes, InvalidArgumentsAreRejected) {
  EXPECT_THROW(rebatch_sizes(-1, 1, 1, 0), InvalidArgumentError);
  EXPECT_THROW(rebatch_sizes(4, 0, 1, 0), InvalidArgumentError);
  EXPECT_THROW(rebatch_sizes(4, 2, 1, 2), InvalidArgumentError);
}

TEST(LegacyRebatchSizes, CutsIntoCeilPieces) {
  EXPECT_EQ(legacy_rebatch_sizes(4, 3), (std::vector<int64_t>{2, 2, 0}));
  EXPECT_EQ(legacy_rebatch_sizes(8, 3), (std::vector<int64_t>{3, 3, 2}));
  EXPECT_EQ(legacy_rebatch_sizes(0, 2), (std::vector<int64_t>{0, 0}));
}

TEST(InputContextTest, PerReplicaBatchSizeChecksDivisibility) {
  InputContext ctx(2, 1, 4);
  EXPECT_EQ(ctx.get_per_replica_batch_size(64), 16);
  try {
    ctx.get_per_replica_batch_size(66);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(),
                 "The `global_batch_size` 66 is not divisible by `num_replicas_in_sync` 4");
  }
  EXPECT_EQ(ctx.to_string(), "tf.distribute.InputContext(input pipeline id 1, total: 2)");
  InputContext def;
  EXPECT_EQ(def.num_input_pipelines(), 1);
  EXPECT_EQ(def.get_per_replica_batch_size(7), 7);
  EXPECT_THROW(InputContext(2, 2, 1), InvalidArgumentError);
}

TEST(InputOptionsTest, ValidationFollowsTensorFlow) {
  EXPECT_NO_THROW(validate_input_options({}, false));
  EXPECT_THROW(validate_input_options(
                   {.experimental_replication_mode = InputReplicationMode::PER_REPLICA}, false),
               UnimplementedError);
  EXPECT_NO_THROW(validate_input_options(
      {.experimental_replication_mode = InputReplicationMode::PER_REPLICA}, true));
  EXPECT_THROW(validate_input_options({.experimental_place_dataset_on_device = true}, true),
               InvalidArgumentError);
  EXPECT_THROW(
      validate_input_options({.experimental_replication_mode = InputReplicationMode::PER_REPLICA,
                              .experimental_place_dataset_on_device = true},
                             true),
      InvalidArgumentError);
  EXPECT_NO_THROW(
      validate_input_options({.experimental_fetch_to_device = false,
                              .experimental_replication_mode = InputReplicationMode::PER_REPLICA,
                              .experimental_place_dataset_on_device = true},
                             true));
}

}  // namespace
}  // namespace strata::distribute
