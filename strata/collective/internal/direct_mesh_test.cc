#include "strata/collective/internal/direct_mesh.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strata/base/coding.h"
#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/str_cat.h"

namespace strata::collective::internal {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using Clock = DirectMesh::Clock;

// `size` meshes of one process, connected on threads (as ranks of
// processes would be).
std::vector<std::unique_ptr<DirectMesh>> connected_meshes(int size,
                                                          const std::vector<uint64_t>& checks) {
  std::vector<std::unique_ptr<DirectMesh>> meshes;
  std::vector<std::string> addresses;
  meshes.reserve(size_t(size));
  addresses.reserve(size_t(size));
  for (int r = 0; r < size; ++r) {
    meshes.push_back(std::make_unique<DirectMesh>(r, size, "127.0.0.1"));
    addresses.push_back(meshes.back()->address());
  }
  std::vector<std::future<void>> done;
  done.reserve(size_t(size));
  for (int r = 0; r < size; ++r) {
    done.push_back(std::async(std::launch::async, [&, r] {
      meshes[size_t(r)]->connect(addresses, checks, Clock::now() + 10s);
    }));
  }
  for (auto& d : done) d.get();
  return meshes;
}

// A plain TCP connection to host:port on 127.0.0.1 (a stray).
UniqueFd connect_to(const std::string& address) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1))));
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

TEST(DirectMesh, EveryRankReceivesEveryPeersMessageForItInEachExchange) {
  constexpr int kSize = 3;
  auto meshes = connected_meshes(kSize, {11, 22, 33});
  constexpr size_t kStride = 64 * 1024;
  std::vector<std::vector<char>> in(kSize, std::vector<char>(kStride * kSize));
  for (int round = 0; round < 50; ++round) {
    std::vector<std::future<DirectMesh::Outcome>> outcomes;
    outcomes.reserve(kSize);
    for (int r = 0; r < kSize; ++r) {
      outcomes.push_back(std::async(std::launch::async, [&, r] {
        // Rank r sends "r>p:round" to p; the last round's messages are large
        // (more than a socket buffer takes at once, both ways at the same time).
        std::vector<std::string> messages(kSize);
        for (int p = 0; p < kSize; ++p) {
          messages[size_t(p)] = str_cat(r, ">", p, ":", round);
          if (round == 49) messages[size_t(p)].resize(kStride, char('a' + r));
        }
        return meshes[size_t(r)]->exchange(
            [&](int p) { return std::string_view(messages[size_t(p)]); }, in[size_t(r)].data(),
            kStride, Clock::now() + 10s);
      }));
    }
    for (int r = 0; r < kSize; ++r) {
      const DirectMesh::Outcome out = outcomes[size_t(r)].get();
      ASSERT_EQ(out.status, DirectMesh::Status::kDone) << out.why;
      for (int p = 0; p < kSize; ++p) {
        if (p == r) continue;
        const std::string expected = str_cat(p, ">", r, ":", round);
        EXPECT_EQ(std::string(in[size_t(r)].data() + size_t(p) * kStride, expected.size()),
                  expected);
      }
    }
  }
}

TEST(DirectMesh, APeerThatIsGoneIsNamedAndASilentOneTimesOut) {
  auto meshes = connected_meshes(3, {1, 2, 3});
  std::vector<char> in(3 * 64);
  // Rank 1 never sends: rank 0 hears rank 2 only.
  auto from2 = std::async(std::launch::async, [&] {
    std::vector<char> in2(3 * 64);
    return meshes[2]->exchange([](int) { return std::string_view("x"); }, in2.data(), 64,
                               Clock::now() + 2s);
  });
  const auto start = Clock::now();
  const DirectMesh::Outcome out = meshes[0]->exchange([](int) { return std::string_view("y"); },
                                                      in.data(), 64, Clock::now() + 300ms);
  EXPECT_EQ(out.status, DirectMesh::Status::kTimeout);
  EXPECT_GE(Clock::now() - start, 300ms);
  EXPECT_EQ(out.arrived, (std::vector<char>{1, 0, 1}));
  // Rank 1 goes away: rank 2, still waiting for it, learns at once.
  meshes[1].reset();
  const DirectMesh::Outcome lost = from2.get();
  EXPECT_EQ(lost.status, DirectMesh::Status::kLost);
  EXPECT_EQ(lost.lost, 1);
  // Closed, or reset (rank 0's unread message was still in rank 1's socket).
  EXPECT_THAT(lost.why, ::testing::AnyOf(HasSubstr("closed"), HasSubstr("reset")));
}

