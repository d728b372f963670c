#pragma once
// tf.distribute.experimental.CommunicationOptions: how a strategy's
// all-reduces are carried out.
//
//   sd::CommunicationOptions options{.bytes_per_pack = 32 << 20, .timeout_seconds = 60,
//                                    .implementation = sd::CommunicationImplementation::RING};
//   sd::MultiWorkerMirroredStrategy mw({.communication_options = options});
//   sd::MirroredStrategy mirrored({"CPU:0", "CPU:1"}, options);   // Strata extension
//
// bytes_per_pack: a list of tensors reduced together (the gradients of a
// step) is split, in order, into packs of at most this many bytes, one
// collective per pack; 0 means one pack for everything (TF's default). A
// tensor bigger than a pack forms a pack of its own.
// timeout_seconds: the longest any collective waits for the other replicas
// (TF's default is no timeout; Strata always bounds waits, default 600 s).
// implementation: AUTO and RING both mean the in-process reduce-scatter +
// all-gather locally and Gloo's ring across processes; NCCL needs GPUs and is
// UnimplementedError here. Field order is TensorFlow's.

#include <cstdint>
#include <optional>
#include <string_view>

namespace strata::distribute {

enum class CommunicationImplementation { AUTO, RING, NCCL };
std::string_view communication_implementation_name(CommunicationImplementation i) noexcept;

struct CommunicationOptions {
  int64_t bytes_per_pack = 0;
  std::optional<double> timeout_seconds = std::nullopt;
  CommunicationImplementation implementation = CommunicationImplementation::AUTO;
};

// InvalidArgumentError for a negative bytes_per_pack or a non-positive
// timeout; UnimplementedError for NCCL.
void validate(const CommunicationOptions& options);
// The timeout in milliseconds (600 s when unset).
int64_t collective_timeout_ms(const CommunicationOptions& options);

// TensorFlow spells these tf.distribute.experimental.CommunicationOptions and
// tf.distribute.experimental.CommunicationImplementation; both spellings work.
namespace experimental {
using CommunicationImplementation = distribute::CommunicationImplementation;
using CommunicationOptions = distribute::CommunicationOptions;
}  // namespace experimental

}  // namespace strata::distribute
