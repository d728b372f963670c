#pragma once
// Ranks on threads, as Gloo's tests run them: one function per rank, each on
// its own thread, and what each rank threw. Collective groups, stores and
// multi-worker strategies whose workers are threads of one process are tested
// this way.
//
//   auto errors = strata::testing::run_ranks(3, [&](int r) { group.barrier(r); });
//   EXPECT_THAT(errors, Each(IsNull()));
//   strata::testing::run_ranks_ok(2, [&](int r) { group.all_reduce(r, t, ReduceOp::SUM); });
//
// Test-only (strata/testing is not installed). Thread-safe.

#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "strata/base/errors.h"

namespace strata::testing {

// Runs fn(0..n-1) on n threads, joins them and returns each rank's exception
// (nullptr when it returned normally).
inline std::vector<std::exception_ptr> run_ranks(int n, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errors(n);
  {
    std::vector<std::jthread> threads;
    threads.reserve(n);
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        try {
          fn(r);
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
    }
  }
  return errors;
}

// Rethrows the first error (for tests where every rank must succeed).
inline void run_ranks_ok(int n, const std::function<void(int)>& fn) {
  for (const auto& e : run_ranks(n, fn)) rethrow_if(e);
}

// The code and message of an exception_ptr holding a strata::Error.
struct Caught {
  ErrorCode code = ErrorCode::OK;
  std::string message;
};
inline Caught caught(const std::exception_ptr& e) {
  if (!e) return {};
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    return {err.code(), err.what()};
  } catch (const std::exception& err) {
    return {ErrorCode::UNKNOWN, err.what()};
  }
}

}  // namespace strata::testing
