#pragma once
// expect_error: asserts that a call raises a strata::Error of one code whose
// message names the offending values.
//
//   strata::testing::expect_error([&] { v.shard_of(13); }, strata::ErrorCode::INVALID_ARGUMENT,
//                                 {"row 13", "[0, 13)"});
//
// Records a gtest failure (never throws) when `fn` returns normally, raises
// another code or another exception type, or when a needle is missing from
// the message. Thread-safety: as gtest's assertions.

#include <functional>
#include <string>
#include <vector>

#include "strata/base/errors.h"

namespace strata::testing {

void expect_error(const std::function<void()>& fn, ErrorCode code,
                  const std::vector<std::string>& needles);

// expect_error(fn, ErrorCode::INVALID_ARGUMENT, needles).
void expect_invalid_argument(const std::function<void()>& fn,
                             const std::vector<std::string>& needles);

}  // namespace strata::testing
