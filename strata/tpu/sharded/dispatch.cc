// The op-API dispatcher of sharded execution (see sharded_ops.h, "The
// normal op API"): ops called inside a TPUStrategy replica on tensors that
// carry a sharding run by the rules of sharded_ops.cc.

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "strata/base/errors.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/dispatch.h"
#include "strata/tpu/sharded/internal/sharded_exec.h"
#include "strata/tpu/sharded/sharded_ops.h"

namespace strata::tpu::sharded {

namespace {

using internal::broadcast_tile;
using internal::broadcasts_into;
using internal::count_fallback;
using internal::holders;
using internal::parts;
using internal::run_shards;

// What an as_tensor result carries: its sharding (so tpu::sharding_of sees
// it) and its shards, so the next op runs on them without re-splitting.
class ShardedValue final : public tpu::ShardingExtension {
 public:
  explicit ShardedValue(ShardedTensor v) : ShardingExtension(v.sharding()), value(std::move(v)) {}
  const ShardedTensor value;
};

// The same value (same id, so tapes stay connected) without an extension:
// what the rules hand to ops, so the dispatcher is never consulted again.
Tensor strip(const Tensor& t) {
  return t.defined() && t.extension() ? t.with_extension(nullptr) : t;
}

ShardedTensor stripped(const ShardedTensor& x) {
  std::vector<Tensor> shards;
  for (const Tensor& t : x.shards()) shards.push_back(strip(t));
  return ShardedTensor(x.sharding(), x.shape(), std::move(shards), x.devices());
}

// `full` (the assembled value of x) carrying x.
Tensor carrying(const Tensor& full, const ShardedTensor& x) {
  return strip(full).with_extension(std::make_shared<const ShardedValue>(stripped(x)));
}

// NumPy broadcasting of the operands' shapes; nullopt if they do not broadcast.
std::optional<TensorShape> broadcast_all(std::span<const Tensor> inputs) {
  std::vector<int64_t> out;
  for (const Tensor& t : inputs) {
    const TensorShape& s = t.shape();
    if (s.rank() > static_cast<int>(out.size())) out.insert(out.begin(), s.rank() - out.size(), 1);
    for (int i = 1; i <= s.rank(); ++i) {
      int64_t& o = out[out.size() - static_cast<size_t>(i)];
      const int64_t d = s[-i];
      if (d == o || d == 1) continue;
      if (o != 1) return std::nullopt;
      o = d;
    }
  }
  return TensorShape(out);
}

// One call's inputs: the full values (plain[i], stripped) and, for those
// that carry a sharding, their sharded form.
struct Inputs {
  std::vector<Tensor> plain;
  std::vector<std::optional<ShardedTensor>> sharded;
  std::vector<const Device*> devices;

  // The first tiled input, if any.
  const ShardedTensor* first_tiled() const {
    for (const auto& s : sharded) {
      if (s && s->sharding().is_tiled()) return &*s;
    }
    return nullptr;
  }
  bool tiled(size_t i) const { return sharded[i] && sharded[i]->sharding().is_tiled(); }
};

class Rules {
 public:
  Rules(const DispatchedOp& op, Inputs in) : op_(op), in_(std::move(in)) {}

  Tensor apply() {
    if (std::optional<Tensor> out = untiled()) return *out;
    const OpKind k = op_.kind;
    if (op_is_elementwise(k)) return elementwise();
    switch (k) {
      case OpKind::Sum:
      case OpKind::Mean:
      case OpKind::Max:
      case OpKind::Min:
      case OpKind::Prod: return reduction();
      case OpKind::MatMul: return matmul_rule();
      case OpKind::Reshape: return reshape_rule();
      case OpKind::Conv2D: return conv_rule();
      case OpKind::MaxPool2D:
      case OpKind::AvgPool2D: return pool_rule();
      case OpKind::Softmax:
      case OpKind::LogSoftmax: return softmax_rule();
      case OpKind::SparseSoftmaxCrossEntropyWithLogits: return cross_entropy_rule();
      default: return fallback();
    }
  }

 private:
  Tensor run(std::vector<Tensor> args) const { return op_.run(std::span<const Tensor>(args)); }

  // Inputs with no tiled operand: all replicated -> every logical device runs
  // the op on its copy (TF's replicated computation); all maximal on one
  // device k (plain operands alongside) -> the op runs on k.
  std::optional<Tensor> untiled() {
    if (in_.first_tiled() != nullptr) return std::nullopt;
    std::optional<tpu::Sharding> common;
    for (const auto& s : in_.sharded) {
      if (!s) continue;
      if (!common) {
        common = s->sharding();
      } else if (!(*common == s->sharding())) {
        return fallback();  // e.g. maximal on two devices: gather
      }
    }
    std::vector<Tensor> shards = run_shards(in_.devices, holders(*common), [&](int d) {
      std::vector<Tensor> args;
      for (size_t i = 0; i < in_.plain.size(); ++i)
        args.push_back(in_.sharded[i] ? strip(in_.sharded[i]->shard(d)) : in_.plain[i]);
      return run(std::move(args));
    });
    const int first = holders(*common).front();
    const ShardedTensor out(*common, shards[static_cast<size_t>(first)].shape(), shards,
                            in_.devices);
    return carrying(shards[static_cast<size_t>(first)], out);
  }

