#include "strata/cluster/socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "strata/base/errors.h"
#include "strata/base/file.h"

namespace strata::cluster {

std::pair<std::string, std::string> split_host_port(const std::string& address) {
  std::string host, port;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    STRATA_CHECK_ARG(
        close != std::string::npos && close + 1 < address.size() && address[close + 1] == ':',
        "TcpStore: expected an address like [::1]:2222, got '", address, "'");
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    STRATA_CHECK_ARG(colon != std::string::npos && colon > 0,
                     "TcpStore: expected an address like host:port, got '", address, "'");
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  STRATA_CHECK_ARG(
      !port.empty() && port.size() <= 5 &&
          std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
          std::stoi(port) <= 65535,
      "TcpStore: expected a port number 0-65535 in '", address, "', got '", port, "'");
  return {host, port};
}

std::vector<int> pick_free_ports(int n) {
  std::vector<UniqueFd> sockets;  // held open so the n ports are distinct
  std::vector<int> ports;
  for (int i = 0; i < n; ++i) {
    UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    STRATA_CHECK(UNAVAILABLE, s.valid(),
                 "pick_free_ports: socket() failed: ", std::strerror(errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    STRATA_CHECK(UNAVAILABLE,
                 ::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                     ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0,
                 "pick_free_ports: bind(127.0.0.1:0) failed: ", std::strerror(errno));
    ports.push_back(ntohs(addr.sin_port));
    sockets.push_back(std::move(s));
  }
  return ports;
}

}  // namespace strata::cluster
