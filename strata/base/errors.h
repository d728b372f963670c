#pragma once
// Strata's error model: one exception class per TensorFlow error code.
//
// Every failure a caller can cause or observe is thrown as a subclass of
// strata::Error whose code() matches tf.errors / google.rpc.Code. Messages follow
// "<who>: expected <what>, got <actual>" and print the offending values.
//
//   try {
//     auto t = strata::reshape(x, {7});
//   } catch (const strata::InvalidArgumentError& e) {
//     std::cerr << e.what();   // "reshape: expected 6 elements for shape [7], got ..."
//   }
//
// STRATA_CHECK_ARG(cond, parts...) throws InvalidArgumentError built from the
// streamed parts; STRATA_CHECK(Code, cond, parts...) throws the class of that
// code; STRATA_INTERNAL_CHECK(cond, parts...) is for bugs, never the caller's
// fault. All classes are immutable and safe to copy across threads.

#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>

#include "strata/base/str_cat.h"

namespace strata {

// Values equal google.rpc.Code, as TensorFlow's error codes.
enum class ErrorCode : int {
  OK = 0,
  CANCELLED = 1,
  UNKNOWN = 2,
  INVALID_ARGUMENT = 3,
  DEADLINE_EXCEEDED = 4,
  NOT_FOUND = 5,
  ALREADY_EXISTS = 6,
  PERMISSION_DENIED = 7,
  RESOURCE_EXHAUSTED = 8,
  FAILED_PRECONDITION = 9,
  ABORTED = 10,
  OUT_OF_RANGE = 11,
  UNIMPLEMENTED = 12,
  INTERNAL = 13,
  UNAVAILABLE = 14,
  DATA_LOSS = 15,
  UNAUTHENTICATED = 16,
};

// "INVALID_ARGUMENT", ... as TensorFlow spells the code.
std::string_view error_code_name(ErrorCode code) noexcept;

// Base of every Strata exception. what() is "<message>"; code() the TF code.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const noexcept { return code_; }
  // The message without decoration (same as what()).
  std::string_view message() const noexcept { return what(); }

 private:
  ErrorCode code_;
};

#define STRATA_DECLARE_ERROR_CLASS(Name, Code)                          \
  class Name : public Error {                                           \
   public:                                                              \
    explicit Name(const std::string& message) : Error(Code, message) {} \
  };

STRATA_DECLARE_ERROR_CLASS(CancelledError, ErrorCode::CANCELLED)
STRATA_DECLARE_ERROR_CLASS(UnknownError, ErrorCode::UNKNOWN)
STRATA_DECLARE_ERROR_CLASS(InvalidArgumentError, ErrorCode::INVALID_ARGUMENT)
STRATA_DECLARE_ERROR_CLASS(DeadlineExceededError, ErrorCode::DEADLINE_EXCEEDED)
STRATA_DECLARE_ERROR_CLASS(NotFoundError, ErrorCode::NOT_FOUND)
STRATA_DECLARE_ERROR_CLASS(AlreadyExistsError, ErrorCode::ALREADY_EXISTS)
STRATA_DECLARE_ERROR_CLASS(PermissionDeniedError, ErrorCode::PERMISSION_DENIED)
STRATA_DECLARE_ERROR_CLASS(ResourceExhaustedError, ErrorCode::RESOURCE_EXHAUSTED)
STRATA_DECLARE_ERROR_CLASS(FailedPreconditionError, ErrorCode::FAILED_PRECONDITION)
STRATA_DECLARE_ERROR_CLASS(AbortedError, ErrorCode::ABORTED)
STRATA_DECLARE_ERROR_CLASS(OutOfRangeError, ErrorCode::OUT_OF_RANGE)
STRATA_DECLARE_ERROR_CLASS(UnimplementedError, ErrorCode::UNIMPLEMENTED)
STRATA_DECLARE_ERROR_CLASS(InternalError, ErrorCode::INTERNAL)
STRATA_DECLARE_ERROR_CLASS(UnavailableError, ErrorCode::UNAVAILABLE)
STRATA_DECLARE_ERROR_CLASS(DataLossError, ErrorCode::DATA_LOSS)
STRATA_DECLARE_ERROR_CLASS(UnauthenticatedError, ErrorCode::UNAUTHENTICATED)

#undef STRATA_DECLARE_ERROR_CLASS

// Throws the subclass matching `code` (Error itself for OK/unknown values).
[[noreturn]] void throw_error(ErrorCode code, const std::string& message);

// Re-throws `e` if it holds an exception; used when carrying errors across
// threads (the exception keeps its dynamic type).
inline void rethrow_if(const std::exception_ptr& e) {
  if (e) std::rethrow_exception(e);
}

}  // namespace strata

#define STRATA_CHECK(code, cond, ...)                                                   \
  do {                                                                                  \
    if (!(cond)) [[unlikely]]                                                           \
      ::strata::throw_error(::strata::ErrorCode::code, ::strata::str_cat(__VA_ARGS__)); \
  } while (false)

#define STRATA_CHECK_ARG(cond, ...) STRATA_CHECK(INVALID_ARGUMENT, cond, __VA_ARGS__)

#define STRATA_INTERNAL_CHECK(cond, ...)                                                  \
  do {                                                                                    \
    if (!(cond)) [[unlikely]]                                                             \
      ::strata::throw_error(::strata::ErrorCode::INTERNAL,                                \
                            ::strata::str_cat("internal check failed at ", __FILE__, ":", \
                                              __LINE__, ": " #cond " ", ##__VA_ARGS__));  \
  } while (false)