  // Element-wise with broadcasting: the layout is the first tiled operand's
  // whose shape is the result's; operands laid out the same way contribute
  // their shards, untiled ones (plain, replicated) their slice of each tile.
  Tensor elementwise() {
    std::optional<TensorShape> out_shape = broadcast_all(in_.plain);
    if (!out_shape) return fallback();
    const ShardedTensor* like = nullptr;
    for (const auto& s : in_.sharded) {
      if (s && s->sharding().is_tiled() && s->shape() == *out_shape) {
        like = &*s;
        break;
      }
    }
    if (like == nullptr) return fallback();
    for (size_t i = 0; i < in_.plain.size(); ++i) {
      if (in_.tiled(i)) {
        if (!(in_.sharded[i]->sharding() == like->sharding()) ||
            !(in_.sharded[i]->shape() == *out_shape))
          return fallback();
      } else if (!broadcasts_into(in_.plain[i].shape(), *out_shape)) {
        return fallback();
      }
    }
    std::vector<Tensor> shards = run_shards(in_.devices, holders(like->sharding()), [&](int d) {
      std::vector<Tensor> args;
      for (size_t i = 0; i < in_.plain.size(); ++i) {
        args.push_back(in_.tiled(i)
                           ? strip(in_.sharded[i]->shard(d))
                           : broadcast_tile(in_.plain[i], like->sharding(), *out_shape, d));
      }
      return run(std::move(args));
    });
    return result(ShardedTensor(like->sharding(), *out_shape, std::move(shards), in_.devices));
  }

  Tensor reduction() {
    if (!in_.tiled(0)) return fallback();
    const ReduceOptions o{.axis = {op_.attrs.axes.begin(), op_.attrs.axes.end()},
                          .keepdims = op_.attrs.keepdims};
    const ShardedTensor& x = *in_.sharded[0];
    switch (op_.kind) {
      case OpKind::Sum: return result(reduce_sum(x, o));
      case OpKind::Mean: return result(reduce_mean(x, o));
      case OpKind::Max: return result(reduce_max(x, o));
      case OpKind::Min: return result(reduce_min(x, o));
      default: return result(reduce_prod(x, o));
    }
  }

  // a [M, K] tiled, b untiled: the batch and contraction rules of matmul.
  Tensor matmul_rule() {
    if (!in_.tiled(0) || in_.tiled(1) || op_.attrs.transpose_a || op_.attrs.transpose_b ||
        in_.plain[0].rank() != 2 || in_.plain[1].rank() != 2 ||
        in_.plain[0].dtype() != in_.plain[1].dtype())
      return fallback();
    return result(matmul(*in_.sharded[0], in_.plain[1]));
  }

  Tensor reshape_rule() {
    if (!in_.tiled(0)) return fallback();
    return result(reshape(*in_.sharded[0], op_.attrs.size));
  }

  static std::vector<int64_t> pair(const std::vector<int64_t>& v) {
    return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
  }

  Tensor conv_rule() {
    if (!in_.tiled(0) || in_.tiled(1)) return fallback();
    const nn::Conv2DOptions options{.strides = pair(op_.attrs.strides),
                                    .padding = op_.attrs.padding,
                                    .dilations = pair(op_.attrs.dilations)};
    return result(conv2d(*in_.sharded[0], in_.plain[1], options));
  }

  Tensor pool_rule() {
    if (!in_.tiled(0)) return fallback();
    const std::vector<int64_t> k = pair(op_.attrs.ksize), s = pair(op_.attrs.strides);
    return result(op_.kind == OpKind::MaxPool2D
                      ? max_pool2d(*in_.sharded[0], k, s, op_.attrs.padding)
                      : avg_pool2d(*in_.sharded[0], k, s, op_.attrs.padding));
  }

  // Over the last axis: shard-wise unless that axis is split.
  Tensor softmax_rule() {
    const ShardedTensor& x = *in_.sharded[0];
    if (x.rank() < 1 || parts(x.sharding(), x.rank() - 1) != 1) return fallback();
    std::vector<Tensor> shards = run_shards(in_.devices, holders(x.sharding()),
                                            [&](int d) { return run({strip(x.shard(d))}); });
    return result(ShardedTensor(x.sharding(), x.shape(), std::move(shards), in_.devices));
  }

