// HostHierarchicalCollectives: a cluster of 5 single-process "workers" on 3
// "hosts", run as threads of this process (each rank with its own objects, as
// processes would): ranks 0 and 2 share host 0, ranks 1 and 4 host 1, rank 3
// is alone on host 2. Within a host they exchange through ShmCollectives, the
// hosts' leaders (ranks 0, 1 and 3) through GlooCollectives over loopback.
// The TensorFlow counterpart is tf.distribute.MultiWorkerMirroredStrategy's
// collective ops between workers (CollectiveReduceV2, CollectiveGatherV2,
// CollectiveBcastSendV2/RecvV2); the values below are computed independently.
#include "strata/collective/host_hierarchical_collectives.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "strata/collective/gloo_collectives.h"
#include "strata/collective/shm_collectives.h"
#include "strata/testing/run_ranks.h"

namespace strata::collective {
namespace {

using testing::caught;
using ::testing::HasSubstr;
using testing::run_ranks;
using testing::run_ranks_ok;
using namespace std::chrono_literals;

const std::vector<int> kHostOfRank = {0, 1, 0, 2, 1};
const std::vector<std::string> kNames = {"/job:worker/task:0", "/job:worker/task:1",
                                         "/job:worker/task:2", "/job:worker/task:3",
                                         "/job:worker/task:4"};

struct Cluster {
  std::vector<std::shared_ptr<ShmCollectives>> intra;
  std::vector<std::shared_ptr<GlooCollectives>> leaders;
  std::vector<std::unique_ptr<HostHierarchicalCollectives>> groups;
};

// The 5 ranks' groups, built concurrently (every rendezvous is collective).
Cluster make_cluster(std::chrono::milliseconds timeout) {
  const int n = static_cast<int>(kHostOfRank.size());
  auto store = std::make_shared<InMemoryStore>();
  Cluster c;
  c.intra.resize(n);
  c.leaders.resize(n);
  c.groups.resize(n);
  run_ranks_ok(n, [&](int r) {
    const int h = kHostOfRank[r];
    std::vector<int> members;
    for (int q = 0; q < n; ++q) {
      if (kHostOfRank[q] == h) members.push_back(q);
    }
    const int intra_rank =
        static_cast<int>(std::find(members.begin(), members.end(), r) - members.begin());
    if (members.size() > 1) {
      std::vector<std::string> names;
      names.reserve(members.size());
      for (int q : members) names.push_back(kNames[q]);
      c.intra[r] =
          std::make_shared<ShmCollectives>(intra_rank, static_cast<int>(members.size()), store,
                                           ShmOptions{.timeout = timeout,
                                                      .rendezvous_timeout = 30s,
                                                      .prefix = str_cat("test/host/", h),
                                                      .rank_names = names});
    }
    if (intra_rank == 0) {
      c.leaders[r] = std::make_shared<GlooCollectives>(
          h, 3, store,
          GlooOptions{.timeout = timeout,
                      .rendezvous_timeout = 30s,
                      .prefix = "test/leaders",
                      .rank_names = {kNames[0], kNames[1], kNames[3]}});
    }
    c.groups[r] = std::make_unique<HostHierarchicalCollectives>(r, kHostOfRank, c.intra[r],
                                                                c.leaders[r], timeout);
  });
  return c;
}

// Rank r's value i: not exactly representable sums, so that the order of the
// additions shows in the bits.
float value(int r, int i) {
  return 0.1f * static_cast<float>(r + 1) + 1e-3f * static_cast<float>(i);
}

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
  return out;
}

TEST(HostHierarchicalCollectives, AllReduceGivesTheSameBitsOnEveryRankForEveryOp) {
  Cluster c = make_cluster(30s);
  for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MEAN, ReduceOp::MAX, ReduceOp::MIN}) {
    SCOPED_TRACE(::testing::Message() << op);
    std::vector<std::vector<Tensor>> out(5);
    run_ranks_ok(5, [&](int r) {
      std::vector<float> f(1000);
      for (int i = 0; i < 1000; ++i) f[i] = value(r, i);
      out[r] = c.groups[r]->all_reduce(
          r, {constant(f), constant<int64_t>({r + 1, 10 * r}), constant<float>(2.f * r)}, op);
    });
    for (int r = 0; r < 5; ++r) {
      ASSERT_EQ(out[r].size(), 3u);
      const std::vector<float> f = out[r][0].to_vector<float>();
      for (int i = 0; i < 1000; i += 111) {
        double sum = 0, hi = value(0, i), lo = value(0, i);
        for (int q = 0; q < 5; ++q) {
          sum += value(q, i);
          hi = std::max<double>(hi, value(q, i));
          lo = std::min<double>(lo, value(q, i));
        }
        const double want = op == ReduceOp::SUM    ? sum
                            : op == ReduceOp::MEAN ? sum / 5
                            : op == ReduceOp::MAX  ? hi
                                                   : lo;
        EXPECT_NEAR(f[i], want, 1e-5) << "rank " << r << " element " << i;
      }
      EXPECT_EQ(bits(f), bits(out[0][0].to_vector<float>())) << "rank " << r;
      // (1 + 2 + 3 + 4 + 5, 0 + 10 + 20 + 30 + 40); MEAN truncates: (3, 20).
      const std::vector<int64_t> ints = out[r][1].to_vector<int64_t>();
      const std::vector<int64_t> want_ints = op == ReduceOp::SUM    ? std::vector<int64_t>{15, 100}
                                             : op == ReduceOp::MEAN ? std::vector<int64_t>{3, 20}
                                             : op == ReduceOp::MAX  ? std::vector<int64_t>{5, 40}
                                                                    : std::vector<int64_t>{1, 0};
      EXPECT_EQ(ints, want_ints);
      EXPECT_EQ(out[r][2].shape(), TensorShape({}));
    }
  }
}

