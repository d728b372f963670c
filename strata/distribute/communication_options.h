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
//
// Strata's extensions follow TensorFlow's fields (so TF's designated
// initializers keep compiling):
// deterministic_reduction: a training step gives bit-identical weights for
// any number of replicas R (in one process or across workers) for the same
// global batch and seed (docs/determinism.md). Keras's train_step splits the
// global batch into deterministic_micro_batches (M) equal virtual
// micro-batches, M/R per replica, computes each one's gradients on its own
// (its loss scaled by the global batch), and the gradients are summed in one
// fixed pairwise tree over the M micro-batches: locally over a replica's
// block, then across replicas by an all-gather and the same tree.
// ReplicaContext::all_reduce of SUM/MEAN then sums in that fixed tree over
// the replicas too. M must be a power of two and a multiple of R
// (InvalidArgumentError when the strategy is built). Every kernel must also
// be deterministic: the strategy turns on config::enable_op_determinism().
// Across workers every worker reads every global batch (the input is not
// sharded by file) and keeps its contiguous part of it.
// check_divergence_every_n_steps (N > 0): every N-th strategy.run, every
// replica of every worker fingerprints (CRC-32C) each of its copies of every
// MirroredVariable and all compare them; copies that differ make run raise
// DataLossError on every worker naming the variable, the step and which
// replicas hold which fingerprint (docs/divergence.md). 0 = never.
// shared_memory (MultiWorkerMirroredStrategy; with AUTO and RING alike):
// AUTO, the default, lets workers that run on one host exchange through
// shared memory (collective/shm_collectives.h) instead of TCP: all workers on
// one host -> shared memory only; workers on several hosts, some of them
// sharing one -> shared memory within each host and Gloo across one leader
// per host (collective/host_hierarchical_collectives.h); one worker per host
// -> Gloo only. Workers are on one host when they publish the same host
// identity at the rendezvous (collective::shm_host_identity: hostname, boot
// id, the /dev/shm file system and user; STRATA_HOST_ID overrides it). OFF
// keeps every exchange on Gloo over TCP. MirroredStrategy (one process)
// ignores it. multi_worker_mirrored_strategy.h says which transport was chosen.
// shard_weight_update: the Keras optimizers' apply_gradients shards the
// weight update across the replicas (XLA's "Automatic Cross-Replica Sharding
// of Weight Update in Data-Parallel Training"): the gradients are
// reduce-scattered, replica r applies the update to its 1/R of every
// variable and of its slots, and the new values are all-gathered into every
// copy; the result is bit-identical to the unsharded update. Each replica's
// copy of a slot stores only its 1/R (keras/optimizer.h). Replicas that
// are threads of one process (MirroredStrategy) sum their blocks straight
// from each other's gradients and read each other's new blocks in place
// (weight_update_sharding.h), not through the collectives. Off by default:
// every configuration measured (one process, 2 workers over TCP or shared
// memory) spent more CPU per step sharded and none was faster; what it buys
// is slot memory (docs/PERFORMANCE.md).
// overlap_gradient_reduction (MultiWorkerMirroredStrategy with two or more
// workers; every other strategy ignores it): the gradients' all-reduce runs
// during the backward pass, as PyTorch DDP's buckets. While tape.gradient of
// variables runs on a replica thread, each gradient joins a bucket as soon as
// the backward pass has finished it; a bucket of gradient_bucket_bytes or
// more (the pass's last one: whatever is left) is all-reduced at once on the
// replica's communication thread. tape.gradient still returns the local
// gradients (TF's semantics); apply_gradients' all-reduce (any
// ReplicaContext::all_reduce SUM) whose values are exactly the gradients the
// tape returned, unchanged, takes the sums already computed instead of
// reducing again. When the user changed them (clipping, scaling, another
// list) on any replica, every replica drops the early sums and reduces its
// values as without the option (one small agreement all-reduce per such
// call decides it, so the workers never diverge). The sums are the same bits
// either way with two replicas (a + b), and with more as long as the
// reduction order of the group does not depend on how the values are packed
// (it does for a ring over three or more ranks: bucket boundaries move the
// ring's chunks, as bytes_per_pack does). Failures are those of the group:
// a worker that dies or never enters a bucket's all-reduce makes the others'
// apply_gradients raise the group's named error (UnavailableError,
// DeadlineExceededError naming the task) within the timeout. Ignored under
// deterministic_reduction (its own reduction order). On by default: across
// 2 worker processes it made the CNN's step 1.1-1.3x faster over shared
// memory and Gloo alike, and the MLP's 1.5x over Gloo (over shared memory
// the MLP's difference was within the noise), docs/PERFORMANCE.md. A step
// that computes gradients of variables without all-reducing them pays for
// their reduction anyway: turn it off there.
// gradient_bucket_bytes: the bucket size above, 256 KiB by default
// (PyTorch's bucket_cap_mb is 25 MiB, for GPUs; Strata's CPU models hold a
// few MiB of gradients: 1 MiB already made one bucket of the MLP's and the
// CNN's, so nothing overlapped, while 64 and 256 KiB measured alike, and the
// larger one issues fewer collectives for models of many small layers).

#include <cstdint>
#include <optional>
#include <string_view>

namespace strata::distribute {

enum class CommunicationImplementation { AUTO, RING, NCCL };
std::string_view communication_implementation_name(CommunicationImplementation i) noexcept;

// Whether co-located workers exchange through shared memory (see above).
enum class SharedMemory { AUTO, OFF };

struct CommunicationOptions {
  int64_t bytes_per_pack = 0;
  std::optional<double> timeout_seconds = std::nullopt;
  CommunicationImplementation implementation = CommunicationImplementation::AUTO;
  // Strata extensions (see above).
  bool deterministic_reduction = false;
  int deterministic_micro_batches = 8;
  int64_t check_divergence_every_n_steps = 0;
  SharedMemory shared_memory = SharedMemory::AUTO;
  bool shard_weight_update = false;
  bool overlap_gradient_reduction = true;
  int64_t gradient_bucket_bytes = int64_t{256} << 10;
};

// What overlap_gradient_reduction did (ReplicatedStrategy::gradient_overlap_counts).
struct GradientOverlapCounts {
  int64_t buckets = 0;    // bucket all-reduces started during backward passes
  int64_t used = 0;       // all-reduces answered from them
  int64_t discarded = 0;  // backward passes whose early reduction was not used
};

// InvalidArgumentError for a negative bytes_per_pack, a non-positive
// timeout, deterministic_micro_batches that is not a power of two (>= 1) or a
// negative check_divergence_every_n_steps; UnimplementedError for NCCL.
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
