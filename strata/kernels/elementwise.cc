#include "strata/kernels/elementwise.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "strata/kernels/array.h"
#include "strata/kernels/internal/kernel_util.h"

namespace strata::kernels {
namespace {

using internal::kElementwiseGrain;
using internal::parallel_for;

template <typename T>
using Vec = Eigen::Array<T, Eigen::Dynamic, 1>;
template <typename T>
using ConstMap = Eigen::Map<const Vec<T>>;
template <typename T>
using MutMap = Eigen::Map<Vec<T>>;

// Output dims with per-operand element strides (0 along broadcast dims),
// size-1 dims dropped and mergeable neighbours coalesced, at least one dim.
// Dimension lists of a broadcast plan: up to kInline entries stored in place,
// so planning an op of rank <= 8 allocates nothing; longer ones on the heap.
class PlanDims {
 public:
  static constexpr int kInline = 8;
  explicit PlanDims(int n = 0, int64_t value = 0) {
    for (int i = 0; i < n; ++i) push_back(value);
  }
  void push_back(int64_t v) {
    if (size_ < kInline) {
      inline_[size_] = v;
    } else {
      if (size_ == kInline) heap_.assign(inline_.begin(), inline_.end());
      heap_.push_back(v);
    }
    ++size_;
  }
  int64_t& operator[](int i) { return size_ <= kInline ? inline_[i] : heap_[i]; }
  int64_t operator[](int i) const { return size_ <= kInline ? inline_[i] : heap_[i]; }
  int64_t& back() { return (*this)[size_ - 1]; }
  int size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

 private:
  std::array<int64_t, kInline> inline_{};
  std::vector<int64_t> heap_;
  int size_ = 0;
};

struct BroadcastPlan {
  PlanDims dims, sa, sb;
};

BroadcastPlan make_plan(const TensorShape& as, const TensorShape& bs, const TensorShape& out) {
  const int r = out.rank();
  BroadcastPlan plan;
  // Each operand's dims right-aligned to the output's rank, and their dense strides.
  auto aligned = [&](const TensorShape& s) {
    PlanDims d(r, 1);
    for (int i = 0; i < s.rank(); ++i) d[r - s.rank() + i] = s.dims()[i];
    return d;
  };
  auto strides = [&](const PlanDims& d) {
    PlanDims st(r, 0);
    int64_t acc = 1;
    for (int i = r - 1; i >= 0; --i) {
      st[i] = acc;
      acc *= d[i];
    }
    return st;
  };
  const PlanDims ad = aligned(as), bd = aligned(bs);
  const PlanDims ast = strides(ad), bst = strides(bd);
  PlanDims& dims = plan.dims;
  PlanDims& sa = plan.sa;
  PlanDims& sb = plan.sb;
  for (int i = 0; i < r; ++i) {
    if (out.dims()[i] == 1) continue;
    const int64_t s_a = ad[i] == 1 ? 0 : ast[i];
    const int64_t s_b = bd[i] == 1 ? 0 : bst[i];
    if (!dims.empty() && sa.back() == s_a * out.dims()[i] && sb.back() == s_b * out.dims()[i]) {
      dims.back() *= out.dims()[i];
      sa.back() = s_a;
      sb.back() = s_b;
    } else {
      dims.push_back(out.dims()[i]);
      sa.push_back(s_a);
      sb.push_back(s_b);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    sa.push_back(0);
    sb.push_back(0);
  }
  return plan;
}

// One contiguous run of the output: each operand is either a contiguous run
// (vec) or one element repeated.
template <typename T, typename O, typename F>
void run_span(const T* a, bool av, const T* b, bool bv, O* o, int64_t n, const F& f) {
  MutMap<O> out(o, n);
  if (av && bv) {
    out = f(ConstMap<T>(a, n), ConstMap<T>(b, n));
  } else if (av) {
    out = f(ConstMap<T>(a, n), Vec<T>::Constant(n, *b));
  } else if (bv) {
    out = f(Vec<T>::Constant(n, *a), ConstMap<T>(b, n));
  } else {
    out = f(Vec<T>::Constant(n, *a), Vec<T>::Constant(n, *b));
  }
}

template <typename T, typename O, typename F>
void run_binary(const BroadcastPlan& p, const T* a, const T* b, O* o, int64_t total, const F& f) {
  const int r = p.dims.size();
  const int64_t inner = p.dims[r - 1];
  const int64_t sa_in = p.sa[r - 1], sb_in = p.sb[r - 1];
  parallel_for(total, kElementwiseGrain, [&](int64_t s, int64_t e) {
    int64_t pos = s;
    while (pos < e) {
      const int64_t row = pos / inner, col = pos % inner;
      int64_t oa = 0, ob = 0, rem = row;
      for (int d = r - 2; d >= 0; --d) {
        const int64_t i = rem % p.dims[d];
        rem /= p.dims[d];
        oa += i * p.sa[d];
        ob += i * p.sb[d];
      }
      const int64_t n = std::min(inner - col, e - pos);
      run_span(a + oa + col * sa_in, sa_in != 0, b + ob + col * sb_in, sb_in != 0, o + pos, n, f);
      pos += n;
    }
  });
}

template <typename T>
bool contains_zero(const Tensor& t) {
  const T* p = t.data<T>();
  return std::find(p, p + t.num_elements(), T(0)) != p + t.num_elements();
}

template <typename T>
struct IntFloorDiv {
  T operator()(T a, T b) const {
    T q = a / b;
    if constexpr (std::is_signed_v<T>) {
      if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    }
    return q;
  }
};
template <typename T>
struct FloorModOp {
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      T r = std::fmod(a, b);
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    } else {
      T r = a % b;
      if constexpr (std::is_signed_v<T>) {
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
      }
      return r;
    }
  }
};
template <typename T>
struct PowOp {
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::pow(a, b);
    } else {
      T result = 1, base = a;
      auto e = b;
      while (e > 0) {
        if (e & 1) result = static_cast<T>(result * base);
        base = static_cast<T>(base * base);
        e >>= 1;
      }
      return result;
    }
  }
};

