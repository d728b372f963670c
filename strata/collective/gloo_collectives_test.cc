#include "strata/collective/gloo_collectives.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "strata/testing/run_ranks.h"

namespace strata::collective {
namespace {

using testing::caught;
using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using testing::run_ranks;
using testing::run_ranks_ok;
using ::testing::StartsWith;
using namespace std::chrono_literals;

// n ranks on threads of this process, each with its own GlooCollectives over
// loopback TCP, rendezvousing through one in-memory store.
std::vector<std::unique_ptr<GlooCollectives>> make_groups(int n, GlooOptions options = {}) {
  auto store = std::make_shared<InMemoryStore>();
  std::vector<std::unique_ptr<GlooCollectives>> groups(n);
  run_ranks_ok(n,
               [&](int r) { groups[r] = std::make_unique<GlooCollectives>(r, n, store, options); });
  return groups;
}

GlooOptions quick(std::chrono::milliseconds timeout = 20s) {
  return GlooOptions{.timeout = timeout};
}

// A rank that returns from its last call and destroys its group at once
// closes its connections while the peer may still be taking that call's last
// message: the peer must finish the call, not report a lost connection. (Gloo
// signals the closed connection to the peer's receive buffers, which can land
// between the message's arrival and the peer's wait; the connections used to
// be reset, which could also drop the message. Each round races it anew.)
TEST(GlooCollectives, ARankThatLeavesRightAfterItsLastCallDoesNotFailThePeer) {
  for (int round = 0; round < 60; ++round) {
    auto groups = make_groups(2, quick());
    std::vector<float> got(2);
    run_ranks_ok(2, [&](int r) {
      const Tensor sum =
          groups[r]->all_reduce(r, constant(static_cast<float>(r + 1)), ReduceOp::SUM);
      got[r] = sum.item<float>();
      if (r == 1) groups[r].reset();
    });
    ASSERT_EQ(got, (std::vector<float>{3, 3})) << "round " << round;
  }
}

TEST(GlooCollectives, AllReduceEveryOpOverTwoAndThreeRanks) {
  for (int n : {1, 2, 3}) {
    auto groups = make_groups(n, quick());
    for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MEAN, ReduceOp::MAX, ReduceOp::MIN}) {
      std::vector<std::vector<Tensor>> out(n);
      run_ranks_ok(n, [&](int r) {
        const float f = static_cast<float>(r + 1);
        out[r] = groups[r]->all_reduce(
            r,
            {constant({f, -2 * f, 3 * f}), constant(std::vector<int32_t>{-3 + 3 * r, 4 + r}),
             constant(static_cast<int64_t>(10 * r - 7)), constant(std::vector<double>{}, {0, 2}),
             constant(std::vector<double>{0.5 * f})},
            op);
      });
      // Reference by hand over r = 0..n-1.
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(out[r].size(), 5u);
        const auto f = out[r][0].to_vector<float>();
        const auto i32 = out[r][1].to_vector<int32_t>();
        const int64_t i64 = out[r][2].item<int64_t>();
        EXPECT_EQ(out[r][3].shape(), (TensorShape{0, 2}));
        const double d = out[r][4].to_vector<double>()[0];
        float fs = 0, fmax = -1e9f, fmin = 1e9f;
        int32_t is = 0;
        int64_t ls = 0;
        double ds = 0;
        for (int k = 0; k < n; ++k) {
          fs += static_cast<float>(k + 1);
          fmax = std::max(fmax, static_cast<float>(k + 1));
          fmin = std::min(fmin, static_cast<float>(k + 1));
          is += -3 + 3 * k;
          ls += 10 * k - 7;
          ds += 0.5 * (k + 1);
        }
        switch (op) {
          case ReduceOp::SUM:
            EXPECT_THAT(f, ElementsAre(fs, -2 * fs, 3 * fs));
            EXPECT_EQ(i32[0], is);
            EXPECT_EQ(i64, ls);
            EXPECT_EQ(d, ds);
            break;
          case ReduceOp::MEAN:
            EXPECT_EQ(f[0], fs / n);
            EXPECT_EQ(i32[0], is / n);  // C++ division truncates, as TF's Div
            EXPECT_EQ(i64, ls / n);
            EXPECT_EQ(d, ds / n);
            break;
          case ReduceOp::MAX: EXPECT_THAT(f, ElementsAre(fmax, -2 * fmin, 3 * fmax)); break;
          case ReduceOp::MIN: EXPECT_THAT(f, ElementsAre(fmin, -2 * fmax, 3 * fmin)); break;
        }
      }
    }
  }
}

