#include "strata/collective/local_collectives.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <random>

#include "strata/core/device.h"
#include "strata/testing/run_ranks.h"

namespace strata::collective {
namespace {

using testing::caught;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::run_ranks;
using testing::run_ranks_ok;
using namespace std::chrono_literals;

TEST(LocalCollectives, AllReduceOfTwoRanksMatchesHandComputedValues) {
  LocalCollectives group(2);
  const std::vector<std::vector<float>> in = {{1, 2, 3}, {4, 5, 6}};
  std::vector<std::vector<float>> sum(2), mean(2), max(2), min(2);
  run_ranks_ok(2, [&](int r) {
    Tensor t = constant(in[r]);
    sum[r] = group.all_reduce(r, t, ReduceOp::SUM).to_vector<float>();
    mean[r] = group.all_reduce(r, t, ReduceOp::MEAN).to_vector<float>();
    max[r] = group.all_reduce(r, t, ReduceOp::MAX).to_vector<float>();
    min[r] = group.all_reduce(r, t, ReduceOp::MIN).to_vector<float>();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(sum[r], ElementsAre(5, 7, 9));
    EXPECT_THAT(mean[r], ElementsAre(2.5, 3.5, 4.5));
    EXPECT_THAT(max[r], ElementsAre(4, 5, 6));
    EXPECT_THAT(min[r], ElementsAre(1, 2, 3));
  }
}

TEST(LocalCollectives, IntegerMeanTruncatesTowardZeroAsTensorFlowsDiv) {
  LocalCollectives group(2);
  const std::vector<std::vector<int32_t>> in32 = {{-3, 4, 7}, {0, 1, -8}};
  const std::vector<std::vector<int64_t>> in64 = {{-3, 4, 7}, {0, 1, -8}};
  std::vector<std::vector<int32_t>> out32(2);
  std::vector<std::vector<int64_t>> out64(2);
  run_ranks_ok(2, [&](int r) {
    out32[r] = group.all_reduce(r, constant(in32[r]), ReduceOp::MEAN).to_vector<int32_t>();
    out64[r] = group.all_reduce(r, constant(in64[r]), ReduceOp::MEAN).to_vector<int64_t>();
  });
  // sums -3, 5, -1 -> -1.5, 2.5, -0.5 truncated.
  EXPECT_THAT(out32[1], ElementsAre(-1, 2, 0));
  EXPECT_THAT(out64[0], ElementsAre(-1, 2, 0));
}

TEST(LocalCollectives, IntegerSumWrapsAround) {
  LocalCollectives group(2);
  std::vector<int32_t> out;
  run_ranks_ok(2, [&](int r) {
    Tensor t = constant(std::vector<int32_t>{2147483647});
    Tensor s = group.all_reduce(r, t, ReduceOp::SUM);
    if (r == 0) out = s.to_vector<int32_t>();
  });
  EXPECT_THAT(out, ElementsAre(-2));
}

// Value of element i on rank r, negative and positive, distinct per rank.
double value(int r, int64_t i) { return static_cast<double>((i % 13) - 6) * (r + 1) + r * 0.5; }

template <typename T>
std::vector<T> rank_values(int r, int64_t n) {
  std::vector<T> v(n);
  for (int64_t i = 0; i < n; ++i) {
    v[i] = std::is_integral_v<T> ? static_cast<T>(std::lround(value(r, i) * 2))
                                 : static_cast<T>(value(r, i));
  }
  return v;
}

// Independent reference: a scalar loop in double / int64 arithmetic.
template <typename T>
std::vector<T> expected(int size, int64_t n, ReduceOp op) {
  std::vector<std::vector<T>> in;
  in.reserve(size);
  for (int r = 0; r < size; ++r) in.push_back(rank_values<T>(r, n));
  std::vector<T> out(n);
  for (int64_t i = 0; i < n; ++i) {
    T acc = in[0][i];
    for (int r = 1; r < size; ++r) {
      const T x = in[r][i];
      switch (op) {
        case ReduceOp::SUM:
        case ReduceOp::MEAN: acc = acc + x; break;
        case ReduceOp::MAX: acc = std::max(acc, x); break;
        case ReduceOp::MIN: acc = std::min(acc, x); break;
      }
    }
    if (op == ReduceOp::MEAN) acc = acc / static_cast<T>(size);
    out[i] = acc;
  }
  return out;
}

template <typename T>
void check_all_reduce(int size, int64_t n) {
  LocalCollectives group(size);
  for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MEAN, ReduceOp::MAX, ReduceOp::MIN}) {
    const std::vector<T> want = expected<T>(size, n, op);
    std::vector<std::vector<T>> got(size);
    run_ranks_ok(size, [&](int r) {
      got[r] = group.all_reduce(r, constant(rank_values<T>(r, n)), op).template to_vector<T>();
    });
    for (int r = 0; r < size; ++r) {
      ASSERT_EQ(got[r], want) << "size " << size << " n " << n << " op " << op << " dtype "
                              << dtype_name(dtype_of<T>()) << " rank " << r;
    }
  }
}

TEST(LocalCollectives, AllReduceEveryOpDtypeAndSizeOnOddCounts) {
  for (int size = 1; size <= 4; ++size) {
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{33}, int64_t{1001}, int64_t{4099}}) {
      check_all_reduce<float>(size, n);
      check_all_reduce<double>(size, n);
      check_all_reduce<int32_t>(size, n);
      check_all_reduce<int64_t>(size, n);
    }
  }
}