template <typename T>
Tensor binary_typed(BinaryOp op, const Tensor& a, const Tensor& b, const TensorShape& out_shape,
                    const char* who) {
  const BroadcastPlan plan = make_plan(a.shape(), b.shape(), out_shape);
  const int64_t n = out_shape.num_elements();
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  auto arith = [&](auto f) {
    Tensor out = Tensor::allocate(dtype_of<T>(), out_shape);
    run_binary(plan, pa, pb, out.mutable_data<T>(), n, f);
    return out;
  };
  auto compare = [&](auto f) {
    Tensor out = Tensor::allocate(DType::bool_, out_shape);
    run_binary(plan, pa, pb, out.mutable_data<bool>(), n, f);
    return out;
  };
  constexpr bool kIsBool = std::is_same_v<T, bool>;
  switch (op) {
    case BinaryOp::Equal: return compare([](const auto& x, const auto& y) { return x == y; });
    case BinaryOp::NotEqual: return compare([](const auto& x, const auto& y) { return x != y; });
    case BinaryOp::Less: return compare([](const auto& x, const auto& y) { return x < y; });
    case BinaryOp::LessEqual: return compare([](const auto& x, const auto& y) { return x <= y; });
    case BinaryOp::Greater: return compare([](const auto& x, const auto& y) { return x > y; });
    case BinaryOp::GreaterEqual:
      return compare([](const auto& x, const auto& y) { return x >= y; });
    case BinaryOp::LogicalAnd:
    case BinaryOp::LogicalOr:
      if constexpr (kIsBool) {
        if (op == BinaryOp::LogicalAnd)
          return arith([](const auto& x, const auto& y) { return x && y; });
        return arith([](const auto& x, const auto& y) { return x || y; });
      }
      throw InvalidArgumentError(
          str_cat(who, ": expected bool tensors, got dtype ", dtype_of<T>()));
    default: break;
  }
  if constexpr (kIsBool) {
    throw InvalidArgumentError(
        str_cat(who, ": expected numeric (non-bool) tensors, got dtype bool"));
  } else {
    constexpr bool kInt = !std::is_floating_point_v<T>;
    switch (op) {
      case BinaryOp::Add: return arith([](const auto& x, const auto& y) { return x + y; });
      case BinaryOp::Sub: return arith([](const auto& x, const auto& y) { return x - y; });
      case BinaryOp::Mul: return arith([](const auto& x, const auto& y) { return x * y; });
      case BinaryOp::Maximum: return arith([](const auto& x, const auto& y) { return x.max(y); });
      case BinaryOp::Minimum: return arith([](const auto& x, const auto& y) { return x.min(y); });
      case BinaryOp::SquaredDifference:
        return arith([](const auto& x, const auto& y) { return (x - y).square(); });
      case BinaryOp::Div:
        if constexpr (kInt) {
          STRATA_CHECK_ARG(!contains_zero<T>(b), who, ": integer division by zero");
        }
        return arith([](const auto& x, const auto& y) { return x / y; });
      case BinaryOp::FloorDiv:
        if constexpr (kInt) {
          STRATA_CHECK_ARG(!contains_zero<T>(b), who, ": integer division by zero");
          return arith(
              [](const auto& x, const auto& y) { return x.binaryExpr(y, IntFloorDiv<T>{}); });
        } else {
          return arith([](const auto& x, const auto& y) { return (x / y).floor(); });
        }
      case BinaryOp::FloorMod:
        if constexpr (kInt) {
          STRATA_CHECK_ARG(!contains_zero<T>(b), who, ": integer division by zero");
        }
        return arith([](const auto& x, const auto& y) { return x.binaryExpr(y, FloorModOp<T>{}); });
      case BinaryOp::Pow:
        if constexpr (kInt && std::is_signed_v<T>) {
          const T* e = pb;
          STRATA_CHECK_ARG(std::none_of(e, e + b.num_elements(), [](T v) { return v < 0; }), who,
                           ": integers to negative integer powers are not allowed");
        }
        return arith([](const auto& x, const auto& y) { return x.binaryExpr(y, PowOp<T>{}); });
      default: break;
    }
  }
  STRATA_INTERNAL_CHECK(false, "unhandled binary op");
  return {};
}

