#include "strata/collective/hierarchical_collectives.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "strata/collective/gloo_collectives.h"
#include "strata/collective/local_collectives.h"
#include "strata/testing/run_ranks.h"

namespace strata::collective {
namespace {

using testing::caught;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::run_ranks;
using testing::run_ranks_ok;
using namespace std::chrono_literals;

// P "processes" (groups of threads) with L local ranks each: every process has
// its own LocalCollectives and its own GlooCollectives (or one shared
// LocalCollectives standing in for the cross-process group).
struct Cluster {
  int processes = 0;
  int local = 0;
  std::vector<std::shared_ptr<HierarchicalCollectives>> per_process;
  Collectives& of(int rank) { return *per_process[rank / local]; }
};

Cluster make_gloo_cluster(int processes, int local, std::chrono::milliseconds timeout = 20s) {
  Cluster c{processes, local, std::vector<std::shared_ptr<HierarchicalCollectives>>(processes)};
  auto store = std::make_shared<InMemoryStore>();
  run_ranks_ok(processes, [&](int p) {
    auto cross =
        std::make_shared<GlooCollectives>(p, processes, store, GlooOptions{.timeout = timeout});
    auto l = std::make_shared<LocalCollectives>(local, CollectiveOptions{.timeout = timeout});
    c.per_process[p] = std::make_shared<HierarchicalCollectives>(local, l, cross, p);
  });
  return c;
}

Cluster make_local_cluster(int processes, int local) {
  Cluster c{processes, local, {}};
  auto cross = std::make_shared<LocalCollectives>(processes);
  for (int p = 0; p < processes; ++p) {
    c.per_process.push_back(std::make_shared<HierarchicalCollectives>(
        local, std::make_shared<LocalCollectives>(local), cross, p));
  }
  return c;
}

TEST(HierarchicalCollectives, AllReduceOverTwoProcessesOfTwoRanks) {
  Cluster c = make_gloo_cluster(2, 2);
  ASSERT_EQ(c.of(0).size(), 4);
  for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MEAN, ReduceOp::MAX, ReduceOp::MIN}) {
    std::vector<std::vector<Tensor>> out(4);
    run_ranks_ok(4, [&](int g) {
      // rank g holds [g+1, -(g+1), 10g] (float32) and [3g - 5] (int32).
      const float f = static_cast<float>(g + 1);
      out[g] = c.of(g).all_reduce(
          g, {constant({f, -f, 10.f * g}), constant(std::vector<int32_t>{3 * g - 5})}, op);
    });
    for (int g = 0; g < 4; ++g) {
      const auto f = out[g][0].to_vector<float>();
      const int32_t i = out[g][1].item<int32_t>();
      switch (op) {
        case ReduceOp::SUM:
          EXPECT_THAT(f, ElementsAre(10, -10, 60));
          EXPECT_EQ(i, -2);  // -5 - 2 + 1 + 4
          break;
        case ReduceOp::MEAN:
          EXPECT_THAT(f, ElementsAre(2.5, -2.5, 15));
          EXPECT_EQ(i, 0);  // -2 / 4 truncates to 0
          break;
        case ReduceOp::MAX:
          EXPECT_THAT(f, ElementsAre(4, -1, 30));
          EXPECT_EQ(i, 4);
          break;
        case ReduceOp::MIN:
          EXPECT_THAT(f, ElementsAre(1, -4, 0));
          EXPECT_EQ(i, -5);
          break;
      }
    }
  }
}

