#pragma once
// Test-only helpers of tpu_test (internal/: not installed).

#include <exception>
#include <string>

namespace strata::tpu::testing {

// The what() of the E that f() throws; "no exception" or "wrong exception
// type: ..." otherwise, so a HasSubstr matcher on the result fails readably.
template <typename E, typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no exception";
}

}  // namespace strata::tpu::testing