template <typename T, typename F>
Tensor map_unary(const Tensor& x, const F& f) {
  Tensor out = Tensor::allocate(x.dtype(), x.shape());
  const T* in = x.data<T>();
  T* o = out.mutable_data<T>();
  parallel_for(x.num_elements(), kElementwiseGrain, [&](int64_t s, int64_t e) {
    MutMap<T>(o + s, e - s) = f(ConstMap<T>(in + s, e - s));
  });
  return out;
}

template <typename T>
Tensor unary_typed(UnaryOp op, const Tensor& x, double alpha, const char* who) {
  if constexpr (std::is_same_v<T, bool>) {
    STRATA_CHECK_ARG(op == UnaryOp::LogicalNot, who,
                     ": expected a numeric (non-bool) tensor, got dtype bool");
    return map_unary<T>(x, [](const auto& v) { return !v; });
  } else {
    constexpr bool kFloat = std::is_floating_point_v<T>;
    switch (op) {
      case UnaryOp::LogicalNot:
        throw InvalidArgumentError(str_cat(who, ": expected a bool tensor, got dtype ", x.dtype()));
      case UnaryOp::Neg: return map_unary<T>(x, [](const auto& v) { return -v; });
      case UnaryOp::Abs:
        if constexpr (std::is_unsigned_v<T>)
          return map_unary<T>(x, [](const auto& v) { return v; });
        else
          return map_unary<T>(x, [](const auto& v) { return v.abs(); });
      case UnaryOp::Sign: return map_unary<T>(x, [](const auto& v) { return v.sign(); });
      case UnaryOp::Square: return map_unary<T>(x, [](const auto& v) { return v.square(); });
      case UnaryOp::Floor:
        if constexpr (kFloat)
          return map_unary<T>(x, [](const auto& v) { return v.floor(); });
        else
          return map_unary<T>(x, [](const auto& v) { return v; });
      case UnaryOp::Ceil:
        if constexpr (kFloat)
          return map_unary<T>(x, [](const auto& v) { return v.ceil(); });
        else
          return map_unary<T>(x, [](const auto& v) { return v; });
      case UnaryOp::Round:
        // rint rounds half to even in the default rounding mode, as TF's round.
        if constexpr (kFloat)
          return map_unary<T>(x, [](const auto& v) { return v.rint(); });
        else
          return map_unary<T>(x, [](const auto& v) { return v; });
      case UnaryOp::Relu: return map_unary<T>(x, [](const auto& v) { return v.max(T(0)); });
      case UnaryOp::Relu6:
        return map_unary<T>(x, [](const auto& v) { return v.max(T(0)).min(T(6)); });
      default: break;
    }
    if constexpr (!kFloat) {
      throw InvalidArgumentError(str_cat(
          who, ": expected a floating-point tensor (float32 or float64), got dtype ", x.dtype()));
    } else {
      const T a = static_cast<T>(alpha);
      switch (op) {
        case UnaryOp::Exp: return map_unary<T>(x, [](const auto& v) { return v.exp(); });
        case UnaryOp::Log: return map_unary<T>(x, [](const auto& v) { return v.log(); });
        case UnaryOp::Log1p: return map_unary<T>(x, [](const auto& v) { return v.log1p(); });
        case UnaryOp::Sqrt: return map_unary<T>(x, [](const auto& v) { return v.sqrt(); });
        case UnaryOp::Rsqrt: return map_unary<T>(x, [](const auto& v) { return v.rsqrt(); });
        case UnaryOp::Reciprocal: return map_unary<T>(x, [](const auto& v) { return v.inverse(); });
        case UnaryOp::Sin: return map_unary<T>(x, [](const auto& v) { return v.sin(); });
        case UnaryOp::Cos: return map_unary<T>(x, [](const auto& v) { return v.cos(); });
        case UnaryOp::LeakyRelu:
          return map_unary<T>(x, [a](const auto& v) { return (v > T(0)).select(v, v * a); });
        case UnaryOp::Elu:
          return map_unary<T>(x,
                              [a](const auto& v) { return (v > T(0)).select(v, v.expm1() * a); });
        case UnaryOp::Sigmoid: return map_unary<T>(x, [](const auto& v) { return v.logistic(); });
        case UnaryOp::Tanh: return map_unary<T>(x, [](const auto& v) { return v.tanh(); });
        case UnaryOp::Softplus:
          // max(x, 0) + log1p(exp(-|x|)): no overflow for large |x|.
          return map_unary<T>(x,
                              [](const auto& v) { return v.max(T(0)) + (-v.abs()).exp().log1p(); });
        default: break;
      }
    }
  }
  STRATA_INTERNAL_CHECK(false, "unhandled unary op");
  return {};
}