TEST(LocalCollectives, AllReduceOfAListKeepsShapesAndDtypesIncludingEmptyAndScalars) {
  const int size = 3;
  LocalCollectives group(size);
  std::vector<std::vector<Tensor>> out(size);
  std::vector<std::vector<Tensor>> in(size);
  for (int r = 0; r < size; ++r) {
    const float f = static_cast<float>(r + 1);
    in[r] = {constant(std::vector<float>{f, 2 * f, 3 * f, 4 * f, 5 * f, 6 * f}, {2, 3}),
             constant(std::vector<float>{}, {0, 4}), constant(10 * (static_cast<int64_t>(r) + 1)),
             constant(std::vector<double>{f, -f}), constant(7.f * f)};
  }
  run_ranks_ok(size, [&](int r) { out[r] = group.all_reduce(r, in[r], ReduceOp::SUM); });
  for (int r = 0; r < size; ++r) {
    ASSERT_EQ(out[r].size(), 5u);
    EXPECT_EQ(out[r][0].shape(), (TensorShape{2, 3}));
    EXPECT_THAT(out[r][0].to_vector<float>(), ElementsAre(6, 12, 18, 24, 30, 36));
    EXPECT_EQ(out[r][1].shape(), (TensorShape{0, 4}));
    EXPECT_EQ(out[r][1].dtype(), DType::float32);
    EXPECT_EQ(out[r][2].shape(), TensorShape{});
    EXPECT_EQ(out[r][2].item<int64_t>(), 60);
    EXPECT_THAT(out[r][3].to_vector<double>(), ElementsAre(6, -6));
    EXPECT_EQ(out[r][4].item<float>(), 42.f);
  }
  // An empty list is a valid (synchronising) call.
  run_ranks_ok(size, [&](int r) {
    EXPECT_TRUE(group.all_reduce(r, std::vector<Tensor>{}, ReduceOp::SUM).empty());
  });
}

