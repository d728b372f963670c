#include "strata/collective/internal/signature.h"

#include <sstream>

#include "strata/base/errors.h"
#include "strata/collective/internal/reduce.h"

namespace strata::collective::internal {

const char* kind_name(CollectiveKind kind) noexcept {
  switch (kind) {
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::broadcast: return "broadcast";
    case CollectiveKind::barrier: return "barrier";
  }
  return "?";
}

CallSignature CallSignature::of(CollectiveKind kind, ReduceOp op, int root,
                                std::span<const Tensor> tensors) {
  CallSignature sig;
  sig.kind = kind;
  sig.op = op;
  sig.root = root;
  sig.tensors.reserve(tensors.size());
  for (const Tensor& t : tensors) {
    TensorSignature ts;
    ts.defined = t.defined();
    if (ts.defined) {
      ts.dtype = t.dtype();
      const DimsView dims = t.shape().dims();
      ts.dims.assign(dims.begin(), dims.end());
    }
    sig.tensors.push_back(std::move(ts));
  }
  return sig;
}

namespace {

bool uses_op(CollectiveKind kind) {
  return kind == CollectiveKind::all_reduce || kind == CollectiveKind::reduce_scatter;
}

bool same_tensor(const TensorSignature& a, const TensorSignature& b, bool ignore_dim0) {
  if (a.defined != b.defined) return false;
  if (!a.defined) return true;
  if (a.dtype != b.dtype || a.dims.size() != b.dims.size()) return false;
  for (size_t i = ignore_dim0 ? 1 : 0; i < a.dims.size(); ++i) {
    if (a.dims[i] != b.dims[i]) return false;
  }
  return true;
}

void describe(std::ostringstream& os, const TensorSignature& t) {
  if (!t.defined) {
    os << "<undefined tensor>";
    return;
  }
  os << dtype_name(t.dtype) << '[';
  for (size_t i = 0; i < t.dims.size(); ++i) os << (i ? ", " : "") << t.dims[i];
  os << ']';
}

}  // namespace

bool CallSignature::matches(const CallSignature& other) const {
  if (kind != other.kind || tensors.size() != other.tensors.size()) return false;
  if (uses_op(kind) && op != other.op) return false;
  if (kind == CollectiveKind::broadcast && root != other.root) return false;
  const bool ignore_dim0 = kind == CollectiveKind::all_gather;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!same_tensor(tensors[i], other.tensors[i], ignore_dim0)) return false;
  }
  return true;
}

uint64_t CallSignature::hash() const {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(static_cast<uint64_t>(kind));
  if (uses_op(kind)) mix(static_cast<uint64_t>(op));
  if (kind == CollectiveKind::broadcast) mix(static_cast<uint64_t>(static_cast<int64_t>(root)));
  mix(tensors.size());
  const bool ignore_dim0 = kind == CollectiveKind::all_gather;
  for (const TensorSignature& t : tensors) {
    mix(t.defined ? 1 : 0);
    if (!t.defined) continue;
    mix(static_cast<uint64_t>(t.dtype));
    mix(t.dims.size());
    for (size_t i = ignore_dim0 ? 1 : 0; i < t.dims.size(); ++i)
      mix(static_cast<uint64_t>(t.dims[i]));
  }
  return h;
}

std::string CallSignature::to_string() const {
  std::ostringstream os;
  os << kind_name(kind) << '(';
  bool comma = false;
  if (uses_op(kind)) {
    os << reduce_op_name(op);
    comma = true;
  }
  if (kind == CollectiveKind::broadcast) {
    os << "root " << root;
    comma = true;
  }
  if (kind == CollectiveKind::all_reduce) {
    os << (comma ? ", " : "") << '[';
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (i) os << ", ";
      describe(os, tensors[i]);
    }
    os << ']';
  } else {
    for (const TensorSignature& t : tensors) {
      os << (comma ? ", " : "");
      describe(os, t);
      comma = true;
    }
  }
  os << ')';
  return os.str();
}

void CallSignature::validate(const char* who, int size) const {
  for (size_t i = 0; i < tensors.size(); ++i) {
    STRATA_CHECK_ARG(tensors[i].defined, who, ": ", kind_name(kind),
                     ": expected defined tensors, got an empty handle at position ", i);
    const DType d = tensors[i].dtype;
    if (uses_op(kind)) {
      STRATA_CHECK_ARG(is_reducible(d), who, ": ", kind_name(kind),
                       ": expected a float32, float64, int32 or int64 tensor, got ", dtype_name(d),
                       " at position ", i);
    } else {
      STRATA_CHECK_ARG(is_numeric(d), who, ": ", kind_name(kind),
                       ": expected a numeric tensor, got ", dtype_name(d));
    }
  }
  switch (kind) {
    case CollectiveKind::all_gather:
      STRATA_CHECK_ARG(!tensors[0].dims.empty(), who,
                       ": all_gather: expected a tensor of rank >= 1, got a scalar");
      break;
    case CollectiveKind::reduce_scatter: {
      const auto& dims = tensors[0].dims;
      STRATA_CHECK_ARG(!dims.empty() && dims[0] % size == 0, who,
                       ": reduce_scatter: expected dimension 0 divisible by the group size ", size,
                       ", got shape ", dims);
      break;
    }
    case CollectiveKind::broadcast:
      STRATA_CHECK_ARG(root >= 0 && root < size, who, ": broadcast: expected root in [0, ", size,
                       "), got ", root);
      break;
    case CollectiveKind::all_reduce:
    case CollectiveKind::barrier: break;
  }
}

std::string mismatch_message(const char* who, uint64_t call, int rank_a, const std::string& a,
                             int rank_b, const std::string& b) {
  return str_cat(who, ": mismatched collectives at call #", call, ": rank ", rank_a, " called ", a,
                 " but rank ", rank_b, " called ", b);
}

}  // namespace strata::collective::internal
