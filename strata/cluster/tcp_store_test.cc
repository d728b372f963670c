#include "strata/cluster/tcp_store.h"

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strata/base/errors.h"

namespace strata::cluster {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;

const TcpStoreClientOptions kFast{.connect_timeout = 10s, .timeout = 30s};

// An address on 127.0.0.1 where nothing listens (a server's port, after it closed).
std::string closed_address() {
  std::string address;
  {
    TcpStoreServer server("127.0.0.1:0");
    address = server.address();
  }
  return address;
}

TEST(TcpStoreServer, PortZeroPicksAFreePortAndReportsIt) {
  TcpStoreServer server("127.0.0.1:0");
  EXPECT_GT(server.port(), 0);
  EXPECT_EQ(server.address(), "127.0.0.1:" + std::to_string(server.port()));
}

TEST(TcpStoreServer, MalformedAddressesAreInvalid) {
  EXPECT_THROW(TcpStoreServer("127.0.0.1"), InvalidArgumentError);
  EXPECT_THROW(TcpStoreServer("127.0.0.1:http"), InvalidArgumentError);
  EXPECT_THROW(TcpStoreClient("localhost:99999", kFast), InvalidArgumentError);
}

TEST(TcpStore, ValuesSetByOneClientAreSeenByAnother) {
  TcpStoreServer server;
  TcpStoreClient a(server.address(), kFast), b(server.address(), kFast);
  a.set("rank/0", to_bytes("10.0.0.1:4000"));
  EXPECT_EQ(to_string(b.get("rank/0", 1s)), "10.0.0.1:4000");
  EXPECT_TRUE(b.check({"rank/0"}));
  EXPECT_FALSE(b.check({"rank/0", "rank/1"}));
  b.set("rank/0", {});
  EXPECT_TRUE(a.get("rank/0", 1s).empty());
}

TEST(TcpStore, GetBlocksUntilAnotherClientSets) {
  TcpStoreServer server;
  TcpStoreClient reader(server.address(), kFast);
  std::jthread writer([&] {
    TcpStoreClient client(server.address(), kFast);
    client.wait({"reader-started"}, 30s);
    client.set("key", to_bytes("value"));
  });
  reader.set("reader-started", {});
  EXPECT_EQ(to_string(reader.get("key", 30s)), "value");
}

TEST(TcpStore, ManyClientsOnThreadsShareOneAtomicCounter) {
  TcpStoreServer server;
  constexpr int kThreads = 16, kAdds = 50;
  std::vector<int64_t> last(kThreads);
  {
    std::vector<std::jthread> threads;
    threads.reserve(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        TcpStoreClient client(server.address(), kFast);
        for (int i = 0; i < kAdds; ++i) last[t] = client.add("arrived", 1);
        // A barrier: every client waits for the last one's key.
        if (client.add("done", 1) == kThreads) client.set("all-done", {});
        client.wait({"all-done"}, 30s);
      });
    }
  }
  TcpStoreClient client(server.address(), kFast);
  EXPECT_EQ(client.add("arrived", 0), kThreads * kAdds);
  EXPECT_EQ(*std::max_element(last.begin(), last.end()), kThreads * kAdds);
  EXPECT_EQ(to_string(client.get("arrived", 0ms)), std::to_string(kThreads * kAdds));
}

TEST(TcpStore, LargeValuesRoundTrip) {
  TcpStoreServer server;
  TcpStoreClient client(server.address(), kFast);
  Bytes big(8 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 251);
  client.set("big", big);
  EXPECT_EQ(client.get("big", 1s), big);
}

TEST(TcpStore, GetTimeoutNamesTheKeyAndTheTimeWaited) {
  TcpStoreServer server;
  TcpStoreClient client(server.address(), kFast);
  try {
    client.get("rank/7", 50ms);
    FAIL();
  } catch (const DeadlineExceededError& e) {
    EXPECT_THAT(e.what(), HasSubstr("key 'rank/7' was not set after waiting"));
    EXPECT_THAT(e.what(), HasSubstr("(timeout 50ms)"));
    EXPECT_THAT(e.what(), HasSubstr(server.address()));
  }
  // The connection stays usable after a timeout.
  client.set("rank/7", to_bytes("x"));
  EXPECT_EQ(to_string(client.get("rank/7", 1s)), "x");
}

TEST(TcpStore, WaitTimeoutListsTheMissingKeys) {
  TcpStoreServer server;
  TcpStoreClient client(server.address(), kFast);
  client.set("a", {});
  try {
    client.wait({"a", "b", "c"}, 30ms);
    FAIL();
  } catch (const DeadlineExceededError& e) {
    EXPECT_THAT(e.what(), HasSubstr("keys ['b', 'c'] still missing"));
  }
}

TEST(TcpStore, AddOnBytesThatAreNotACounterIsInvalid) {
  TcpStoreServer server;
  TcpStoreClient client(server.address(), kFast);
  client.set("k", to_bytes("abc"));
  try {
    client.add("k", 1);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(e.what(), HasSubstr("key 'k'"));
  }
  EXPECT_EQ(client.add("n", 5), 5);
}

TEST(TcpStoreClient, UnreachableAddressIsUnavailableWithinTheDeadline) {
  const std::string address = closed_address();
  const auto start = std::chrono::steady_clock::now();
  try {
    TcpStoreClient client(address, {.connect_timeout = 300ms, .timeout = 1s});
    FAIL();
  } catch (const UnavailableError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("could not connect to the store at " + address + " within 300ms"));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(TcpStoreClient, RetriesUntilTheServerStarts) {
  const std::string address = closed_address();
  std::optional<TcpStoreServer> server;
  std::jthread starter([&] { server.emplace(address); });
  TcpStoreClient client(address, kFast);
  starter.join();
  client.set("k", to_bytes("v"));
  EXPECT_EQ(to_string(client.get("k", 1s)), "v");
}

TEST(TcpStoreClient, ServerShutdownWhileWaitingIsUnavailableNamingTheAddress) {
  auto server = std::make_unique<TcpStoreServer>();
  const std::string address = server->address();
  TcpStoreClient waiter(address, kFast);
  TcpStoreClient observer(address, kFast);
  TcpStoreClient signal(address, kFast);
  std::jthread stopper([&] {
    observer.wait({"waiter-started"}, 30s);
    server.reset();
  });
  // Signalled through another client: the server may go away right after.
  signal.set("waiter-started", {});
  try {
    waiter.get("never", 60s);
    FAIL();
  } catch (const UnavailableError& e) {
    EXPECT_THAT(e.what(), StartsWith("TcpStoreClient(" + address + "): get('never')"));
  }
  stopper.join();
  EXPECT_THROW(waiter.set("k", {}), UnavailableError);
}

TEST(TcpStoreClient, AbortWakesAWaitingGet) {
  TcpStoreServer server;
  TcpStoreClient client(server.address(), kFast);
  TcpStoreClient observer(server.address(), kFast);
  TcpStoreClient signal(server.address(), kFast);
  std::jthread aborter([&] {
    observer.wait({"waiting"}, 30s);
    client.abort();
  });
  // Signalled through another client: the abort may come before get() starts.
  signal.set("waiting", {});
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(client.get("never", 60s), AbortedError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_THROW(client.check({"waiting"}), AbortedError);
}

}  // namespace
}  // namespace strata::cluster
