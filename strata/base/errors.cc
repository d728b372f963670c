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

Error::Error(ErrorCode code, std::string message)
    : std::runtime_error(std::move(message)), code_(code) {}

void throw_error(ErrorCode code, std::string message) {
  switch (code) {
    case ErrorCode::CANCELLED: throw CancelledError(std::move(message));
    case ErrorCode::UNKNOWN: throw UnknownError(std::move(message));
    case ErrorCode::INVALID_ARGUMENT: throw InvalidArgumentError(std::move(message));
    case ErrorCode::DEADLINE_EXCEEDED: throw DeadlineExceededError(std::move(message));
    case ErrorCode::NOT_FOUND: throw NotFoundError(std::move(message));
    case ErrorCode::ALREADY_EXISTS: throw AlreadyExistsError(std::move(message));
    case ErrorCode::PERMISSION_DENIED: throw PermissionDeniedError(std::move(message));
    case ErrorCode::RESOURCE_EXHAUSTED: throw ResourceExhaustedError(std::move(message));
    case ErrorCode::FAILED_PRECONDITION: throw FailedPreconditionError(std::move(message));
    case ErrorCode::ABORTED: throw AbortedError(std::move(message));
    case ErrorCode::OUT_OF_RANGE: throw OutOfRangeError(std::move(message));
    case ErrorCode::UNIMPLEMENTED: throw UnimplementedError(std::move(message));
    case ErrorCode::INTERNAL: throw InternalError(std::move(message));
    case ErrorCode::UNAVAILABLE: throw UnavailableError(std::move(message));
    case ErrorCode::DATA_LOSS: throw DataLossError(std::move(message));
    case ErrorCode::UNAUTHENTICATED: throw UnauthenticatedError(std::move(message));
    case ErrorCode::OK: break;
  }
  throw Error(code, std::move(message));
}

}  // namespace strata