  // (logits [N, C], labels [N]) with the classes not split: each device
  // computes the loss of its rows; labels are sliced (plain) or laid out alike.
  Tensor cross_entropy_rule() {
    if (!in_.tiled(0)) return fallback();
    const ShardedTensor& logits = *in_.sharded[0];
    const tpu::Sharding& s = logits.sharding();
    if (logits.rank() != 2 || parts(s, 1) != 1 || in_.plain[1].rank() != 1 ||
        in_.plain[1].shape()[0] != logits.shape()[0])
      return fallback();
    const int64_t p0 = parts(s, 0);
    const tpu::Sharding out_s = tpu::Sharding::tiled({p0});
    if (in_.tiled(1) && !(in_.sharded[1]->sharding() == out_s)) return fallback();
    const int64_t rows = logits.shape()[0] / p0;
    std::vector<Tensor> shards = run_shards(in_.devices, holders(s), [&](int d) {
      const int64_t t0 = s.tile_index(d)[0];
      const Tensor labels = in_.tiled(1) ? strip(in_.sharded[1]->shard(d))
                            : p0 == 1    ? in_.plain[1]
                                         : slice(in_.plain[1], {t0 * rows}, {rows});
      return run({strip(logits.shard(d)), labels});
    });
    // Product of the partitions = the logical devices, and C is not split:
    // N is split over all of them.
    return result(
        ShardedTensor(out_s, TensorShape({logits.shape()[0]}), std::move(shards), in_.devices));
  }

  // No rule: the full values (the gathered inputs) run once on logical
  // device 0, and the result is re-sharded to the first sharded input's
  // layout when its shape suits, else replicated.
  Tensor fallback() {
    count_fallback(op_.name);
    Tensor out;
    {
      DeviceScope scope(*in_.devices.front());
      out = run(in_.plain);
    }
    tpu::Sharding target = tpu::Sharding::replicated(static_cast<int>(in_.devices.size()));
    for (const auto& s : in_.sharded) {
      if (!s) continue;
      try {
        s->sharding().check_shape(out.shape());
        target = s->sharding();
      } catch (const InvalidArgumentError&) {
      }
      break;
    }
    // The shards are cut from `out`, which is itself the full value.
    return carrying(out, shard(out, target, in_.devices));
  }

  // A rule's result as the full value (assembled on logical device 0) carrying it.
  static Tensor result(const ShardedTensor& x) { return carrying(unshard(x), x); }

  const DispatchedOp& op_;
  Inputs in_;
};

class ShardedDispatcher final : public OpDispatcher {
 public:
  explicit ShardedDispatcher(LogicalDevicesOfCurrentReplica devices_of_replica)
      : logical_devices_(devices_of_replica) {}
  LogicalDevicesOfCurrentReplica logical_devices() const noexcept { return logical_devices_; }

  std::optional<Tensor> dispatch(const DispatchedOp& op) override {
    const std::vector<const Device*>* devices = logical_devices_();
    if (devices == nullptr) return std::nullopt;
    Inputs in;
    in.devices = *devices;
    const int n = static_cast<int>(in.devices.size());
    bool any = false;
    for (const Tensor& t : op.inputs) {
      in.plain.push_back(strip(t));
      std::optional<ShardedTensor> s;
      if (const ShardedTensor* c = carried_shards(t); c && c->num_logical_devices() == n) {
        s = *c;
      } else if (const tpu::Sharding* a = t.defined() ? tpu::sharding_of(t) : nullptr;
                 a && a->num_logical_devices() == n) {
        s = shard(strip(t), *a, in.devices);
      }
      any = any || s.has_value();
      in.sharded.push_back(std::move(s));
    }
    if (!any) return std::nullopt;
    return Rules(op, std::move(in)).apply();
  }

 private:
  const LogicalDevicesOfCurrentReplica logical_devices_;
};

}  // namespace

Tensor as_tensor(const ShardedTensor& x) { return carrying(unshard(x), x); }

const ShardedTensor* carried_shards(const Tensor& t) {
  if (!t.defined()) return nullptr;
  const auto* v = dynamic_cast<const ShardedValue*>(t.extension().get());
  return v ? &v->value : nullptr;
}

void install_op_dispatcher(LogicalDevicesOfCurrentReplica logical_devices) {
  STRATA_CHECK_ARG(logical_devices != nullptr,
                   "sharded::install_op_dispatcher: expected a logical-devices function");
  static ShardedDispatcher dispatcher(logical_devices);
  STRATA_CHECK(FAILED_PRECONDITION, dispatcher.logical_devices() == logical_devices,
               "sharded::install_op_dispatcher: a dispatcher with another logical-devices "
               "function is already installed");
  set_op_dispatcher(&dispatcher);
}

}  // namespace strata::tpu::sharded
