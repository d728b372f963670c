#include "strata/distribute/communication_options.h"

#include <cmath>

#include "strata/base/errors.h"

namespace strata::distribute {

std::string_view communication_implementation_name(CommunicationImplementation i) noexcept {
  switch (i) {
    case CommunicationImplementation::AUTO: return "AUTO";
    case CommunicationImplementation::RING: return "RING";
    case CommunicationImplementation::NCCL: return "NCCL";
  }
  return "?";
}

void validate(const CommunicationOptions& options) {
  STRATA_CHECK_ARG(options.bytes_per_pack >= 0,
                   "CommunicationOptions: bytes_per_pack must be non-negative, got ",
                   options.bytes_per_pack);
  if (options.timeout_seconds) {
    STRATA_CHECK_ARG(std::isfinite(*options.timeout_seconds) && *options.timeout_seconds > 0,
                     "CommunicationOptions: timeout_seconds must be positive, got ",
                     *options.timeout_seconds);
  }
  const int m = options.deterministic_micro_batches;
  STRATA_CHECK_ARG(m >= 1 && (m & (m - 1)) == 0,
                   "CommunicationOptions: deterministic_micro_batches must be a power of two "
                   "(1, 2, 4, ...), got ",
                   m);
  STRATA_CHECK_ARG(options.check_divergence_every_n_steps >= 0,
                   "CommunicationOptions: check_divergence_every_n_steps must be non-negative "
                   "(0 = never), got ",
                   options.check_divergence_every_n_steps);
  STRATA_CHECK_ARG(options.gradient_bucket_bytes > 0,
                   "CommunicationOptions: gradient_bucket_bytes must be positive, got ",
                   options.gradient_bucket_bytes);
  if (options.implementation == CommunicationImplementation::NCCL) {
    throw UnimplementedError(
        "CommunicationOptions: implementation NCCL needs GPUs; Strata's devices use RING (or "
        "AUTO)");
  }
}

int64_t collective_timeout_ms(const CommunicationOptions& options) {
  return options.timeout_seconds ? static_cast<int64_t>(*options.timeout_seconds * 1000.0)
                                 : int64_t{600'000};
}

}  // namespace strata::distribute