// --- reductions ---------------------------------------------------------------

// Fixed block size of full reductions: partial results are combined in block
// order, so the result does not depend on the thread count.
constexpr int64_t kReduceBlock = 1 << 16;

template <typename T>
T reduce_identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean: return T(0);
    case ReduceOp::Prod: return T(1);
    case ReduceOp::Max:
      return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::lowest();
    case ReduceOp::Min:
      return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::max();
  }
  return T(0);
}

template <typename T>
T redux(ReduceOp op, const T* p, int64_t n) {
  ConstMap<T> m(p, n);
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean: return m.sum();
    case ReduceOp::Prod: return m.prod();
    case ReduceOp::Max: return m.maxCoeff();
    case ReduceOp::Min: return m.minCoeff();
  }
  return T(0);
}

template <typename T>
T combine(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean: return static_cast<T>(a + b);
    case ReduceOp::Prod: return static_cast<T>(a * b);
    case ReduceOp::Max: return std::max(a, b);
    case ReduceOp::Min: return std::min(a, b);
  }
  return a;
}

template <typename T>
void combine_into(ReduceOp op, T* acc, const T* row, int64_t n) {
  MutMap<T> a(acc, n);
  ConstMap<T> r(row, n);
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean: a += r; break;
    case ReduceOp::Prod: a *= r; break;
    case ReduceOp::Max: a = a.max(r); break;
    case ReduceOp::Min: a = a.min(r); break;
  }
}

