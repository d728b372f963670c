#include "strata/keras/internal/distributed_file_utils.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "strata/distribute/mirrored_strategy.h"
#include "strata/distribute/strategy.h"
#include "strata/testing/files.h"

namespace strata::keras::internal {
namespace {

namespace fs = std::filesystem;

// Outside multi-worker mode every path stays as given and nothing is created
// or removed (the multi-worker side runs in real processes:
// tests/fault_tolerance/multi_worker_checkpoint_test.cc).
TEST(DistributedFileUtilsTest, SingleWorkerStrategiesWriteAtTheGivenPath) {
  const strata::testing::TempDir temp("strata_dfu_test");
  const fs::path dir = temp.path();
  distribute::Strategy& default_strategy = distribute::get_strategy();
  distribute::MirroredStrategy mirrored;
  for (const distribute::Strategy* s :
       {&default_strategy, static_cast<distribute::Strategy*>(&mirrored)}) {
    EXPECT_FALSE(s->extended().in_multi_worker_mode());
    EXPECT_EQ(temp_dir_name(*s), "workertemp_0");
    EXPECT_EQ(write_dirpath(dir.string(), *s), dir.string());
    EXPECT_EQ(write_filepath((dir / "w.weights").string(), *s), (dir / "w.weights").string());
    remove_temp_dirpath(dir.string(), *s);
    remove_temp_dir_with_filepath((dir / "w.weights").string(), *s);
    EXPECT_TRUE(fs::exists(dir));
    EXPECT_TRUE(fs::is_empty(dir));
  }
}

}  // namespace
}  // namespace strata::keras::internal