TEST(LocalCollectives, ResultsAreFreshBuffersOnTheInputsDevice) {
  Device other(DeviceSpec::from_string("/job:localhost/replica:0/task:0/device:CPU:7"), 1);
  LocalCollectives group(2);
  std::vector<Tensor> in = {constant({1.f, 2.f}).on_device(other), constant({3.f, 4.f})};
  std::vector<Tensor> out(2);
  run_ranks_ok(2, [&](int r) { out[r] = group.all_reduce(r, in[r], ReduceOp::SUM); });
  EXPECT_EQ(out[0].device(), other.name());
  EXPECT_EQ(out[1].device(), in[1].device());
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(out[r].buffer(), in[0].buffer());
    EXPECT_NE(out[r].buffer(), in[1].buffer());
  }
  EXPECT_THAT(in[0].to_vector<float>(), ElementsAre(1, 2));  // inputs untouched
  EXPECT_THAT(out[1].to_vector<float>(), ElementsAre(4, 6));
}

TEST(LocalCollectives, AllGatherConcatenatesUnequalFirstDimensionsInRankOrder) {
  const int size = 4;
  LocalCollectives group(size);
  std::vector<Tensor> out(size);
  run_ranks_ok(size, [&](int r) {
    // rank r has r rows of [r, r] (rank 0 has none).
    std::vector<int32_t> v(2 * r, r);
    out[r] = group.all_gather(r, constant(v, {r, 2}));
  });
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(out[r].shape(), (TensorShape{6, 2}));
    EXPECT_THAT(out[r].to_vector<int32_t>(), ElementsAre(1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3));
  }
}

TEST(LocalCollectives, AllGatherOfScalarsOrDifferentInnerDimsIsInvalidOnEveryRank) {
  LocalCollectives group(2);
  auto errors = run_ranks(2, [&](int r) { group.all_gather(r, constant(1.f)); });
  for (auto& e : errors) EXPECT_EQ(caught(e).code, ErrorCode::INVALID_ARGUMENT);
  errors = run_ranks(2, [&](int r) {
    group.all_gather(r, constant(std::vector<float>(2 + r, 0.f), {1, 2 + r}));
  });
  for (auto& e : errors) {
    EXPECT_EQ(caught(e).code, ErrorCode::INVALID_ARGUMENT);
    EXPECT_THAT(caught(e).message, HasSubstr("float32[1, 2]"));
    EXPECT_THAT(caught(e).message, HasSubstr("float32[1, 3]"));
  }
}

TEST(LocalCollectives, ReduceScatterGivesEachRankItsBlockOfTheReduction) {
  const int size = 3;
  LocalCollectives group(size);
  std::vector<Tensor> out(size);
  run_ranks_ok(size, [&](int r) {
    std::vector<float> v(6 * 2);
    for (int i = 0; i < 12; ++i) v[i] = static_cast<float>(i * (r + 1));
    out[r] = group.reduce_scatter(r, constant(v, {6, 2}), ReduceOp::SUM);
  });
  // sum over ranks = i * (1 + 2 + 3) = 6i; rank r gets rows 2r, 2r+1.
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(out[r].shape(), (TensorShape{2, 2}));
    std::vector<float> want;
    for (int i = 4 * r; i < 4 * r + 4; ++i) want.push_back(6.f * i);
    EXPECT_THAT(out[r].to_vector<float>(), ElementsAreArray(want));
  }
  auto errors = run_ranks(size, [&](int r) {
    group.reduce_scatter(r, constant(std::vector<float>(4, 1.f)), ReduceOp::SUM);
  });
  for (auto& e : errors) {
    EXPECT_EQ(caught(e).code, ErrorCode::INVALID_ARGUMENT);
    EXPECT_THAT(caught(e).message, HasSubstr("divisible by the group size 3"));
  }
}

TEST(LocalCollectives, BroadcastFromEveryRoot) {
  const int size = 4;
  LocalCollectives group(size);
  for (int root = 0; root < size; ++root) {
    std::vector<std::vector<double>> out(size);
    run_ranks_ok(size, [&](int r) {
      std::vector<double> v(37, static_cast<double>(r));
      v[0] = 100 + r;
      out[r] = group.broadcast(r, constant(v), root).to_vector<double>();
    });
    for (int r = 0; r < size; ++r) {
      ASSERT_EQ(out[r].size(), 37u);
      EXPECT_EQ(out[r][0], 100 + root);
      EXPECT_EQ(out[r][36], root);
    }
  }
  auto errors = run_ranks(size, [&](int r) { group.broadcast(r, constant(1.f), size); });
  for (auto& e : errors) EXPECT_EQ(caught(e).code, ErrorCode::INVALID_ARGUMENT);
}