// x viewed as [outer, red, inner] -> out [outer, inner].
template <typename T>
void reduce3(ReduceOp op, const T* x, int64_t outer, int64_t red, int64_t inner, T* out) {
  const int64_t n_out = outer * inner;
  if (red == 0) {
    std::fill(out, out + n_out, reduce_identity<T>(op));
    return;
  }
  if (inner == 1 && outer == 1) {
    const int64_t blocks = (red + kReduceBlock - 1) / kReduceBlock;
    PooledVector<T> partial(blocks);  // scratch from the buffer cache
    parallel_for(blocks, 1, [&](int64_t s, int64_t e) {
      for (int64_t b = s; b < e; ++b) {
        const int64_t lo = b * kReduceBlock, hi = std::min(red, lo + kReduceBlock);
        partial[b] = redux(op, x + lo, hi - lo);
      }
    });
    T acc = partial[0];
    for (int64_t b = 1; b < blocks; ++b) acc = combine(op, acc, partial[b]);
    *out = acc;
    return;
  }
  if (inner == 1) {
    parallel_for(outer, std::max<int64_t>(1, kElementwiseGrain / red), [&](int64_t s, int64_t e) {
      for (int64_t o = s; o < e; ++o) out[o] = redux(op, x + o * red, red);
    });
    return;
  }
  parallel_for(n_out, std::max<int64_t>(16, kElementwiseGrain / red), [&](int64_t s, int64_t e) {
    int64_t pos = s;
    while (pos < e) {
      const int64_t o = pos / inner, i0 = pos % inner;
      const int64_t n = std::min(inner - i0, e - pos);
      const T* base = x + o * red * inner + i0;
      std::copy(base, base + n, out + pos);
      for (int64_t r = 1; r < red; ++r) combine_into(op, out + pos, base + r * inner, n);
      pos += n;
    }
  });
}

template <typename T>
Tensor reduce_typed(ReduceOp op, const Tensor& x, std::span<const int64_t> axes, bool keepdims) {
  const int rank = x.rank();
  // Scratch from the buffer cache (PoolAllocator): a step reduces the same shapes every step.
  PooledVector<bool> reduced(rank, false);
  for (int64_t a : axes) reduced[a] = true;
  PooledVector<int64_t> out_dims;
  for (int i = 0; i < rank; ++i) {
    if (!reduced[i])
      out_dims.push_back(x.shape().dims()[i]);
    else if (keepdims)
      out_dims.push_back(1);
  }
  const TensorShape out_shape(std::span<const int64_t>(out_dims.data(), out_dims.size()));
  // Groups of adjacent dims (size-1 dims dropped) with the same reduced flag.
  PooledVector<std::pair<int64_t, bool>> groups;
  int64_t red_count = 1;
  for (int i = 0; i < rank; ++i) {
    const int64_t d = x.shape().dims()[i];
    if (reduced[i]) red_count *= d;
    if (d == 1) continue;
    if (!groups.empty() && groups.back().second == reduced[i])
      groups.back().first *= d;
    else
      groups.emplace_back(d, reduced[i]);
  }
  int num_red_groups = 0;
  for (auto& g : groups) num_red_groups += g.second;
  Tensor src = x;
  int64_t outer = 1, red = 1, inner = 1;
  if (num_red_groups <= 1) {
    bool seen = false;
    for (auto& g : groups) {
      if (g.second) {
        red = g.first;
        seen = true;
      } else if (seen) {
        inner *= g.first;
      } else {
        outer *= g.first;
      }
    }
    if (x.num_elements() == 0) red = red_count, outer = out_shape.num_elements(), inner = 1;
  } else {
    PooledVector<int64_t> perm;
    for (int i = 0; i < rank; ++i)
      if (!reduced[i]) perm.push_back(i);
    for (int i = 0; i < rank; ++i)
      if (reduced[i]) perm.push_back(i);
    src = kernels::transpose(x, perm);
    outer = out_shape.num_elements();
    red = red_count;
  }
  Tensor out = Tensor::allocate(x.dtype(), out_shape);
  T* po = out.mutable_data<T>();
  reduce3(op, src.data<T>(), outer, red, inner, po);
  if (op == ReduceOp::Mean) {
    const int64_t n = out.num_elements();
    if (red_count == 0) {
      std::fill(po, po + n,
                std::numeric_limits<T>::has_quiet_NaN ? std::numeric_limits<T>::quiet_NaN() : T(0));
    } else {
      const T c = static_cast<T>(red_count);
      for (int64_t i = 0; i < n; ++i) po[i] = static_cast<T>(po[i] / c);
    }
  }
  return out;
}