TEST(HostHierarchicalCollectives, AllGatherPutsTheBlocksInRankOrder) {
  Cluster c = make_cluster(30s);
  std::vector<Tensor> out(5);
  // Rank r gives r + 1 rows of 2: [r, 10 * k] for row k.
  run_ranks_ok(5, [&](int r) {
    std::vector<int32_t> v;
    for (int k = 0; k <= r; ++k) {
      v.push_back(r);
      v.push_back(10 * k);
    }
    out[r] = c.groups[r]->all_gather(r, constant(v, TensorShape({r + 1, 2})));
  });
  std::vector<int32_t> want;
  for (int r = 0; r < 5; ++r) {
    for (int k = 0; k <= r; ++k) {
      want.push_back(r);
      want.push_back(10 * k);
    }
  }
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ(out[r].shape(), TensorShape({15, 2}));
    EXPECT_EQ(out[r].to_vector<int32_t>(), want) << "rank " << r;
  }
}

TEST(HostHierarchicalCollectives, BroadcastFromEveryRootReachesEveryRank) {
  Cluster c = make_cluster(30s);
  for (int root = 0; root < 5; ++root) {
    std::vector<std::vector<float>> out(5);
    run_ranks_ok(5, [&](int r) {
      out[r] = c.groups[r]
                   ->broadcast(r, constant<float>({1.f * r, 2.f * r, 3.f * r}), root)
                   .to_vector<float>();
    });
    for (int r = 0; r < 5; ++r) {
      EXPECT_EQ(out[r], (std::vector<float>{1.f * root, 2.f * root, 3.f * root}))
          << "root " << root << ", rank " << r;
    }
  }
}

TEST(HostHierarchicalCollectives, ReduceScatterAndBarrier) {
  Cluster c = make_cluster(30s);
  std::vector<std::vector<int64_t>> out(5);
  run_ranks_ok(5, [&](int r) {
    std::vector<int64_t> v(10);
    for (int i = 0; i < 10; ++i) v[i] = i * (r + 1);  // Σ over ranks: 15 i
    c.groups[r]->barrier(r);
    out[r] = c.groups[r]->reduce_scatter(r, constant(v), ReduceOp::SUM).to_vector<int64_t>();
    c.groups[r]->barrier(r);
  });
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ(out[r], (std::vector<int64_t>{15 * 2 * r, 15 * (2 * r + 1)})) << "rank " << r;
  }
}

// The rank alone on host 2 never comes: the leaders' Gloo step times out, and
// the ranks waiting within hosts 0 and 1 for their leader's outcome report the
// same verdict (the task that never entered), not their own leader as late,
// although their own timeout is as short as the leaders'.
TEST(HostHierarchicalCollectives, ACrossHostTimeoutReachesEveryRankOfEveryHostWithItsVerdict) {
  Cluster c = make_cluster(500ms);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int> present = {0, 1, 2, 4};
  auto errors = run_ranks(4, [&](int i) {
    const int r = present[i];
    c.groups[r]->all_reduce(r, constant<float>(1.f), ReduceOp::SUM);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  for (int i = 0; i < 4; ++i) {
    const auto e = caught(errors[i]);
    EXPECT_EQ(e.code, ErrorCode::DEADLINE_EXCEEDED) << "rank " << present[i] << ": " << e.message;
    EXPECT_THAT(e.message, HasSubstr("rank 2 (/job:worker/task:3) never entered it"))
        << "rank " << present[i];
  }
}

TEST(HostHierarchicalCollectives, RefusesHostsNotNumberedByTheirLowestRank) {
  const auto e = caught(run_ranks(1, [](int) {
    HostHierarchicalCollectives(0, {1, 0}, nullptr, nullptr, 1s);
  })[0]);
  EXPECT_EQ(e.code, ErrorCode::INVALID_ARGUMENT);
  EXPECT_THAT(e.message, HasSubstr("expected hosts numbered by their lowest rank"));
}

}  // namespace
}  // namespace strata::collective
