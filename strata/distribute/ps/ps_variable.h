#pragma once
// Variables of ParameterServerStrategy: they live on ps tasks and every other
// process holds a handle that reads and updates them over gRPC.
//
//   strata::Variable w;
//   { auto scope = strategy.scope(); w = strata::Variable(strata::zeros({3, 1})); }
//   w.device();                       // "/job:ps/replica:0/task:0/device:CPU:0"
//   w.assign_add(delta);              // executed on the ps (one UpdateVariable RPC)
//   {
//     sd::ps::CacheVariableReads cache;   // reads on this thread: one RPC per variable
//     w.value(); w.value();
//   }
//
// Reads fetch the ps's current value (ReadVariable); assign / assign_add /
// assign_sub send the value or delta and the ps applies it under its own lock,
// so concurrent updates from several workers are each applied whole (TF's
// asynchronous training: no update is lost, reads may be stale by the time
// they are used). Every RPC has a deadline (the strategy's rpc_timeout); a ps
// that cannot be reached raises UnavailableError (DeadlineExceededError when
// it stopped answering) naming the ps and the variable.
//
// Thread-safety: thread-safe (the read cache is per thread).

#include <map>
#include <memory>
#include <string>

#include "strata/core/variable.h"

namespace strata::distribute::ps {

bool is_ps_variable(const Variable& v);
// The address of the ps task holding `v`; InvalidArgumentError for another variable.
std::string ps_target_of(const Variable& v);

// TF's cache_variable_reads scope: while it lives, the first read of a ps
// variable on this thread fetches it and later reads reuse the copy; an
// update made through this thread refreshes the copy with the ps's new value.
// Scopes nest (the inner one starts with an empty cache). One thread only.
class CacheVariableReads {
 public:
  CacheVariableReads();
  ~CacheVariableReads();
  CacheVariableReads(const CacheVariableReads&) = delete;
  CacheVariableReads& operator=(const CacheVariableReads&) = delete;

  // Number of reads that went to a ps while this scope was innermost.
  int64_t remote_reads() const noexcept { return remote_reads_; }

 private:
  friend class PsVariableAccess;
  std::map<const void*, Tensor> cache_;
  CacheVariableReads* outer_;
  int64_t remote_reads_ = 0;
};

}  // namespace strata::distribute::ps
