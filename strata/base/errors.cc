#include "strata/base/errors.h"

#include <utility>

namespace strata {

std::string_view error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::OK: return "OK";
    case ErrorCode::CANCELLED: return "CANCELLED";
    case ErrorCode::UNKNOWN: return "UNKNOWN";
    case ErrorCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case ErrorCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case ErrorCode::NOT_FOUND: return "NOT_FOUND";
    case ErrorCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case ErrorCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case ErrorCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case ErrorCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case ErrorCode::ABORTED: return "ABORTED";
    case ErrorCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case ErrorCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case ErrorCode::INTERNAL: return "INTERNAL";
    case ErrorCode::UNAVAILABLE: return "UNAVAILABLE";
    case ErrorCode::DATA_LOSS: return "DATA_LOSS";
    case ErrorCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(message), code_(code) {}

void throw_error(ErrorCode code, const std::string& message) {
  switch (code) {
    case ErrorCode::CANCELLED: throw CancelledError(message);
    case ErrorCode::UNKNOWN: throw UnknownError(message);
    case ErrorCode::INVALID_ARGUMENT: throw InvalidArgumentError(message);
    case ErrorCode::DEADLINE_EXCEEDED: throw DeadlineExceededError(message);
    case ErrorCode::NOT_FOUND: throw NotFoundError(message);
    case ErrorCode::ALREADY_EXISTS: throw AlreadyExistsError(message);
    case ErrorCode::PERMISSION_DENIED: throw PermissionDeniedError(message);
    case ErrorCode::RESOURCE_EXHAUSTED: throw ResourceExhaustedError(message);
    case ErrorCode::FAILED_PRECONDITION: throw FailedPreconditionError(message);
    case ErrorCode::ABORTED: throw AbortedError(message);
    case ErrorCode::OUT_OF_RANGE: throw OutOfRangeError(message);
    case ErrorCode::UNIMPLEMENTED: throw UnimplementedError(message);
    case ErrorCode::INTERNAL: throw InternalError(message);
    case ErrorCode::UNAVAILABLE: throw UnavailableError(message);
    case ErrorCode::DATA_LOSS: throw DataLossError(message);
    case ErrorCode::UNAUTHENTICATED: throw UnauthenticatedError(message);
    case ErrorCode::OK: break;
  }
  throw Error(code, message);
}

}  // namespace strata