TEST(DirectMesh, AbortWakesAnExchangeAndEndsEveryLaterOneAtOnce) {
  // Rank 0 waits for silent rank 2; rank 1 receiving rank 0's message shows
  // that rank 0's exchange is under way.
  auto meshes = connected_meshes(3, {5, 6, 7});
  std::vector<char> in(3 * 64);
  auto waiting = std::async(std::launch::async, [&] {
    return meshes[0]->exchange([](int) { return std::string_view("z"); }, in.data(), 64,
                               Clock::now() + 30s);
  });
  std::vector<char> in1(3 * 64);
  const DirectMesh::Outcome heard = meshes[1]->exchange([](int) { return std::string_view("w"); },
                                                        in1.data(), 64, Clock::now() + 1s);
  ASSERT_EQ(heard.status, DirectMesh::Status::kTimeout);
  ASSERT_EQ(heard.arrived, (std::vector<char>{1, 1, 0}));
  const auto start = Clock::now();
  meshes[0]->abort();
  EXPECT_EQ(waiting.get().status, DirectMesh::Status::kAborted);
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(
      meshes[0]
          ->exchange([](int) { return std::string_view("z"); }, in.data(), 64, Clock::now() + 30s)
          .status,
      DirectMesh::Status::kAborted);
}

TEST(DirectMesh, StraysAreClosedAndTheRealPeerConnects) {
  DirectMesh low(0, 2, "127.0.0.1");
  DirectMesh high(1, 2, "127.0.0.1");
  const std::vector<std::string> addresses{low.address(), high.address()};
  // Before the real peer: one stranger that sends garbage, one that claims
  // rank 1 with the wrong check, one that stays silent.
  UniqueFd garbage = connect_to(low.address());
  const std::string junk(16, '\xff');
  ::send(garbage.get(), junk.data(), junk.size(), MSG_NOSIGNAL);
  UniqueFd impostor = connect_to(low.address());
  std::string hello;
  coding::put_fixed32(hello, 0x4d445453);
  coding::put_fixed32(hello, 1);
  coding::put_fixed64(hello, 999);
  ::send(impostor.get(), hello.data(), hello.size(), MSG_NOSIGNAL);
  UniqueFd silent = connect_to(low.address());
  auto accepting = std::async(std::launch::async, [&] {
    low.connect(addresses, {7, 8}, Clock::now() + 10s);
  });
  high.connect(addresses, {7, 8}, Clock::now() + 10s);
  accepting.get();
  std::vector<char> in(2 * 16);
  auto other = std::async(std::launch::async, [&] {
    std::vector<char> in1(2 * 16);
    return high.exchange([](int) { return std::string_view("hi"); }, in1.data(), 16,
                         Clock::now() + 5s);
  });
  EXPECT_EQ(
      low.exchange([](int) { return std::string_view("lo"); }, in.data(), 16, Clock::now() + 5s)
          .status,
      DirectMesh::Status::kDone);
  EXPECT_EQ(other.get().status, DirectMesh::Status::kDone);
  EXPECT_EQ(std::string(in.data() + 16, 2), "hi");
}

TEST(DirectMesh, APeerThatAnswersWithAnotherCheckFailsTheConnection) {
  DirectMesh low(0, 2, "127.0.0.1");
  DirectMesh high(1, 2, "127.0.0.1");
  const std::vector<std::string> addresses{low.address(), high.address()};
  // Rank 0 believes rank 1 published 8; rank 1 believes rank 0 published 70:
  // rank 0 accepts rank 1 (its hello carries 8), rank 1 rejects the answer (7).
  auto accepting = std::async(std::launch::async, [&] {
    low.connect(addresses, {7, 8}, Clock::now() + 10s);
  });
  try {
    high.connect(addresses, {70, 8}, Clock::now() + 10s);
    ADD_FAILURE() << "expected UnavailableError";
  } catch (const UnavailableError& e) {
    EXPECT_THAT(e.what(), HasSubstr("failed the mesh check"));
  }
  accepting.get();
}

// A rank that waits for a higher rank to connect stops as soon as its
// between_waits hook throws (a peer known to have given up), not at the
// deadline.
TEST(DirectMesh, TheWaitForAPeerEndsWhenTheHookSaysItGaveUp) {
  DirectMesh low(0, 2, "127.0.0.1");
  DirectMesh high(1, 2, "127.0.0.1");  // never connects
  const std::vector<std::string> addresses{low.address(), high.address()};
  int polls = 0;
  const auto start = Clock::now();
  try {
    low.connect(addresses, {7, 8}, start + 30s, [&] {
      if (++polls == 3) throw UnavailableError("rank 1 gave up this rendezvous");
    });
    ADD_FAILURE() << "expected UnavailableError";
  } catch (const UnavailableError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank 1 gave up"));
  }
  EXPECT_EQ(polls, 3);
  EXPECT_LT(Clock::now() - start, 10s);
}

}  // namespace
}  // namespace strata::collective::internal
