#include "strata/tpu/sharded/internal/halo.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>

namespace strata::tpu::sharded::internal {
namespace {

TEST(WindowGeometry, SameKeepsTheSizeAtStrideOneAndCentresTheWindow) {
  const std::optional<WindowGeometry> g = window_geometry(16, 3, 1, 1, "SAME");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->out, 16);
  EXPECT_EQ(g->pad_before, 1);
  EXPECT_EQ(g->window, 3);
}

TEST(WindowGeometry, SameRoundsTheOutputUpAndTheLeadingPaddingDownAsTensorFlow) {
  // TF: out = ceil(in / stride); total padding (out - 1) * stride + window - in.
  const WindowGeometry g = *window_geometry(7, 4, 2, 1, "SAME");
  EXPECT_EQ(g.out, 4);
  EXPECT_EQ(g.pad_before, 1);  // total 3
  const WindowGeometry even = *window_geometry(8, 2, 2, 1, "SAME");
  EXPECT_EQ(even.out, 4);
  EXPECT_EQ(even.pad_before, 0);  // total 0
}

TEST(WindowGeometry, DilationWidensTheEffectiveWindow) {
  const WindowGeometry g = *window_geometry(16, 3, 1, 2, "VALID");
  EXPECT_EQ(g.window, 5);
  EXPECT_EQ(g.out, 12);
  EXPECT_EQ(g.pad_before, 0);
}

TEST(WindowGeometry, ImpossibleOpsHaveNoGeometry) {
  EXPECT_FALSE(window_geometry(2, 3, 1, 1, "VALID").has_value());  // window past the input
  EXPECT_FALSE(window_geometry(8, 3, 0, 1, "SAME").has_value());
  EXPECT_FALSE(window_geometry(8, 0, 1, 1, "SAME").has_value());
  EXPECT_FALSE(window_geometry(8, 3, 1, 0, "SAME").has_value());
  EXPECT_FALSE(window_geometry(8, 3, 1, 1, "same").has_value());
}

TEST(InputWindow, TheSecondOfTwoTilesReadsOneHaloRowAndOnePaddingRow) {
  const WindowGeometry g = *window_geometry(16, 3, 1, 1, "SAME");
  const Interval w = input_window(g, 8, 16);
  EXPECT_EQ(w, (Interval{7, 17}));
  EXPECT_EQ(clamp(w, 16), (Interval{7, 16}));
  EXPECT_EQ(halo(w, {8, 16}, 16), (Halo{.before = 1, .after = 0}));
  const Interval first = input_window(g, 0, 8);
  EXPECT_EQ(first, (Interval{-1, 9}));
  EXPECT_EQ(halo(first, {0, 8}, 16), (Halo{.before = 0, .after = 1}));
}

TEST(InputWindow, StrideAndDilationSetTheWindowOfAnOutputTile) {
  // 16 rows, 3 taps dilated by 2 (window 5), stride 2, SAME: out 8, padding 1 + 2.
  const WindowGeometry g = *window_geometry(16, 3, 2, 2, "SAME");
  EXPECT_EQ(g.out, 8);
  EXPECT_EQ(g.pad_before, 1);
  // Output rows [4, 8) of the second of two tiles read input rows [7, 18).
  const Interval w = input_window(g, 4, 8);
  EXPECT_EQ(w, (Interval{7, 18}));
  EXPECT_EQ(halo(w, {8, 16}, 16), (Halo{.before = 1, .after = 0}));
}

TEST(InputWindow, AMiddleTileOfFourReceivesHaloFromBothNeighbours) {
  const WindowGeometry g = *window_geometry(16, 5, 1, 1, "SAME");
  const Interval w = input_window(g, 4, 8);
  EXPECT_EQ(w, (Interval{2, 10}));
  EXPECT_EQ(halo(w, {4, 8}, 16), (Halo{.before = 2, .after = 2}));
}

TEST(InputWindow, ConsecutiveOutputTilesTogetherReadEveryInputRowTheWholeOpReads) {
  for (int64_t in : {9, 12, 16, 20}) {
    for (int64_t k : {1, 2, 3, 5}) {
      for (int64_t stride : {1, 2, 3}) {
        for (const char* padding : {"SAME", "VALID"}) {
          const std::optional<WindowGeometry> g = window_geometry(in, k, stride, 1, padding);
          if (!g) continue;
          const Interval whole = input_window(*g, 0, g->out);
          for (int64_t split = 1; split <= g->out; ++split) {
            if (g->out % split != 0) continue;
            const int64_t per = g->out / split;
            int64_t lowest = whole.end, highest = whole.begin;
            for (int64_t t = 0; t < split; ++t) {
              const Interval w = input_window(*g, t * per, (t + 1) * per);
              EXPECT_EQ(w.size(), (per - 1) * stride + g->window);
              lowest = std::min(lowest, w.begin);
              highest = std::max(highest, w.end);
            }
            EXPECT_EQ((Interval{lowest, highest}), whole)
                << in << " " << k << " " << stride << " " << padding << " split " << split;
          }
        }
      }
    }
  }
}

TEST(Clamp, AWindowInThePaddingOnlyIsEmpty) {
  EXPECT_TRUE(clamp({-3, -1}, 8).empty());
  EXPECT_TRUE(clamp({9, 12}, 8).empty());
  EXPECT_EQ(clamp({-2, 10}, 8), (Interval{0, 8}));
}

}  // namespace
}  // namespace strata::tpu::sharded::internal
