#include "strata/ops/random_generator.h"

#include <cmath>
#include <numbers>
#include <random>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/core/random.h"
#include "strata/ops/collective_ops.h"
#include "strata/ops/replica_count.h"

namespace strata::random {

struct Generator::Impl {
  explicit Impl(const Tensor& initial)
      : state(initial, {.name = "Generator/state", .trainable = false}) {}
  Mutex mu;  // one read-and-skip at a time
  Variable state;
};

namespace {

constexpr int64_t kStateSize = 3;
// TF's RngReadAndSkip increment per value drawn.
constexpr uint64_t kCounterPerValue = 256;

Tensor state_tensor(uint64_t counter_lo, uint64_t counter_hi, uint64_t key) {
  return constant(std::vector<int64_t>{static_cast<int64_t>(counter_lo),
                                       static_cast<int64_t>(counter_hi), static_cast<int64_t>(key)},
                  TensorShape{kStateSize});
}

// The Philox block for value i of a draw.
Philox::Block block(uint64_t key, uint64_t counter, uint64_t stream, uint64_t i) {
  const uint64_t c = counter + i;
  return Philox(key, stream + (c < counter ? 1 : 0))(c);
}

double unit(const Philox::Block& b, int half) {
  return uint64_to_unit_double(b[2 * half], b[2 * half + 1]);
}

}  // namespace

Generator Generator::from_seed(uint64_t seed) {
  return Generator(std::make_shared<Impl>(state_tensor(seed, 0, 0)));
}

Generator Generator::from_state(const Tensor& state) {
  STRATA_CHECK_ARG(state.defined() && state.dtype() == DType::int64 && state.rank() == 1 &&
                       state.shape().dim(0) == kStateSize,
                   "random::Generator::from_state: expected an int64 tensor of shape [3] (Philox: "
                   "counter low, counter high, key), got ",
                   state.defined() ? state.shape().to_string() : std::string("an empty tensor"),
                   " ", state.defined() ? dtype_name(state.dtype()) : "");
  return Generator(std::make_shared<Impl>(state));
}

Generator Generator::from_non_deterministic_state() {
  std::random_device rd;
  auto word = [&] { return (uint64_t{rd()} << 32) | rd(); };
  return Generator(std::make_shared<Impl>(state_tensor(word(), word(), word())));
}

const Variable& Generator::state() const { return impl_->state; }

Generator::Draw Generator::read_and_skip(int64_t n) {
  STRATA_CHECK_ARG(n >= 0, "random::Generator: expected a non-negative count, got ", n);
  Draw d{};
  {
    MutexLock l(impl_->mu);
    const std::vector<int64_t> s = impl_->state.value().to_vector<int64_t>();
    d.counter = static_cast<uint64_t>(s[0]);
    d.stream = static_cast<uint64_t>(s[1]);
    d.key = static_cast<uint64_t>(s[2]);
    const uint64_t delta = static_cast<uint64_t>(n) * kCounterPerValue;
    const uint64_t lo = d.counter + delta;
    const uint64_t hi = d.stream + (lo < d.counter ? 1 : 0);
    impl_->state.assign(state_tensor(lo, hi, d.key));
  }
  // TF mixes the replica id into the key, so that the replicas of a strategy
  // draw different streams from their equal copies of the state.
  const int replicas = current_num_replicas_in_sync();
  if (const ReplicaCollectives* rc = current_replica_collectives(); rc != nullptr && replicas > 1) {
    const uint64_t id =
        static_cast<uint64_t>(rc->replica_id()) | (static_cast<uint64_t>(replicas) << 32);
    const Philox::Block b = Philox(d.key, id)(0);
    d.key = (uint64_t{b[0]} << 32) | b[1];
  }
  return d;
}

Tensor Generator::uniform(const TensorShape& shape, const GeneratorUniformOptions& o) {
  STRATA_CHECK_ARG(shape.is_fully_defined(),
                   "random::Generator::uniform: expected a fully defined "
                   "shape, got ",
                   shape);
  STRATA_CHECK_ARG(o.dtype == DType::float32 || o.dtype == DType::float64,
                   "random::Generator::uniform: expected dtype float32 or float64, got ", o.dtype);
  STRATA_CHECK_ARG(o.minval <= o.maxval, "random::Generator::uniform: expected minval <= maxval, ",
                   "got ", o.minval, " and ", o.maxval);
  const int64_t n = shape.num_elements();
  const Draw d = read_and_skip(n);
  Tensor out = Tensor::allocate(o.dtype, shape);
  for (int64_t i = 0; i < n; ++i) {
    const double v =
        o.minval + unit(block(d.key, d.counter, d.stream, static_cast<uint64_t>(i)), 0) *
                       (o.maxval - o.minval);
    if (o.dtype == DType::float32) {
      float f = static_cast<float>(v);
      // float32 rounding may reach maxval; keep the interval half-open.
      if (f >= static_cast<float>(o.maxval) && o.maxval > o.minval)
        f = std::nextafter(static_cast<float>(o.maxval), -INFINITY);
      out.mutable_data<float>()[i] = f;
    } else {
      out.mutable_data<double>()[i] = v;
    }
  }
  return out;
}

Tensor Generator::normal(const TensorShape& shape, const GeneratorNormalOptions& o) {
  STRATA_CHECK_ARG(shape.is_fully_defined(),
                   "random::Generator::normal: expected a fully defined "
                   "shape, got ",
                   shape);
  STRATA_CHECK_ARG(o.dtype == DType::float32 || o.dtype == DType::float64,
                   "random::Generator::normal: expected dtype float32 or float64, got ", o.dtype);
  const int64_t n = shape.num_elements();
  const Draw d = read_and_skip(n);
  Tensor out = Tensor::allocate(o.dtype, shape);
  for (int64_t i = 0; i < n; ++i) {
    const Philox::Block b = block(d.key, d.counter, d.stream, static_cast<uint64_t>(i));
    const double u1 = 1.0 - unit(b, 0);  // (0, 1]: log is finite
    const double u2 = unit(b, 1);
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    const double v = o.mean + o.stddev * z;
    if (o.dtype == DType::float32) {
      out.mutable_data<float>()[i] = static_cast<float>(v);
    } else {
      out.mutable_data<double>()[i] = v;
    }
  }
  return out;
}

Tensor Generator::uniform_int(const TensorShape& shape, int64_t minval, int64_t maxval,
                              DType dtype) {
  STRATA_CHECK_ARG(shape.is_fully_defined(),
                   "random::Generator::uniform_int: expected a fully "
                   "defined shape, got ",
                   shape);
  STRATA_CHECK_ARG(minval < maxval,
                   "random::Generator::uniform_int: expected minval < maxval, "
                   "got ",
                   minval, " and ", maxval);
  STRATA_CHECK_ARG(dtype == DType::int32 || dtype == DType::int64,
                   "random::Generator::uniform_int: expected dtype int32 or int64, got ", dtype);
  const int64_t n = shape.num_elements();
  const Draw d = read_and_skip(n);
  const uint64_t range = static_cast<uint64_t>(maxval - minval);
  Tensor out = Tensor::allocate(dtype, shape);
  for (int64_t i = 0; i < n; ++i) {
    const Philox::Block b = block(d.key, d.counter, d.stream, static_cast<uint64_t>(i));
    const int64_t v = minval + static_cast<int64_t>(((uint64_t{b[0]} << 32) | b[1]) % range);
    if (dtype == DType::int32) {
      out.mutable_data<int32_t>()[i] = static_cast<int32_t>(v);
    } else {
      out.mutable_data<int64_t>()[i] = v;
    }
  }
  return out;
}

std::vector<Generator> Generator::split(int count) {
  STRATA_CHECK_ARG(count >= 0, "random::Generator::split: expected count >= 0, got ", count);
  // Each new generator's key and counter are the next random words of this one.
  const Draw d = read_and_skip(count);
  std::vector<Generator> out;
  for (int i = 0; i < count; ++i) {
    const Philox::Block b = block(d.key, d.counter, d.stream, static_cast<uint64_t>(i));
    out.push_back(Generator(std::make_shared<Impl>(
        state_tensor((uint64_t{b[0]} << 32) | b[1], 0, (uint64_t{b[2]} << 32) | b[3]))));
  }
  return out;
}

void Generator::skip(int64_t delta) { (void)read_and_skip(delta); }

}  // namespace strata::random