template <typename T>
Tensor arg_reduce_typed(bool is_max, const Tensor& x, int axis) {
  const auto& dims = x.shape().dims();
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= dims[i];
  for (int i = axis + 1; i < x.rank(); ++i) inner *= dims[i];
  const int64_t n = dims[axis];
  Tensor out = Tensor::allocate(DType::int64, x.shape().removed(axis));
  const T* px = x.data<T>();
  int64_t* po = out.mutable_data<int64_t>();
  parallel_for(outer, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, n * inner)),
               [&](int64_t s, int64_t e) {
                 std::vector<T> best(inner);
                 for (int64_t o = s; o < e; ++o) {
                   const T* base = px + o * n * inner;
                   int64_t* idx = po + o * inner;
                   std::copy(base, base + inner, best.begin());
                   std::fill(idx, idx + inner, 0);
                   for (int64_t r = 1; r < n; ++r) {
                     const T* row = base + r * inner;
                     for (int64_t i = 0; i < inner; ++i) {
                       if (is_max ? row[i] > best[i] : row[i] < best[i]) {
                         best[i] = row[i];
                         idx[i] = r;
                       }
                     }
                   }
                 }
               });
  return out;
}

}  // namespace

TensorShape broadcast_shape(const TensorShape& a, const TensorShape& b, const char* who) {
  if (a == b) return a;
  const int r = std::max(a.rank(), b.rank());
  PooledVector<int64_t> out(r);
  for (int i = 0; i < r; ++i) {
    const int ia = a.rank() - r + i, ib = b.rank() - r + i;
    const int64_t da = ia >= 0 ? a.dims()[ia] : 1;
    const int64_t db = ib >= 0 ? b.dims()[ib] : 1;
    STRATA_CHECK_ARG(da == db || da == 1 || db == 1, who,
                     ": expected broadcast-compatible shapes, got ", a, " and ", b);
    out[i] = da == 1 ? db : da;
  }
  return TensorShape(std::span<const int64_t>(out.data(), out.size()));
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const char* who) {
  STRATA_INTERNAL_CHECK(a.dtype() == b.dtype(), "binary kernel on different dtypes");
  const TensorShape out_shape = broadcast_shape(a.shape(), b.shape(), who);
  if (a.dtype() == DType::string) {
    throw InvalidArgumentError(str_cat(who, ": expected numeric tensors, got dtype string"));
  }
  return dispatch_numeric(
      a.dtype(), [&](auto t) { return binary_typed<decltype(t)>(op, a, b, out_shape, who); });
}

Tensor unary(UnaryOp op, const Tensor& x, double alpha, const char* who) {
  STRATA_CHECK_ARG(x.dtype() != DType::string, who,
                   ": expected a numeric tensor, got dtype string");
  return dispatch_numeric(x.dtype(),
                          [&](auto t) { return unary_typed<decltype(t)>(op, x, alpha, who); });
}

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x.reshaped(x.shape());
  STRATA_CHECK_ARG(x.dtype() != DType::string && dtype != DType::string,
                   "cast: expected numeric dtypes, got ", x.dtype(), " -> ", dtype);
  Tensor out = Tensor::allocate(dtype, x.shape());
  dispatch_numeric(x.dtype(), [&](auto in_t) {
    using In = decltype(in_t);
    dispatch_numeric(dtype, [&](auto out_t) {
      using Out = decltype(out_t);
      const In* in = x.data<In>();
      Out* o = out.mutable_data<Out>();
      parallel_for(x.num_elements(), kElementwiseGrain, [&](int64_t s, int64_t e) {
        for (int64_t i = s; i < e; ++i) o[i] = static_cast<Out>(in[i]);
      });
    });
  });
  return out;
}

