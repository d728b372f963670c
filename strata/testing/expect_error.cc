#include "strata/testing/expect_error.h"

#include <gtest/gtest.h>

namespace strata::testing {

void expect_error(const std::function<void()>& fn, ErrorCode code,
                  const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "expected an error with code " << static_cast<int>(code)
                  << ", the call returned normally";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& n : needles) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "missing '" << n << "' in: " << e.what();
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a strata::Error, got: " << e.what();
  }
}

void expect_invalid_argument(const std::function<void()>& fn,
                             const std::vector<std::string>& needles) {
  expect_error(fn, ErrorCode::INVALID_ARGUMENT, needles);
}

}  // namespace strata::testing
