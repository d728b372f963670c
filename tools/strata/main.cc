// The `strata` program. Until `strata train` exists (issue 9) it runs a short
// demo of the runtime: devices, a few ops, printing.
#include <cstring>
#include <exception>
#include <iostream>

#include "strata/strata.h"

int main(int argc, char** argv) {
  try {
    if (argc > 1 && std::strcmp(argv[1], "--help") == 0) {
      std::cout << "usage: strata [demo]\n";
      return 0;
    }
    for (const auto& d : strata::config::list_logical_devices("CPU")) {
      std::cout << "device: " << d.name << "\n";
    }
    strata::Tensor t = strata::constant({1.f, 2.f, 3.f, 4.f}, {2, 2});
    std::cout << t << "\n";
    return 0;
  } catch (const strata::Error& e) {
    std::cerr << "strata: " << strata::error_code_name(e.code()) << ": " << e.what() << "\n";
    return 1;
  }
}
