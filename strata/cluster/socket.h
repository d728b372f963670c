#pragma once
// TCP address helpers shared by the TCP store, the strategies that dial it and
// the `strata launch` program.
//
//   auto [host, port] = strata::cluster::split_host_port("[::1]:2222");  // "::1", "2222"
//   std::vector<int> ports = strata::cluster::pick_free_ports(4);       // for 4 local workers
//
// Thread-safe (no shared state).

#include <string>
#include <utility>
#include <vector>

namespace strata::cluster {

// Splits "host:port" or "[v6 address]:port" into host and port (brackets
// dropped). InvalidArgumentError naming the address when it has no host, no
// port or a port outside 0-65535.
std::pair<std::string, std::string> split_host_port(const std::string& address);

// `n` distinct TCP ports on 127.0.0.1 that were free when picked: each is bound
// (port 0) and held until all are picked, then released for the caller's
// processes to bind. UnavailableError naming the failing call if the OS refuses.
std::vector<int> pick_free_ports(int n);

}  // namespace strata::cluster
