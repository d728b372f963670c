#include "strata/collective/internal/reduce.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace strata::collective::internal {
namespace {

using ::testing::ElementsAre;

TEST(ReducePair, HandlesEveryAliasingOfOutputAndInputs) {
  std::vector<float> a = {1, 5, -3, 8, 2};
  const std::vector<float> b = {4, 2, 0, -9, 2};
  std::vector<float> out(5);
  reduce_pair(DType::float32, ReduceOp::SUM, out.data(), a.data(), b.data(), 5);
  EXPECT_THAT(out, ElementsAre(5, 7, -3, -1, 4));
  reduce_pair(DType::float32, ReduceOp::MAX, a.data(), a.data(), b.data(), 5);  // out == a
  EXPECT_THAT(a, ElementsAre(4, 5, 0, 8, 2));
  std::vector<float> c = {1, 1, 1, 1, 1};
  reduce_pair(DType::float32, ReduceOp::MIN, c.data(), b.data(), c.data(), 5);  // out == b
  EXPECT_THAT(c, ElementsAre(1, 1, 0, -9, 1));
  // Partial overlap: out starts one element after a (element-by-element semantics).
  std::vector<int32_t> d = {1, 2, 3, 4, 5, 6};
  const std::vector<int32_t> e = {10, 10, 10, 10, 10};
  reduce_pair(DType::int32, ReduceOp::SUM, d.data() + 1, d.data(), e.data(), 5);
  EXPECT_THAT(d, ElementsAre(1, 11, 21, 31, 41, 51));
}

TEST(ReduceN, MeanDividesOnceAfterSummingAllInputs) {
  const std::vector<int64_t> x = {7, -7, 1}, y = {0, 0, 0}, z = {0, 0, 0};
  const void* ins[] = {x.data(), y.data(), z.data()};
  std::vector<int64_t> out(3);
  reduce_n(DType::int64, ReduceOp::MEAN, out.data(), ins, 3, 3);
  EXPECT_THAT(out, ElementsAre(2, -2, 0));  // truncation toward zero
  std::vector<double> half = {1.0};
  divide_in_place(DType::float64, half.data(), 1, 4);
  EXPECT_EQ(half[0], 0.25);
}

}  // namespace
}  // namespace strata::collective::internal