TEST(HierarchicalCollectives, OneRankPerProcessUsesTheCrossGroupDirectly) {
  Cluster c = make_gloo_cluster(3, 1);
  std::vector<std::vector<Tensor>> mean(3);
  std::vector<Tensor> gathered(3), scattered(3), root2(3);
  run_ranks_ok(3, [&](int g) {
    const float f = static_cast<float>(g + 1);
    mean[g] = c.of(g).all_reduce(
        g, {constant({f, 10.f * g, 0.f, 1.f, 2.f, 3.f}, {3, 2}), constant(int32_t{3 * g - 5})},
        ReduceOp::MEAN);
    gathered[g] = c.of(g).all_gather(g, constant(std::vector<int64_t>(g, g), {g}));
    scattered[g] = c.of(g).reduce_scatter(g, mean[g][0], ReduceOp::SUM);
    root2[g] = c.of(g).broadcast(g, constant(static_cast<double>(g)), 2);
    c.of(g).barrier(g);
  });
  for (int g = 0; g < 3; ++g) {
    EXPECT_THAT(mean[g][0].to_vector<float>(), ElementsAre(2, 10, 0, 1, 2, 3));
    EXPECT_EQ(mean[g][1].item<int32_t>(), -2);  // (-5 - 2 + 1) / 3
    EXPECT_THAT(gathered[g].to_vector<int64_t>(), ElementsAre(1, 2, 2));
    EXPECT_EQ(scattered[g].shape(), (TensorShape{1, 2}));
    EXPECT_THAT(scattered[g].to_vector<float>(),
                g == 0 ? ElementsAre(6, 30) : (g == 1 ? ElementsAre(0, 3) : ElementsAre(6, 9)));
    EXPECT_EQ(root2[g].item<double>(), 2.0);
  }
  EXPECT_THROW(c.of(0).barrier(1), InvalidArgumentError);  // rank 1 lives in process 1
}

TEST(HierarchicalCollectives, AllGatherReduceScatterBroadcastAndBarrier) {
  Cluster c = make_gloo_cluster(2, 2);
  std::vector<Tensor> out(4);
  run_ranks_ok(4, [&](int g) {
    std::vector<int64_t> v(g, g);  // rank g contributes g rows of [g]
    out[g] = c.of(g).all_gather(g, constant(v, {g, 1}));
  });
  for (int g = 0; g < 4; ++g)
    EXPECT_THAT(out[g].to_vector<int64_t>(), ElementsAre(1, 2, 2, 3, 3, 3));

  run_ranks_ok(4, [&](int g) {
    std::vector<float> v(8);
    for (int i = 0; i < 8; ++i) v[i] = static_cast<float>(i * (g + 1));
    out[g] = c.of(g).reduce_scatter(g, constant(v, {4, 2}), ReduceOp::SUM);
  });
  for (int g = 0; g < 4; ++g) {
    EXPECT_EQ(out[g].shape(), (TensorShape{1, 2}));
    EXPECT_THAT(out[g].to_vector<float>(), ElementsAre(10.f * (2 * g), 10.f * (2 * g + 1)));
  }
  auto errors = run_ranks(4, [&](int g) {
    c.of(g).reduce_scatter(g, constant({1.f, 2.f}), ReduceOp::SUM);
  });
  for (auto& e : errors) EXPECT_THAT(caught(e).message, HasSubstr("divisible by the group size 4"));

  for (int root = 0; root < 4; ++root) {
    run_ranks_ok(4, [&](int g) {
      out[g] = c.of(g).broadcast(g, constant({100.f + g, 1.f * g}), root);
    });
    for (int g = 0; g < 4; ++g) {
      EXPECT_THAT(out[g].to_vector<float>(), ElementsAre(100.f + root, 1.f * root))
          << "root " << root;
    }
  }
  std::atomic<int> arrived{0};
  std::atomic<int> early{0};
  run_ranks_ok(4, [&](int g) {
    arrived.fetch_add(1);
    c.of(g).barrier(g);
    if (arrived.load() != 4) early.fetch_add(1);
  });
  EXPECT_EQ(early.load(), 0);
}

