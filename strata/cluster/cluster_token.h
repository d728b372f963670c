#pragma once
// The cluster token: a secret shared by the tasks of one job that
// authenticates every connection to its rendezvous store and to its
// parameter-server tasks. `strata launch` generates one and hands it to every
// task in STRATA_CLUSTER_TOKEN (kept when the operator already set it); tasks
// started otherwise get the same value from their operator.
//
//   std::string token = strata::cluster::cluster_token();   // "" when unset
//   std::string fresh = strata::cluster::generate_cluster_token();
//   bool ok = strata::cluster::tokens_equal(token, offered);  // constant time
//
// Servers compare the token a peer offers with their own in constant time and
// drop the peer when they differ. An empty token (the variable unset) turns
// authentication off: every task of the job must then agree on that too.
//
// Thread-safe (no shared state).

#include <string>
#include <string_view>

namespace strata::cluster {

// The environment variable that carries the token.
inline constexpr const char* kClusterTokenEnv = "STRATA_CLUSTER_TOKEN";
// The longest token accepted.
inline constexpr size_t kMaxClusterTokenBytes = 256;

// $STRATA_CLUSTER_TOKEN, or "" when unset or empty. InvalidArgumentError
// naming the variable when it is longer than kMaxClusterTokenBytes or holds a
// character outside printable ASCII (the token travels in gRPC metadata).
std::string cluster_token();

// Checks a token given by a caller: what cluster_token() accepts.
void validate_cluster_token(std::string_view token, std::string_view where);

// 32 random bytes from the kernel (getrandom), as 64 lowercase hex digits.
// UnavailableError if the kernel refuses.
std::string generate_cluster_token();

// a == b in time that depends only on the lengths, not on where they differ.
bool tokens_equal(std::string_view a, std::string_view b);

// True when $STRATA_BIND_ALL_INTERFACES is "1" or "true": servers then listen
// on every interface (0.0.0.0 / ::) at their port instead of the address their
// task's TF_CONFIG entry names.
bool bind_all_interfaces();

}  // namespace strata::cluster