Tensor fill(DType dtype, const TensorShape& shape, double value) {
  Tensor out = Tensor::allocate(dtype, shape);
  STRATA_CHECK_ARG(dtype != DType::string, "fill: expected a numeric dtype, got string");
  dispatch_numeric(dtype, [&](auto t) {
    using T = decltype(t);
    T* o = out.mutable_data<T>();
    const T v = static_cast<T>(value);
    parallel_for(shape.num_elements(), kElementwiseGrain,
                 [&](int64_t s, int64_t e) { std::fill(o + s, o + e, v); });
  });
  return out;
}

Tensor select(const Tensor& cond, const Tensor& x, const Tensor& y) {
  STRATA_CHECK_ARG(cond.dtype() == DType::bool_, "where: expected a bool condition, got dtype ",
                   cond.dtype());
  STRATA_INTERNAL_CHECK(x.dtype() == y.dtype(), "select kernel on different dtypes");
  const TensorShape shape =
      broadcast_shape(cond.shape(), broadcast_shape(x.shape(), y.shape(), "where"), "where");
  auto full = [&](const Tensor& t) {
    return t.shape() == shape ? t : kernels::broadcast_to(t, shape);
  };
  const Tensor c = full(cond), xf = full(x), yf = full(y);
  Tensor out = Tensor::allocate(x.dtype(), shape);
  internal::dispatch_all(x.dtype(), [&](auto t) {
    using T = decltype(t);
    const bool* pc = c.data<bool>();
    const T* px = xf.data<T>();
    const T* py = yf.data<T>();
    T* o = out.mutable_data<T>();
    parallel_for(shape.num_elements(), kElementwiseGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) o[i] = pc[i] ? px[i] : py[i];
    });
  });
  return out;
}

Tensor add_n(const std::vector<Tensor>& inputs) {
  STRATA_CHECK_ARG(!inputs.empty(), "add_n: expected at least one input, got 0");
  const Tensor& first = inputs[0];
  for (const Tensor& t : inputs) {
    STRATA_CHECK_ARG(t.shape() == first.shape() && t.dtype() == first.dtype(),
                     "add_n: expected inputs of equal shape and dtype, got ", first.shape(), " ",
                     first.dtype(), " and ", t.shape(), " ", t.dtype());
  }
  return internal::dispatch_arithmetic(first.dtype(), "add_n", [&](auto t) {
    using T = decltype(t);
    Tensor out = Tensor::allocate(first.dtype(), first.shape());
    T* o = out.mutable_data<T>();
    parallel_for(first.num_elements(), kElementwiseGrain, [&](int64_t s, int64_t e) {
      MutMap<T> acc(o + s, e - s);
      acc = ConstMap<T>(inputs[0].data<T>() + s, e - s);
      for (size_t k = 1; k < inputs.size(); ++k) acc += ConstMap<T>(inputs[k].data<T>() + s, e - s);
    });
    return out;
  });
}

Tensor reduce(ReduceOp op, const Tensor& x, std::span<const int64_t> axes, bool keepdims) {
  return internal::dispatch_arithmetic(x.dtype(), "reduce", [&](auto t) {
    return reduce_typed<decltype(t)>(op, x, axes, keepdims);
  });
}

Tensor arg_reduce(bool is_max, const Tensor& x, int axis) {
  const char* who = is_max ? "argmax" : "argmin";
  STRATA_CHECK_ARG(x.shape().dims()[axis] > 0, who, ": expected a non-empty dimension ", axis,
                   ", got shape ", x.shape());
  return internal::dispatch_arithmetic(
      x.dtype(), who, [&](auto t) { return arg_reduce_typed<decltype(t)>(is_max, x, axis); });
}

}  // namespace strata::kernels
