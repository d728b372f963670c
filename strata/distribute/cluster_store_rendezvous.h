#pragma once
// ClusterStoreRendezvous: a cluster key-value store (the chief's TCP store,
// strata/cluster/store.h) seen as the RendezvousStore a GlooCollectives group
// meets through (strata/collective/rendezvous_store.h).
//
//   auto store = std::make_shared<strata::cluster::TcpStoreClient>("127.0.0.1:7777");
//   strata::collective::GlooCollectives group(
//       rank, size, std::make_shared<strata::distribute::ClusterStoreRendezvous>(store));
//
// It lives in distribute because neither layer knows the other: cluster has
// the stores, collective the groups, and MultiWorkerMirroredStrategy (and the
// programs that drive Gloo the way it does) joins them.
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/cluster/store.h"
#include "strata/collective/rendezvous_store.h"

namespace strata::distribute {

class ClusterStoreRendezvous final : public collective::RendezvousStore {
 public:
  explicit ClusterStoreRendezvous(std::shared_ptr<cluster::Store> store)
      : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& value) override {
    store_->set(key, value);
  }
  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) override {
    return store_->get(key, timeout);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  std::shared_ptr<cluster::Store> store_;
};

}  // namespace strata::distribute