TEST(LocalCollectives, BarrierReturnsOnlyOnceEveryRankArrived) {
  const int size = 4;
  LocalCollectives group(size);
  std::atomic<int> before{0};
  std::atomic<int> bad{0};
  run_ranks_ok(size, [&](int r) {
    for (int i = 0; i < 50; ++i) {
      before.fetch_add(1);
      group.barrier(r);
      if (before.load() < size * (i + 1)) bad.fetch_add(1);
      group.barrier(r);
    }
  });
  EXPECT_EQ(bad.load(), 0);
}

TEST(LocalCollectives, MismatchedCallsFailOnEveryRankDescribingBothSides) {
  LocalCollectives group(3);
  auto errors = run_ranks(3, [&](int r) {
    if (r == 2) {
      group.barrier(r);
    } else {
      group.all_reduce(r, constant({1.f, 2.f}), ReduceOp::SUM);
    }
  });
  for (auto& e : errors) {
    const auto c = caught(e);
    EXPECT_EQ(c.code, ErrorCode::INVALID_ARGUMENT);
    EXPECT_THAT(c.message, HasSubstr("rank 0 called all_reduce(SUM, [float32[2]])"));
    EXPECT_THAT(c.message, HasSubstr("rank 2 called barrier()"));
  }
  errors = run_ranks(3, [&](int r) {
    group.all_reduce(r, constant({1.f, 2.f}), r == 1 ? ReduceOp::MAX : ReduceOp::SUM);
  });
  for (auto& e : errors) EXPECT_THAT(caught(e).message, HasSubstr("rank 1 called all_reduce(MAX"));
  errors = run_ranks(3, [&](int r) {
    if (r == 1) {
      group.all_reduce(r, constant(std::vector<int32_t>{1, 2}), ReduceOp::SUM);
    } else {
      group.all_reduce(r, constant({1.f, 2.f}), ReduceOp::SUM);
    }
  });
  for (auto& e : errors) EXPECT_THAT(caught(e).message, HasSubstr("int32[2]"));
  errors = run_ranks(3, [&](int r) { group.broadcast(r, constant(1.f), r == 0 ? 1 : 0); });
  for (auto& e : errors) EXPECT_THAT(caught(e).message, HasSubstr("broadcast(root 1"));
  // Mismatches are refused before data moves: the group stays usable.
  std::vector<float> out;
  run_ranks_ok(3, [&](int r) {
    Tensor s = group.all_reduce(r, constant(1.f), ReduceOp::SUM);
    if (r == 0) out = s.to_vector<float>();
  });
  EXPECT_THAT(out, ElementsAre(3.f));
}

TEST(LocalCollectives, UnsupportedDtypesAndUndefinedTensorsAreInvalidOnEveryRank) {
  LocalCollectives group(2);
  auto errors = run_ranks(2, [&](int r) { group.all_reduce(r, constant(true), ReduceOp::SUM); });
  for (auto& e : errors) {
    EXPECT_EQ(caught(e).code, ErrorCode::INVALID_ARGUMENT);
    EXPECT_THAT(caught(e).message, HasSubstr("got bool"));
  }
  errors = run_ranks(2, [&](int r) { group.broadcast(r, constant("text"), 0); });
  for (auto& e : errors) EXPECT_THAT(caught(e).message, HasSubstr("numeric"));
  errors = run_ranks(2, [&](int r) { group.all_reduce(r, Tensor(), ReduceOp::SUM); });
  for (auto& e : errors) EXPECT_THAT(caught(e).message, HasSubstr("empty handle"));
  // uint8 / bool gather and broadcast are plain copies.
  std::vector<uint8_t> out;
  run_ranks_ok(2, [&](int r) {
    Tensor g = group.all_gather(r, constant(std::vector<uint8_t>{static_cast<uint8_t>(r)}));
    if (r == 1) out = g.to_vector<uint8_t>();
  });
  EXPECT_THAT(out, ElementsAre(0, 1));
}