TEST(GlooCollectives, IntegerMeanTruncatesTowardZero) {
  auto groups = make_groups(2, quick());
  std::vector<std::vector<int64_t>> out(2);
  run_ranks_ok(2, [&](int r) {
    const std::vector<int64_t> in =
        r == 0 ? std::vector<int64_t>{-3, 4, 7} : std::vector<int64_t>{0, 1, -8};
    out[r] = groups[r]->all_reduce(r, constant(in), ReduceOp::MEAN).to_vector<int64_t>();
  });
  EXPECT_THAT(out[0], ElementsAre(-1, 2, 0));
  EXPECT_THAT(out[1], ElementsAre(-1, 2, 0));
}

// Too large to travel with the headers (over 4 MiB at 2 ranks, 2 MiB at 3): the
// direct exchange, with blocks of unequal length (the first rank's block is one
// element longer) and segment counts that do not divide them.
TEST(GlooCollectives, LargeOddSizedAllReduceMatchesTheReference) {
  for (const int ranks : {2, 3}) {
    SCOPED_TRACE(str_cat(ranks, " ranks"));
    auto groups = make_groups(ranks, quick());
    const int64_t n = ranks == 2 ? 1048577 : 600001;
    std::vector<Tensor> out(ranks), mean(ranks), max(ranks);
    std::vector<Tensor> in(ranks);
    for (int r = 0; r < ranks; ++r) {
      std::vector<float> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i % 11) * (r + 1));
      in[r] = constant(v);
    }
    run_ranks_ok(ranks, [&](int r) {
      out[r] = groups[r]->all_reduce(r, in[r], ReduceOp::SUM);
      mean[r] = groups[r]->all_reduce(r, in[r], ReduceOp::MEAN);
      max[r] = groups[r]->all_reduce(r, in[r], ReduceOp::MAX);
    });
    const float sum = ranks * (ranks + 1) / 2.f;  // of (r + 1) over the ranks
    for (int r = 0; r < ranks; ++r) {
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) {
        const auto base = static_cast<float>(i % 11);
        wrong += out[r].data<float>()[i] != base * sum;
        wrong += mean[r].data<float>()[i] != base * sum / ranks;
        wrong += max[r].data<float>()[i] != base * ranks;
      }
      EXPECT_EQ(wrong, 0);
      EXPECT_NE(out[r].buffer(), in[r].buffer());
      EXPECT_EQ(in[r].data<float>()[1], static_cast<float>(r + 1));  // inputs untouched
    }
  }
}

TEST(GlooCollectives, CallsOnBothSidesOfThePayloadLimitAgree) {
  // A 3-rank group sends up to 2 MiB of a call's data with its header (the
  // first size, 8 bytes under); above that (the second size, 4 bytes over) the
  // data moves with Gloo's algorithms after the headers. Same results.
  auto groups = make_groups(3, quick());
  for (const int64_t m : {int64_t{174762}, int64_t{174763}}) {
    const int64_t n = 3 * m;
    std::vector<Tensor> sum(3), scattered(3), bcast(3), gathered(3);
    std::vector<std::vector<Tensor>> maxes(3);
    run_ranks_ok(3, [&](int r) {
      std::vector<float> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 7 + r);
      const Tensor x = constant(v, {3, m});
      sum[r] = groups[r]->all_reduce(r, x, ReduceOp::SUM);
      maxes[r] =
          groups[r]->all_reduce(r, {x, constant(std::vector<int64_t>{r, 10 * r})}, ReduceOp::MAX);
      scattered[r] = groups[r]->reduce_scatter(r, x, ReduceOp::SUM);
      bcast[r] = groups[r]->broadcast(r, x, 1);
      gathered[r] = groups[r]->all_gather(r, x);
    });
    for (int r = 0; r < 3; ++r) {
      SCOPED_TRACE(str_cat("m ", m, ", rank ", r));
      ASSERT_EQ(scattered[r].shape(), (TensorShape{1, m}));
      ASSERT_EQ(gathered[r].shape(), (TensorShape{9, m}));
      EXPECT_THAT(maxes[r][1].to_vector<int64_t>(), ElementsAre(2, 20));
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) {
        const auto base = static_cast<float>(i % 7);
        wrong += sum[r].data<float>()[i] != 3 * base + 3;
        wrong += maxes[r][0].data<float>()[i] != base + 2;
        wrong += bcast[r].data<float>()[i] != base + 1;
        for (int k = 0; k < 3; ++k) wrong += gathered[r].data<float>()[k * n + i] != base + k;
      }
      for (int64_t i = 0; i < m; ++i) {
        wrong += scattered[r].data<float>()[i] != 3 * static_cast<float>((r * m + i) % 7) + 3;
      }
      EXPECT_EQ(wrong, 0);
    }
  }
}