TEST(HierarchicalCollectives, CrossProcessMismatchFailsOnEveryLocalRank) {
  Cluster c = make_gloo_cluster(2, 2);
  auto errors = run_ranks(4, [&](int g) {
    // Process 1 (ranks 2, 3) uses another shape than process 0.
    c.of(g).all_reduce(g, constant(std::vector<float>(g < 2 ? 2 : 3, 1.f)), ReduceOp::SUM);
  });
  for (auto& e : errors) {
    EXPECT_EQ(caught(e).code, ErrorCode::FAILED_PRECONDITION);
    EXPECT_THAT(caught(e).message, HasSubstr("collective schedules differ across workers"));
    EXPECT_THAT(caught(e).message, HasSubstr("float32[2]"));
    EXPECT_THAT(caught(e).message, HasSubstr("float32[3]"));
  }
  // Usable afterwards.
  std::vector<float> out(4);
  run_ranks_ok(4, [&](int g) {
    out[g] = c.of(g).all_reduce(g, constant(1.f), ReduceOp::SUM).item<float>();
  });
  EXPECT_THAT(out, ElementsAre(4, 4, 4, 4));
  EXPECT_THROW(c.of(0).barrier(2), InvalidArgumentError);  // rank 2 lives in process 1
}

TEST(HierarchicalCollectives, AbortOfOneProcessReturnsEveryRank) {
  Cluster c = make_gloo_cluster(2, 2, 60s);
  const auto start = std::chrono::steady_clock::now();
  std::jthread aborter([&] {
    std::this_thread::sleep_for(50ms);
    c.per_process[0]->abort("replica 1 failed: boom");
  });
  // Process 1 never calls: process 0's ranks wait until the abort.
  auto errors = run_ranks(2, [&](int g) { c.of(g).all_reduce(g, constant(1.f), ReduceOp::SUM); });
  aborter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  for (auto& e : errors) {
    EXPECT_EQ(caught(e).code, ErrorCode::ABORTED);
    EXPECT_THAT(caught(e).message, HasSubstr("replica 1 failed: boom"));
  }
  // Process 1 now fails fast (connection closed), on both of its local ranks.
  errors =
      run_ranks(2, [&](int l) { c.of(2 + l).all_reduce(2 + l, constant(1.f), ReduceOp::SUM); });
  for (auto& e : errors) EXPECT_EQ(caught(e).code, ErrorCode::UNAVAILABLE) << caught(e).message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

TEST(HierarchicalCollectives, ManyCallsOverLocalGroupsStayInStep) {
  Cluster c = make_local_cluster(2, 3);
  std::atomic<int> wrong{0};
  run_ranks_ok(6, [&](int g) {
    for (int i = 0; i < 300; ++i) {
      switch (i % 4) {
        case 0:
          if (c.of(g)
                  .all_reduce(g, constant(static_cast<int64_t>(g) + i), ReduceOp::SUM)
                  .item<int64_t>() != 15 + 6 * i) {
            wrong.fetch_add(1);
          }
          break;
        case 1: {
          const int root = i % 6;
          if (c.of(g).broadcast(g, constant(static_cast<int32_t>(g * 7)), root).item<int32_t>() !=
              root * 7) {
            wrong.fetch_add(1);
          }
          break;
        }
        case 2: {
          const auto v =
              c.of(g).all_gather(g, constant(std::vector<int32_t>{g})).to_vector<int32_t>();
          if (v != std::vector<int32_t>{0, 1, 2, 3, 4, 5}) wrong.fetch_add(1);
          break;
        }
        default: c.of(g).barrier(g);
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST(HierarchicalCollectives, ConstructorChecksTheGroups) {
  auto local = std::make_shared<LocalCollectives>(2);
  auto cross = std::make_shared<LocalCollectives>(3);
  EXPECT_THROW(HierarchicalCollectives(3, local, cross, 0), InvalidArgumentError);
  EXPECT_THROW(HierarchicalCollectives(2, local, cross, 3), InvalidArgumentError);
  EXPECT_THROW(HierarchicalCollectives(2, nullptr, cross, 0), InvalidArgumentError);
  HierarchicalCollectives ok(2, local, cross, 2);
  EXPECT_EQ(ok.size(), 6);
}

}  // namespace
}  // namespace strata::collective