TEST(LocalCollectives, InvalidRankIsInvalidArgument) {
  LocalCollectives group(2);
  EXPECT_THROW(group.barrier(2), InvalidArgumentError);
  EXPECT_THROW(group.all_reduce(-1, constant(1.f), ReduceOp::SUM), InvalidArgumentError);
  EXPECT_THROW(LocalCollectives(0), InvalidArgumentError);
  EXPECT_THROW(LocalCollectives(2, {.timeout = 0ms}), InvalidArgumentError);
}

TEST(LocalCollectives, TimeoutNamesTheRanksThatNeverArrivedAndBreaksTheGroupUntilReset) {
  LocalCollectives group(3, {.timeout = 200ms});
  const auto start = std::chrono::steady_clock::now();
  auto errors = run_ranks(2, [&](int r) { group.all_reduce(r, constant(1.f), ReduceOp::SUM); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  for (auto& e : errors) {
    const auto c = caught(e);
    EXPECT_EQ(c.code, ErrorCode::DEADLINE_EXCEEDED);
    EXPECT_THAT(c.message, HasSubstr("all_reduce #1"));
    EXPECT_THAT(c.message, HasSubstr("for ranks [2] that never arrived"));
  }
  // The late rank learns about it too.
  EXPECT_THROW(group.barrier(2), DeadlineExceededError);
  group.reset();
  run_ranks_ok(3, [&](int r) { group.barrier(r); });
}

TEST(LocalCollectives, AbortWakesEveryWaiterAndFailsLaterCallsUntilReset) {
  LocalCollectives group(3);  // default 10-minute timeout: only abort can wake them
  std::atomic<int> waiting{0};
  std::jthread aborter([&] {
    while (waiting.load() < 2) std::this_thread::yield();
    std::this_thread::sleep_for(20ms);  // let them block (not needed for correctness)
    group.abort("replica 2 failed: boom");
  });
  const auto start = std::chrono::steady_clock::now();
  auto errors = run_ranks(2, [&](int r) {
    waiting.fetch_add(1);
    group.all_reduce(r, constant(1.f), ReduceOp::SUM);
  });
  aborter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  for (auto& e : errors) {
    EXPECT_EQ(caught(e).code, ErrorCode::ABORTED);
    EXPECT_EQ(caught(e).message, "replica 2 failed: boom");
  }
  EXPECT_THROW(group.barrier(0), AbortedError);
  group.abort("second reason is ignored");
  try {
    group.barrier(1);
    FAIL();
  } catch (const AbortedError& e) {
    EXPECT_STREQ(e.what(), "replica 2 failed: boom");
  }
  group.reset();
  std::vector<float> out;
  run_ranks_ok(3, [&](int r) {
    Tensor s = group.all_reduce(r, constant(2.f), ReduceOp::SUM);
    if (r == 2) out = s.to_vector<float>();
  });
  EXPECT_THAT(out, ElementsAre(6.f));
}

TEST(LocalCollectives, AbortDuringTheSecondPhaseIsSafe) {
  // Aborts at random points of many large calls; every rank must return.
  LocalCollectives group(4);
  for (int trial = 0; trial < 10; ++trial) {
    std::jthread aborter([&, trial] {
      std::this_thread::sleep_for(std::chrono::microseconds(100 * trial));
      group.abort("stop");
    });
    run_ranks(4, [&](int r) {
      Tensor t = constant(std::vector<float>(1 << 16, 1.f));
      for (int i = 0; i < 100; ++i) group.all_reduce(r, t, ReduceOp::SUM);
    });
    aborter.join();
    group.reset();
  }
  std::vector<float> out;
  run_ranks_ok(4, [&](int r) {
    Tensor s = group.all_reduce(r, constant(1.f), ReduceOp::SUM);
    if (r == 0) out = s.to_vector<float>();
  });
  EXPECT_THAT(out, ElementsAre(4.f));
}

TEST(LocalCollectives, ResetWhileARankIsInsideACallIsRefused) {
  LocalCollectives group(2);
  std::atomic<bool> entered{false};
  std::jthread waiter([&] {
    entered = true;
    EXPECT_THROW(group.barrier(0), AbortedError);
  });
  while (!entered) std::this_thread::yield();
  // Rank 0 may not have reached the barrier yet; retry until reset is refused.
  bool refused = false;
  for (int i = 0; i < 10000 && !refused; ++i) {
    try {
      group.reset();
      std::this_thread::sleep_for(1ms);
    } catch (const FailedPreconditionError& e) {
      EXPECT_THAT(e.what(), HasSubstr("no rank inside a call"));
      refused = true;
    }
  }
  EXPECT_TRUE(refused);
  group.abort("done");
  waiter.join();
  group.reset();
}

TEST(LocalCollectives, OneThousandBackToBackCallsStayInStep) {
  const int size = 3;
  LocalCollectives group(size);
  std::atomic<int> wrong{0};
  run_ranks_ok(size, [&](int r) {
    for (int i = 0; i < 1000; ++i) {
      switch (i % 4) {
        case 0: {
          Tensor s = group.all_reduce(r, constant(static_cast<int64_t>(i) + r), ReduceOp::SUM);
          if (s.item<int64_t>() != 3 * i + 3) wrong.fetch_add(1);
          break;
        }
        case 1: {
          Tensor b = group.broadcast(r, constant(static_cast<int32_t>(i * 10 + r)), i % size);
          if (b.item<int32_t>() != i * 10 + i % size) wrong.fetch_add(1);
          break;
        }
        case 2: {
          Tensor g = group.all_gather(r, constant(std::vector<int32_t>{i, r}));
          const auto v = g.to_vector<int32_t>();
          if (v != std::vector<int32_t>{i, 0, i, 1, i, 2}) wrong.fetch_add(1);
          break;
        }
        default: group.barrier(r);
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST(LocalCollectives, ConcurrentRandomSizedCallsAgreeWithTheReference) {
  const int size = 4;
  LocalCollectives group(size);
  std::atomic<int> wrong{0};
  run_ranks_ok(size, [&](int r) {
    std::mt19937 rng(42);  // same sequence of sizes on every rank
    for (int it = 0; it < 200; ++it) {
      const int64_t n = std::uniform_int_distribution<int64_t>(0, 3000)(rng);
      std::vector<float> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i % 7) * (r + 1));
      std::vector<Tensor> out =
          group.all_reduce(r, {constant(v), constant(static_cast<int32_t>(r))}, ReduceOp::SUM);
      const float* p = out[0].data<float>();
      for (int64_t i = 0; i < n; ++i) {
        if (p[i] != static_cast<float>((i % 7) * 10)) {
          wrong.fetch_add(1);
          break;
        }
      }
      if (out[1].item<int32_t>() != 6) wrong.fetch_add(1);
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST(LocalCollectives, ResultsStayValidWhileLaterCallsReuseBuffers) {
  LocalCollectives group(2);
  std::vector<Tensor> kept(2);
  run_ranks_ok(2, [&](int r) {
    kept[r] = group.all_reduce(r, constant({1.f, 1.f}), ReduceOp::SUM);
    for (int i = 0; i < 10; ++i) group.all_reduce(r, constant({5.f, 5.f}), ReduceOp::SUM);
  });
  EXPECT_THAT(kept[0].to_vector<float>(), ElementsAre(2, 2));
  EXPECT_THAT(kept[1].to_vector<float>(), ElementsAre(2, 2));
}

}  // namespace
}  // namespace strata::collective