TEST(GlooCollectives, AllGatherWithUnequalFirstDimensions) {
  auto groups = make_groups(3, quick());
  std::vector<Tensor> out(3);
  run_ranks_ok(3, [&](int r) {
    std::vector<int32_t> v(2 * r, r);  // rank 0 contributes no rows
    out[r] = groups[r]->all_gather(r, constant(v, {r, 2}));
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(out[r].shape(), (TensorShape{3, 2}));
    EXPECT_THAT(out[r].to_vector<int32_t>(), ElementsAre(1, 1, 2, 2, 2, 2));
  }
}

TEST(GlooCollectives, ReduceScatterAndBroadcastFromEachRoot) {
  auto groups = make_groups(2, quick());
  std::vector<Tensor> out(2);
  run_ranks_ok(2, [&](int r) {
    out[r] = groups[r]->reduce_scatter(r, constant({1.f * (r + 1), 2.f, 3.f, 4.f * (r + 1)}, {4}),
                                       ReduceOp::SUM);
  });
  EXPECT_THAT(out[0].to_vector<float>(), ElementsAre(3, 4));
  EXPECT_THAT(out[1].to_vector<float>(), ElementsAre(6, 12));
  auto errors = run_ranks(2, [&](int r) {
    groups[r]->reduce_scatter(r, constant({1.f, 2.f, 3.f}), ReduceOp::SUM);
  });
  for (auto& e : errors) EXPECT_THAT(caught(e).message, HasSubstr("divisible by the group size 2"));
  for (int root = 0; root < 2; ++root) {
    run_ranks_ok(2, [&](int r) {
      out[r] = groups[r]->broadcast(r, constant(std::vector<double>{10.0 + r, 20.0 + r}), root);
    });
    for (int r = 0; r < 2; ++r)
      EXPECT_THAT(out[r].to_vector<double>(), ElementsAre(10 + root, 20 + root));
  }
}

// tf.distribute's cross-replica reduce-scatter (the building block of
// CollectiveAllReduce's "reduce_scatter + all_gather" strategy): the sum over
// ranks, of which rank r keeps rows [r * d0 / n, (r + 1) * d0 / n). Values by hand.
TEST(GlooCollectives, ReduceScatterKeepsEachRanksBlockOfTheReduction) {
  {
    // 2 ranks, shape [4, 3]: rank 0 keeps rows 0-1, rank 1 rows 2-3.
    auto groups = make_groups(2, quick());
    std::vector<Tensor> sum(2), mean(2), max(2);
    run_ranks_ok(2, [&](int r) {
      // rank 0: 0 1 2 ... 11; rank 1: 10 times that.
      std::vector<float> v(12);
      for (int i = 0; i < 12; ++i) v[i] = static_cast<float>(i * (r == 0 ? 1 : 10));
      const Tensor x = constant(v, {4, 3});
      sum[r] = groups[r]->reduce_scatter(r, x, ReduceOp::SUM);
      mean[r] = groups[r]->reduce_scatter(r, x, ReduceOp::MEAN);
      max[r] = groups[r]->reduce_scatter(
          r, constant(std::vector<int32_t>{r == 0 ? 5 : -1, r == 0 ? -7 : 2, 3 * r, 9 - r}, {4}),
          ReduceOp::MAX);
    });
    EXPECT_EQ(sum[0].shape(), (TensorShape{2, 3}));
    EXPECT_THAT(sum[0].to_vector<float>(), ElementsAre(0, 11, 22, 33, 44, 55));
    EXPECT_THAT(sum[1].to_vector<float>(), ElementsAre(66, 77, 88, 99, 110, 121));
    EXPECT_THAT(mean[0].to_vector<float>(), ElementsAre(0, 5.5, 11, 16.5, 22, 27.5));
    EXPECT_THAT(mean[1].to_vector<float>(), ElementsAre(33, 38.5, 44, 49.5, 55, 60.5));
    EXPECT_THAT(max[0].to_vector<int32_t>(), ElementsAre(5, 2));
    EXPECT_THAT(max[1].to_vector<int32_t>(), ElementsAre(3, 9));
  }
  {
    // 3 ranks, shape [3, 2] (one row each) and int64 [6] with MIN and MEAN
    // (integer MEAN truncates toward zero).
    auto groups = make_groups(3, quick());
    std::vector<Tensor> sum(3), min(3), mean(3);
    run_ranks_ok(3, [&](int r) {
      // rank r: (r + 1) * [1 2 3 4 5 6]
      std::vector<double> v(6);
      for (int i = 0; i < 6; ++i) v[i] = (r + 1) * (i + 1);
      sum[r] = groups[r]->reduce_scatter(r, constant(v, {3, 2}), ReduceOp::SUM);
      const std::vector<int64_t> w = {r - 1, 4 * r, -r, 7, 2 - r, 10 * r};
      min[r] = groups[r]->reduce_scatter(r, constant(w), ReduceOp::MIN);
      mean[r] = groups[r]->reduce_scatter(r, constant(w), ReduceOp::MEAN);
    });
    // Sums: 6 * [1 .. 6]; rank r keeps row r.
    EXPECT_THAT(sum[0].to_vector<double>(), ElementsAre(6, 12));
    EXPECT_THAT(sum[1].to_vector<double>(), ElementsAre(18, 24));
    EXPECT_THAT(sum[2].to_vector<double>(), ElementsAre(30, 36));
    EXPECT_EQ(sum[2].shape(), (TensorShape{1, 2}));
    // Columns over r = 0, 1, 2: {-1,0,1}, {0,4,8}, {0,-1,-2}, {7,7,7}, {2,1,0}, {0,10,20}.
    EXPECT_THAT(min[0].to_vector<int64_t>(), ElementsAre(-1, 0));
    EXPECT_THAT(min[1].to_vector<int64_t>(), ElementsAre(-2, 7));
    EXPECT_THAT(min[2].to_vector<int64_t>(), ElementsAre(0, 0));
    // Sums 0, 12, -3, 21, 3, 30 divided by 3.
    EXPECT_THAT(mean[0].to_vector<int64_t>(), ElementsAre(0, 4));
    EXPECT_THAT(mean[1].to_vector<int64_t>(), ElementsAre(-1, 7));
    EXPECT_THAT(mean[2].to_vector<int64_t>(), ElementsAre(1, 10));
  }
}

// Blocks too large to travel with the headers (here 1.5 MiB per rank at 3
// ranks, 4 MiB + 12 bytes at 2) move by direct exchange in segments after the
// headers; the segment counts do not divide the blocks evenly.
TEST(GlooCollectives, LargeReduceScatterMatchesTheReference) {
  for (const int n : {2, 3}) {
    SCOPED_TRACE(str_cat(n, " ranks"));
    auto groups = make_groups(n, quick());
    const int64_t row = 7;
    const int64_t rows = n == 2 ? (int64_t{4} << 20) / 4 / row + 1 : 393217;  // per rank
    const int64_t total = rows * n * row;
    std::vector<Tensor> out(n), mean(n);
    run_ranks_ok(n, [&](int r) {
      std::vector<float> v(total);
      for (int64_t i = 0; i < total; ++i) v[i] = static_cast<float>((i % 13) * (r + 1));
      const Tensor x = constant(v, {rows * n, row});
      out[r] = groups[r]->reduce_scatter(r, x, ReduceOp::SUM);
      mean[r] = groups[r]->reduce_scatter(r, x, ReduceOp::MEAN);
    });
    const float ranks_sum = n * (n + 1) / 2.f;
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(out[r].shape(), (TensorShape{rows, row}));
      int64_t wrong = 0;
      for (int64_t i = 0; i < rows * row; ++i) {
        const auto base = static_cast<float>((r * rows * row + i) % 13);
        wrong += out[r].data<float>()[i] != base * ranks_sum;
        wrong += mean[r].data<float>()[i] != base * ranks_sum / n;
      }
      EXPECT_EQ(wrong, 0) << "rank " << r;
    }
  }
}

// Calls alternate between payloads carried in the header message (up to 64
// KiB), payloads that follow it as a second message, and Gloo-sized calls,
// with a mismatch between an inline and a separate payload in the middle: the
// receives each call leaves posted for the next stay in step.
TEST(GlooCollectives, PayloadsOnEitherSideOfTheInlineLimitStayInStep) {
  auto groups = make_groups(2, quick());
  const std::vector<int64_t> sizes = {16384, 16385, 1, 300000, 16383, 2000000, 16385, 16384};
  std::atomic<int> wrong{0};
  run_ranks_ok(2, [&](int r) {
    for (int round = 0; round < 3; ++round) {
      for (const int64_t m : sizes) {
        std::vector<float> v(2 * m);
        for (int64_t i = 0; i < 2 * m; ++i) v[i] = static_cast<float>(i % 5 + r);
        const Tensor x = constant(v);
        const Tensor sum = groups[r]->all_reduce(r, x, ReduceOp::SUM);
        const Tensor block = groups[r]->reduce_scatter(r, x, ReduceOp::SUM);
        const Tensor root = groups[r]->broadcast(r, x, 1 - round % 2);
        for (int64_t i = 0; i < 2 * m; ++i) {
          wrong += sum.data<float>()[i] != static_cast<float>(2 * (i % 5) + 1);
          wrong += root.data<float>()[i] != static_cast<float>(i % 5 + 1 - round % 2);
        }
        for (int64_t i = 0; i < m; ++i) {
          wrong += block.data<float>()[i] != static_cast<float>(2 * ((r * m + i) % 5) + 1);
        }
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0);
  auto errors = run_ranks(2, [&](int r) {
    groups[r]->all_reduce(r, constant(std::vector<float>(r == 0 ? 10 : 20000, 1.f)), ReduceOp::SUM);
  });
  for (auto& e : errors) {
    EXPECT_EQ(caught(e).code, ErrorCode::FAILED_PRECONDITION) << caught(e).message;
    EXPECT_THAT(caught(e).message, HasSubstr("float32[20000]"));
  }
  std::vector<float> out(2);
  run_ranks_ok(2, [&](int r) {
    for (const int64_t m : {int64_t{20000}, int64_t{1}, int64_t{20000}}) {
      out[r] = groups[r]
                   ->all_reduce(r, constant(std::vector<float>(m, 1.f + r)), ReduceOp::SUM)
                   .data<float>()[0];
    }
  });
  EXPECT_THAT(out, ElementsAre(3.f, 3.f));
}

TEST(GlooCollectives, MismatchesFailOnEveryRankAndLeaveTheGroupUsable) {
  auto groups = make_groups(2, quick());
  auto errors = run_ranks(2, [&](int r) {
    if (r == 0) {
      groups[r]->all_reduce(r, constant({1.f, 2.f}), ReduceOp::SUM);
    } else {
      groups[r]->all_reduce(r, constant({1.f, 2.f, 3.f}), ReduceOp::SUM);
    }
  });
  const std::string group = " on group strata/gloo of 2 ranks";
  const std::string zero = "rank 0, issued collective #1 all_reduce(SUM, [float32[2]])" + group;
  const std::string one = "rank 1 issued collective #1 all_reduce(SUM, [float32[3]])" + group;
  EXPECT_EQ(caught(errors[0]).code, ErrorCode::FAILED_PRECONDITION);
  EXPECT_THAT(caught(errors[0]).message,
              HasSubstr("collective schedules differ across workers: this worker, " + zero +
                        " but " + one));
  EXPECT_EQ(caught(errors[1]).code, ErrorCode::FAILED_PRECONDITION);
  EXPECT_THAT(caught(errors[1]).message,
              HasSubstr("this worker, rank 1, issued collective #1 all_reduce(SUM, [float32[3]])" +
                        group + " but rank 0 issued collective #1 all_reduce(SUM, [float32[2]])"));
  errors = run_ranks(2, [&](int r) {
    if (r == 0) {
      groups[r]->barrier(r);
    } else {
      groups[r]->broadcast(r, constant(1.f), 0);
    }
  });
  for (auto& e : errors) {
    EXPECT_EQ(caught(e).code, ErrorCode::FAILED_PRECONDITION);
    EXPECT_THAT(caught(e).message, HasSubstr("collective #2 broadcast(root 0, float32[])"));
    EXPECT_THAT(caught(e).message, HasSubstr("collective #2 barrier()"));
  }
  std::vector<float> out(2);
  run_ranks_ok(2, [&](int r) {
    out[r] = groups[r]->all_reduce(r, constant(1.f), ReduceOp::SUM).item<float>();
  });
  EXPECT_THAT(out, ElementsAre(2.f, 2.f));
  EXPECT_THROW(groups[0]->barrier(1), InvalidArgumentError);
}

TEST(GlooCollectives, ScheduleDifferencesFailEveryRankShowingBothSides) {
  // Rank 2 reduces with MAX and int32 where ranks 0 and 1 use SUM over float32:
  // the ranks that agree with each other fail too, naming rank 2.
  auto groups = make_groups(3, quick());
  auto errors = run_ranks(3, [&](int r) {
    if (r < 2) {
      groups[r]->all_reduce(r, constant({1.f, 2.f}), ReduceOp::SUM);
    } else {
      groups[r]->all_reduce(r, constant(std::vector<int32_t>{1, 2}), ReduceOp::MAX);
    }
  });
  for (int r = 0; r < 3; ++r) {
    const auto c = caught(errors[r]);
    EXPECT_EQ(c.code, ErrorCode::FAILED_PRECONDITION) << c.message;
    EXPECT_THAT(c.message, HasSubstr(str_cat("this worker, rank ", r, ", issued collective #1 ")));
    EXPECT_THAT(c.message, HasSubstr("all_reduce(SUM, [float32[2]])"));
    EXPECT_THAT(c.message, HasSubstr("all_reduce(MAX, [int32[2]])"));
    EXPECT_THAT(c.message, HasSubstr(r < 2 ? "but rank 2 issued" : "but rank 0 issued"));
  }
  // The group stays usable: the next collective is #2 on every rank.
  errors = run_ranks(3, [&](int r) {
    if (r == 1) {
      groups[r]->broadcast(r, constant(int64_t{7}), 1);
    } else {
      groups[r]->barrier(r);
    }
  });
  for (int r = 0; r < 3; ++r) {
    const auto c = caught(errors[r]);
    EXPECT_EQ(c.code, ErrorCode::FAILED_PRECONDITION) << c.message;
    EXPECT_THAT(c.message, HasSubstr(r == 1 ? "rank 1, issued collective #2 broadcast(root 1, "
                                              "int64[]) on group strata/gloo of 3 ranks but "
                                              "rank 0 issued collective #2 barrier()"
                                            : "issued collective #2 barrier() on group "
                                              "strata/gloo of 3 ranks but rank 1 issued "
                                              "collective #2 broadcast(root 1, int64[])"));
  }
}

TEST(GlooCollectives, TimeoutNamesTheMissingRankAndResetReconnects) {
  auto groups = make_groups(3, quick(500ms));
  const auto start = std::chrono::steady_clock::now();
  auto errors =
      run_ranks(2, [&](int r) { groups[r]->all_reduce(r, constant(1.f), ReduceOp::SUM); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  const std::string verdict =
      "GlooCollectives: collective #1 all_reduce(SUM, [float32[]]) on group strata/gloo of 3 "
      "ranks: rank 2 never entered it within 500ms";
  for (int r = 0; r < 2; ++r) {
    const auto c = caught(errors[r]);
    EXPECT_EQ(c.code, ErrorCode::DEADLINE_EXCEEDED) << c.message;
    // The same verdict on both surviving ranks, then who reports it and what
    // the missing rank last published (its progress at the rendezvous).
    EXPECT_THAT(c.message, StartsWith(str_cat(verdict, " (reported by rank ", r,
                                              "); rank 2 was last heard from ")));
    EXPECT_THAT(c.message, EndsWith(" s before: completed no collective yet"));
  }
  EXPECT_THROW(groups[0]->barrier(0), DeadlineExceededError);  // broken until reset
  run_ranks_ok(3, [&](int r) { groups[r]->reset(); });
  std::vector<float> out(3);
  run_ranks_ok(3, [&](int r) {
    out[r] = groups[r]->all_reduce(r, constant(2.f), ReduceOp::SUM).item<float>();
  });
  EXPECT_THAT(out, ElementsAre(6.f, 6.f, 6.f));
}

TEST(GlooCollectives, ADataPhaseTimeoutNamesTheRankThatNeverFinished) {
  // Rank 2 enters collective #1 (the headers agree) but stalls before its data
  // moves, past the timeout: ranks 0 and 1 time out in the data phase and agree
  // that rank 2 never finished it. The same for Gloo's all-reduce and for the
  // exchange of reduce_scatter.
  for (const bool scatter : {false, true}) {
    SCOPED_TRACE(scatter ? "reduce_scatter" : "all_reduce");
    auto store = std::make_shared<InMemoryStore>();
    std::vector<std::unique_ptr<GlooCollectives>> groups(3);
    run_ranks_ok(3, [&](int r) {
      GlooOptions options{.timeout = 1s};
      if (r == 2)
        options.before_data_for_testing = [](uint64_t) { std::this_thread::sleep_for(2500ms); };
      groups[r] = std::make_unique<GlooCollectives>(r, 3, store, options);
    });
    auto errors = run_ranks(3, [&](int r) {
      const Tensor x = constant(std::vector<float>(999, 1.f));
      if (scatter) {
        groups[r]->reduce_scatter(r, x, ReduceOp::SUM);
      } else {
        groups[r]->all_reduce(r, x, ReduceOp::SUM);
      }
    });
    const std::string verdict = str_cat(
        "GlooCollectives: collective #1 ",
        scatter ? "reduce_scatter(SUM, float32[999])" : "all_reduce(SUM, [float32[999]])",
        " on group strata/gloo of 3 ranks: rank 2 never finished it within 1000ms (rank 0 and "
        "rank 1 timed out waiting; reported by rank ");
    for (int r = 0; r < 2; ++r) {
      const auto c = caught(errors[r]);
      EXPECT_EQ(c.code, ErrorCode::DEADLINE_EXCEEDED) << c.message;
      EXPECT_THAT(c.message, StartsWith(str_cat(verdict, r, "); rank 2 was last heard from ")));
    }
    EXPECT_NE(errors[2], nullptr);  // the stalled rank fails too
  }
}

// A rank publishes its progress (last completed collective and activity)
// every progress_interval; a peer timing out waiting for it says what it was
// last doing.
TEST(GlooCollectives, ATimeoutSaysWhatTheMissingRankWasLastDoing) {
  auto store = std::make_shared<InMemoryStore>();
  std::vector<std::unique_ptr<GlooCollectives>> groups(2);
  run_ranks_ok(2, [&](int r) {
    groups[r] = std::make_unique<GlooCollectives>(
        r, 2, store, GlooOptions{.timeout = 500ms, .progress_interval = 20ms});
  });
  groups[1]->set_activity([] { return std::string("step 7, phase input"); });
  run_ranks_ok(2, [&](int r) { groups[r]->all_reduce(r, constant(1.f), ReduceOp::SUM); });
  std::this_thread::sleep_for(200ms);  // several progress reports
  const auto c =
      caught(run_ranks(1, [&](int) { groups[0]->all_reduce(0, constant(1.f), ReduceOp::SUM); })[0]);
  EXPECT_EQ(c.code, ErrorCode::DEADLINE_EXCEEDED) << c.message;
  EXPECT_THAT(c.message, HasSubstr("collective #2 all_reduce(SUM, [float32[]]) on group "
                                   "strata/gloo of 2 ranks: rank 1 never entered it within 500ms "
                                   "(reported by rank 0); rank 1 was last heard from 0."));
  EXPECT_THAT(c.message, EndsWith(" s before: completed collective #1 all_reduce(SUM, "
                                  "[float32[]]) on group strata/gloo of 2 ranks; step 7, phase "
                                  "input"));
  groups[1]->set_activity(nullptr);
}

TEST(GlooCollectives, TimeoutVerdictUsesTheRankNames) {
  auto store = std::make_shared<InMemoryStore>();
  GlooOptions options{.timeout = 300ms, .rank_names = {"/job:chief/task:0", "/job:worker/task:0"}};
  std::vector<std::unique_ptr<GlooCollectives>> groups(2);
  run_ranks_ok(2,
               [&](int r) { groups[r] = std::make_unique<GlooCollectives>(r, 2, store, options); });
  try {
    groups[0]->barrier(0);
    FAIL() << "expected DeadlineExceededError";
  } catch (const DeadlineExceededError& e) {
    EXPECT_THAT(e.what(), HasSubstr("collective #1 barrier() on group strata/gloo of 2 ranks: rank "
                                    "1 (/job:worker/task:0) never entered it within 300ms "
                                    "(reported by rank 0 (/job:chief/task:0))"));
  }
  options.rank_names = {"just one"};
  EXPECT_THROW(GlooCollectives(0, 2, store, options), InvalidArgumentError);
}

TEST(GlooCollectives, AbortWakesTheWaiterAndFailsThePeerWithoutWaitingOutTheTimeout) {
  auto groups = make_groups(2, quick(60s));
  std::atomic<bool> started{false};
  const auto start = std::chrono::steady_clock::now();
  std::jthread aborter([&] {
    while (!started) std::this_thread::yield();
    std::this_thread::sleep_for(50ms);
    groups[0]->abort("replica 0 failed: boom");
  });
  auto errors = run_ranks(1, [&](int) {
    started = true;
    groups[0]->all_reduce(0, constant(1.f), ReduceOp::SUM);
  });
  aborter.join();
  EXPECT_EQ(caught(errors[0]).code, ErrorCode::ABORTED);
  EXPECT_EQ(caught(errors[0]).message, "replica 0 failed: boom");
  // The peer's next call fails fast: its connection was closed.
  try {
    groups[1]->all_reduce(1, constant(1.f), ReduceOp::SUM);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::UNAVAILABLE) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_THROW(groups[0]->barrier(0), AbortedError);
  run_ranks_ok(2, [&](int r) { groups[r]->reset(); });
  run_ranks_ok(2, [&](int r) { groups[r]->barrier(r); });
}

TEST(GlooCollectives, AbortDuringLargeTransfersReturnsEveryRank) {
  auto groups = make_groups(2, quick(60s));
  const auto start = std::chrono::steady_clock::now();
  std::jthread aborter([&] {
    std::this_thread::sleep_for(100ms);
    groups[1]->abort("stop");
  });
  auto errors = run_ranks(2, [&](int r) {
    Tensor t = constant(std::vector<float>(1 << 20, 1.f));
    for (int i = 0; i < 10000; ++i) groups[r]->all_reduce(r, t, ReduceOp::SUM);
  });
  aborter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_EQ(caught(errors[1]).code, ErrorCode::ABORTED);
  EXPECT_EQ(caught(errors[0]).code, ErrorCode::UNAVAILABLE) << caught(errors[0]).message;
}

TEST(GlooCollectives, AbortDuringALargeReduceScatterReturnsEveryRank) {
  auto groups = make_groups(2, quick(60s));
  const auto start = std::chrono::steady_clock::now();
  std::jthread aborter([&] {
    std::this_thread::sleep_for(100ms);
    groups[0]->abort("stop");
  });
  auto errors = run_ranks(2, [&](int r) {
    Tensor t = constant(std::vector<float>(4 << 20, 1.f));
    for (int i = 0; i < 10000; ++i) groups[r]->reduce_scatter(r, t, ReduceOp::SUM);
  });
  aborter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_EQ(caught(errors[0]).code, ErrorCode::ABORTED);
  EXPECT_EQ(caught(errors[1]).code, ErrorCode::UNAVAILABLE) << caught(errors[1]).message;
}

TEST(GlooCollectives, ManyBackToBackCallsStayInStep) {
  auto groups = make_groups(3, quick());
  std::atomic<int> wrong{0};
  run_ranks_ok(3, [&](int r) {
    for (int i = 0; i < 300; ++i) {
      switch (i % 3) {
        case 0:
          if (groups[r]
                  ->all_reduce(r, constant(static_cast<int32_t>(i + r)), ReduceOp::SUM)
                  .item<int32_t>() != 3 * i + 3) {
            wrong.fetch_add(1);
          }
          break;
        case 1:
          if (groups[r]
                  ->broadcast(r, constant(static_cast<int64_t>(i) * 10 + r), i % 3)
                  .item<int64_t>() != i * 10 + i % 3) {
            wrong.fetch_add(1);
          }
          break;
        default: groups[r]->barrier(r);
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST(GlooCollectives, RendezvousTimesOutWhenAPeerNeverComes) {
  auto store = std::make_shared<InMemoryStore>();
  try {
    GlooCollectives lonely(0, 2, store, quick(200ms));
    FAIL() << "expected DeadlineExceededError";
  } catch (const DeadlineExceededError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rendezvous"));
  }
  EXPECT_THROW(GlooCollectives(2, 2, store), InvalidArgumentError);
  EXPECT_THROW(GlooCollectives(0, 1, nullptr), InvalidArgumentError);
}

TEST(GlooCollectives, TheRendezvousEndsByItsOwnTimeoutNotTheCallTimeout) {
  // A start-up deadline shorter than the collective timeout (a job's workers
  // must meet within a minute, each call may take ten).
  auto store = std::make_shared<InMemoryStore>();
  const auto start = std::chrono::steady_clock::now();
  try {
    GlooCollectives lonely(0, 2, store, GlooOptions{.timeout = 60s, .rendezvous_timeout = 300ms});
    FAIL() << "expected DeadlineExceededError";
  } catch (const DeadlineExceededError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rendezvous timed out after 300ms")) << e.what();
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_THROW(GlooCollectives(0, 2, store, GlooOptions{.rendezvous_timeout = -1ms}),
               InvalidArgumentError);
}

// A rank whose part of the rendezvous failed (a stray took one of its pairs,
// say) leaves a notice in the store before it throws, and goes on to the next
// attempt; a peer waiting for what it would have published next stops at the
// notice, naming it, instead of waiting out its own rendezvous timeout.
TEST(GlooCollectives, APeerThatGaveUpTheRendezvousEndsTheWaitOfTheOthersNamingIt) {
  const GlooOptions options{.rendezvous_timeout = 200ms,
                            .rank_names = {"/job:chief/task:0", "/job:worker/task:0"}};
  {
    auto store = std::make_shared<InMemoryStore>();
    EXPECT_THROW(GlooCollectives(0, 2, store, options), DeadlineExceededError);
    const std::vector<char> notice = store->get("strata/gloo/0/abandoned/0", 1s);
    EXPECT_THAT(std::string(notice.begin(), notice.end()), HasSubstr("strata/gloo/0/1"));
  }
  // Rank 0 gave up before it published anything else: rank 1 waits in the
  // store for its first key and stops at the notice.
  auto store = std::make_shared<InMemoryStore>();
  const std::string why = "the mesh check failed";
  store->set("strata/gloo/0/abandoned/0", std::vector<char>(why.begin(), why.end()), 1s);
  const auto start = std::chrono::steady_clock::now();
  try {
    GlooCollectives late(1, 2, store,
                         GlooOptions{.rendezvous_timeout = 30s, .rank_names = options.rank_names});
    FAIL() << "expected UnavailableError";
  } catch (const UnavailableError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rendezvous failed: rank 0 (/job:chief/task:0) gave up this "
                                    "rendezvous: the mesh check failed"));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

}  // namespace
}  // namespace strata::collective
