// The op table's sweep: one sample per op of ops.def, keyed by OpKind. For
// every op the sample must exist (the sweep names an op without one), must run
// its op, and must agree with what ops.def says: a differentiable op's gradient
// matches central differences and reads only the values its grad_needs
// column declares; a non-differentiable op is never recorded and yields no
// gradient.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "strata/autodiff/gradient_tape.h"
#include "strata/base/errors.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/collective_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/nn_ops.h"
#include "strata/ops/op_kind.h"
#include "strata/ops/operators.h"
#include "strata/ops/recorder.h"
#include "strata/testing/gradient_check.h"

namespace strata {
namespace {

using strata::testing::check_gradients;
using strata::testing::GradientCheckOptions;
using strata::testing::random_uniform;
using V = std::vector<Tensor>;

// One call of an op: `f` runs it on `inputs` (float64; what the gradient is
// taken against); non-tensor and integer arguments are captured by `f`.
struct OpSample {
  std::function<Tensor(const V&)> f;
  V inputs;
  GradientCheckOptions options = {};
};
using OpSampleTable = std::map<OpKind, OpSample>;

Tensor rnd(const TensorShape& s, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  return random_uniform(s, lo, hi, seed);
}

// Values at least 0.05 from `kink` (finite differences must not cross it).
Tensor away_from(const Tensor& x, double kink) { return where(abs(x - kink) < 0.05, x + 0.1, x); }

Tensor int64s(const std::vector<int64_t>& v, const TensorShape& shape) {
  return constant(v, shape);
}

OpSampleTable op_samples() {
  const Tensor x23 = rnd({2, 3}, 1);
  const Tensor y3 = rnd({3}, 2);
  const Tensor pos3 = rnd({3}, 3, 0.5, 1.5);
  const Tensor cube = rnd({2, 3, 4}, 4, 0.5, 1.5);
  const Tensor image = rnd({1, 4, 4, 2}, 5);
  const Tensor filter = rnd({2, 2, 2, 3}, 6);
  const nn::Conv2DOptions conv{.strides = {1, 1}, .padding = "VALID"};
  auto unary = [](Tensor (*op)(const Tensor&), Tensor x) {
    return OpSample{[op](const V& v) { return op(v[0]); }, {std::move(x)}};
  };
  auto binary = [](Tensor (*op)(const Tensor&, const Tensor&), Tensor a, Tensor b) {
    return OpSample{[op](const V& v) { return op(v[0], v[1]); }, {std::move(a), std::move(b)}};
  };
  // The float32 round trip is the identity for the gradient (TF) but not for
  // central differences: see GradientsTest.CastBetweenFloatTypesAndSelect
  // for the bound this tolerance comes from.
  GradientCheckOptions cast_options;
  cast_options.delta = 1e-2;
  cast_options.tolerance = 2 * 1.5 * (1 + cast_options.delta) * (1 + cast_options.delta) *
                           std::numeric_limits<float>::epsilon() / (2 * cast_options.delta);

  OpSampleTable t;
  // Element-wise binary: broadcasting [2, 3] with [3].
  t[OpKind::Add] = binary(add, x23, y3);
  t[OpKind::Sub] = binary(subtract, x23, y3);
  t[OpKind::Mul] = binary(multiply, x23, y3);
  t[OpKind::Div] = binary(divide, x23, pos3);
  t[OpKind::Pow] = binary(pow, rnd({2, 3}, 7, 0.5, 2.0), rnd({3}, 8, -2.0, 2.0));
  t[OpKind::Maximum] = binary(maximum, x23, pos3);  // disjoint ranges: no ties
  t[OpKind::Minimum] = binary(minimum, x23, pos3);
  t[OpKind::FloorDiv] = binary(floordiv, x23, pos3);
  t[OpKind::FloorMod] = binary(floormod, x23, pos3);
  t[OpKind::SquaredDifference] = binary(squared_difference, x23, y3);
  t[OpKind::Equal] = binary(equal, x23, y3);
  t[OpKind::NotEqual] = binary(not_equal, x23, y3);
  t[OpKind::Less] = binary(less, x23, y3);
  t[OpKind::LessEqual] = binary(less_equal, x23, y3);
  t[OpKind::Greater] = binary(greater, x23, y3);
  t[OpKind::GreaterEqual] = binary(greater_equal, x23, y3);
  t[OpKind::LogicalAnd] = {[](const V& v) { return logical_and(v[0] > 0.0, v[1] > 0.0); },
                           {x23, y3}};
  t[OpKind::LogicalOr] = {[](const V& v) { return logical_or(v[0] > 0.0, v[1] > 0.0); }, {x23, y3}};
  t[OpKind::LogicalNot] = {[](const V& v) { return logical_not(v[0] > 0.0); }, {x23}};
  // Element-wise unary.
  t[OpKind::Identity] = unary(identity, x23);
  t[OpKind::Neg] = unary(negative, x23);
  t[OpKind::Abs] = unary(abs, away_from(x23, 0.0));
  t[OpKind::Sign] = unary(sign, x23);
  t[OpKind::Exp] = unary(exp, x23);
  t[OpKind::Log] = unary(log, rnd({2, 3}, 9, 0.5, 2.0));
  t[OpKind::Log1p] = unary(log1p, rnd({2, 3}, 10, -0.5, 2.0));
  t[OpKind::Sqrt] = unary(sqrt, rnd({2, 3}, 11, 0.5, 2.0));
  t[OpKind::Rsqrt] = unary(rsqrt, rnd({2, 3}, 12, 0.5, 2.0));
  t[OpKind::Square] = unary(square, x23);
  t[OpKind::Reciprocal] = unary(reciprocal, rnd({2, 3}, 13, 0.5, 2.0));
  t[OpKind::Sin] = unary(sin, rnd({2, 3}, 14, -3.0, 3.0));
  t[OpKind::Cos] = unary(cos, rnd({2, 3}, 15, -3.0, 3.0));
  t[OpKind::Floor] = unary(floor, x23);
  t[OpKind::Ceil] = unary(ceil, x23);
  t[OpKind::Round] = unary(round, x23);
  t[OpKind::Relu] = unary(relu, away_from(x23, 0.0));
  t[OpKind::Relu6] = unary(relu6, away_from(away_from(rnd({2, 3}, 16, -2.0, 8.0), 0.0), 6.0));
  t[OpKind::LeakyRelu] = {[](const V& v) { return leaky_relu(v[0], 0.3); }, {away_from(x23, 0.0)}};
  t[OpKind::Elu] = unary(elu, away_from(x23, 0.0));
  t[OpKind::Sigmoid] = unary(sigmoid, rnd({2, 3}, 17, -3.0, 3.0));
  t[OpKind::Tanh] = unary(tanh, rnd({2, 3}, 18, -2.0, 2.0));
  t[OpKind::Softplus] = unary(softplus, rnd({2, 3}, 19, -3.0, 3.0));
  t[OpKind::Cast] = {
      [](const V& v) { return cast(cast(v[0], DType::float32), DType::float64) * v[0]; },
      {rnd({4}, 20)},
      cast_options};
  const Tensor cond = constant({true, false, true}, {3});
  t[OpKind::Select] = {[cond](const V& v) { return where(cond, v[0], v[1]); }, {x23, y3}};
  t[OpKind::AddN] = {[](const V& v) { return add_n({v[0], v[1], v[0]}); }, {x23, rnd({2, 3}, 21)}};
  // Reductions.
  t[OpKind::Sum] = {[](const V& v) { return reduce_sum(v[0], {.axis = {1}}); }, {cube}};
  t[OpKind::Mean] = {[](const V& v) { return reduce_mean(v[0], {.axis = {0, 2}}); }, {cube}};
  t[OpKind::Max] = {[](const V& v) { return reduce_max(v[0], {.axis = {-1}, .keepdims = true}); },
                    {cube}};
  t[OpKind::Min] = {[](const V& v) { return reduce_min(v[0], {.axis = {1}}); }, {cube}};
  t[OpKind::Prod] = {[](const V& v) { return reduce_prod(v[0], {.axis = {2}}); }, {cube}};
  t[OpKind::ArgMax] = {[](const V& v) { return argmax(v[0], 1); }, {x23}};
  t[OpKind::ArgMin] = {[](const V& v) { return argmin(v[0], 1); }, {x23}};
  // Shape and layout.
  t[OpKind::Reshape] = {[](const V& v) { return reshape(v[0], {4, -1}); }, {cube}};
  t[OpKind::Transpose] = {[](const V& v) { return transpose(v[0], {2, 0, 1}); }, {cube}};
  t[OpKind::BroadcastTo] = {[](const V& v) {
                              return broadcast_to(v[0], {2, 2, 3});
                            },
                            {rnd({2, 1, 3}, 22)}};
  t[OpKind::Concat] = {[](const V& v) {
                         return concat({v[0], v[1], v[0]}, 1);
                       },
                       {rnd({2, 2}, 23), x23}};
  t[OpKind::Slice] = {[](const V& v) { return slice(v[0], {0, 1, 1}, {-1, 2, 2}); }, {cube}};
  t[OpKind::StridedSlice] = {[](const V& v) {
                               return strided_slice(v[0], {1, 0, 3}, {2, 3, 0}, {1, 2, -2});
                             },
                             {cube}};
  t[OpKind::Pad] = {[](const V& v) { return pad(v[0], {{1, 0}, {0, 2}}, 3.0); }, {x23}};
  t[OpKind::Tile] = {[](const V& v) { return tile(v[0], {2, 1, 3}); }, {cube}};
  const Tensor indices = int64s({2, 0, 2}, {3});
  t[OpKind::Gather] = {[indices](const V& v) { return gather(v[0], indices, 1); }, {x23}};
  const Tensor segments = int64s({1, 0, 1}, {3});
  t[OpKind::UnsortedSegmentSum] = {
      [segments](const V& v) { return unsorted_segment_sum(v[0], segments, 3); },
      {rnd({3, 2}, 24)}};
  t[OpKind::OneHot] = {[indices](const V&) { return one_hot(indices, 3); }, {y3}};
  // Linear algebra.
  t[OpKind::MatMul] = {[](const V& v) { return matmul(v[0], v[1], {.transpose_b = true}); },
                       {rnd({2, 2, 3}, 25), rnd({4, 3}, 26)}};
  // Neural network.
  t[OpKind::Softmax] = {[](const V& v) { return softmax(v[0]); }, {rnd({3, 4}, 27, -2.0, 2.0)}};
  t[OpKind::LogSoftmax] = {[](const V& v) { return log_softmax(v[0]); },
                           {rnd({3, 4}, 28, -2.0, 2.0)}};
  t[OpKind::Conv2D] = {[conv](const V& v) { return nn::conv2d(v[0], v[1], conv); },
                       {image, filter}};
  t[OpKind::Conv2DBackpropInput] = {
      [conv](const V& v) {
        return nn::conv2d_backprop_input({1, 4, 4, 2}, v[0], v[1], conv);
      },
      {filter, rnd({1, 3, 3, 3}, 29)}};
  t[OpKind::Conv2DBackpropFilter] = {
      [conv](const V& v) {
        return nn::conv2d_backprop_filter(v[0], {2, 2, 2, 3}, v[1], conv);
      },
      {image, rnd({1, 3, 3, 3}, 30)}};
  t[OpKind::MaxPool2D] = {[](const V& v) {
                            return nn::max_pool2d(v[0], {2, 2}, {1, 1}, "SAME");
                          },
                          {image}};
  // Its `output` argument is computed off the tape (stop_gradient), so that
  // only MaxPool2DGrad itself meets the tracked input.
  t[OpKind::MaxPool2DGrad] = {
      [](const V& v) {
        const Tensor y = nn::max_pool2d(stop_gradient(v[0]), {2, 2}, {2, 2});
        return nn::max_pool2d_grad(v[0], y, v[1], {2, 2}, {2, 2});
      },
      {image, rnd({1, 2, 2, 2}, 31)}};
  t[OpKind::ReluGrad] = {[](const V& v) { return nn::relu_grad(v[0], v[1]) * v[1]; },
                         {x23, away_from(rnd({2, 3}, 32), 0.0)}};
  t[OpKind::AvgPool2D] = {[](const V& v) {
                            return nn::avg_pool2d(v[0], {2, 2}, {1, 1}, "SAME");
                          },
                          {image}};
  t[OpKind::AvgPool2DGrad] = {[](const V& v) {
                                return nn::avg_pool2d_grad({1, 4, 4, 2}, v[0], {2, 2}, {2, 2});
                              },
                              {rnd({1, 2, 2, 2}, 33)}};
  const Tensor labels = int64s({1, 3, 0}, {3});
  t[OpKind::SparseSoftmaxCrossEntropyWithLogits] = {
      [labels](const V& v) { return nn::sparse_softmax_cross_entropy_with_logits(labels, v[0]); },
      {rnd({3, 4}, 34, -2.0, 2.0)}};
  // Collectives outside a replica context: one replica (strata/ops/collective_ops.h).
  t[OpKind::CollectiveReduce] = {
      [](const V& v) { return collective_all_reduce({v[0]}, /*mean=*/true)[0]; }, {x23}};
  t[OpKind::CollectiveGather] = {
      [](const V& v) { return collective_all_gather({v[0]}, /*axis=*/1)[0]; }, {x23}};
  return t;
}

// The names of the ops of ops.def that `table` has no sample for, in ops.def order.
std::vector<std::string> ops_without_sample(const OpSampleTable& table) {
  std::vector<std::string> missing;
  for (int k = 0; k < kNumOpKinds; ++k) {
    if (!table.contains(static_cast<OpKind>(k))) {
      missing.emplace_back(op_name(static_cast<OpKind>(k)));
    }
  }
  return missing;
}

// Records every op it sees, with its values (tracks every tensor).
class OpSpy final : public OpRecorder {
 public:
  struct Call {
    OpKind kind;
    V inputs;
    V outputs;
    OpAttrs attrs;
  };
  bool is_tracking(const Tensor&) const override { return true; }
  void record(OpKind kind, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
              const OpAttrs& attrs) override {
    calls.push_back(
        {kind, V(inputs.begin(), inputs.end()), V(outputs.begin(), outputs.end()), attrs});
  }
  // The first call of `kind`, or nullptr.
  const Call* find(OpKind kind) const {
    for (const Call& c : calls) {
      if (c.kind == kind) return &c;
    }
    return nullptr;
  }
  std::vector<Call> calls;
};

// Runs `sample` under an OpSpy.
OpSpy spy_on(const OpSample& sample) {
  OpSpy spy;
  RecorderScope scope(spy);
  sample.f(sample.inputs);
  return spy;
}

TEST(OpTableTest, EveryOpHasASample) {
  EXPECT_THAT(ops_without_sample(op_samples()), ::testing::IsEmpty())
      << "every op of strata/ops/ops.def needs a sample in op_samples()";
}

TEST(OpTableTest, AnOpWithoutASampleIsNamed) {
  OpSampleTable table = op_samples();
  table.erase(OpKind::Softplus);
  EXPECT_THAT(ops_without_sample(table), ::testing::ElementsAre("Softplus"));
  table.erase(OpKind::Add);
  EXPECT_THAT(ops_without_sample(table), ::testing::ElementsAre("Add", "Softplus"));
}

TEST(OpTableTest, EveryDifferentiableSampleRunsItsOp) {
  const OpSampleTable table = op_samples();
  for (const auto& [kind, sample] : table) {
    if (!op_is_differentiable(kind)) continue;  // never reported to a recorder
    const OpSpy spy = spy_on(sample);
    EXPECT_NE(spy.find(kind), nullptr) << "the sample of " << op_name(kind) << " does not run it";
  }
}

TEST(OpTableTest, DifferentiableOpsMatchFiniteDifferences) {
  const OpSampleTable table = op_samples();
  for (int k = 0; k < kNumOpKinds; ++k) {
    const auto kind = static_cast<OpKind>(k);
    auto it = table.find(kind);
    if (it == table.end()) {
      ADD_FAILURE() << "ops.def op " << op_name(kind) << " has no sample in op_samples()";
      continue;
    }
    if (!op_is_differentiable(kind)) continue;
    SCOPED_TRACE(std::string(op_name(kind)));
    const OpSample& s = it->second;
    try {
      const testing::GradientCheckResult r = check_gradients(s.f, s.inputs, s.options);
      EXPECT_TRUE(r.ok) << op_name(kind) << ": max error " << r.max_error << "\n" << r.message;
    } catch (const Error& e) {  // one op's failure must not hide the others'
      ADD_FAILURE() << op_name(kind) << ": " << e.what();
    }
  }
}

TEST(OpTableTest, NonDifferentiableOpsAreNotRecordedAndHaveNoGradient) {
  const OpSampleTable table = op_samples();
  for (int k = 0; k < kNumOpKinds; ++k) {
    const auto kind = static_cast<OpKind>(k);
    auto it = table.find(kind);
    if (it == table.end() || op_is_differentiable(kind)) continue;
    SCOPED_TRACE(std::string(op_name(kind)));
    const OpSample& s = it->second;
    GradientTape tape;
    tape.watch(s.inputs);
    const Tensor y = s.f(s.inputs);
    EXPECT_EQ(tape.num_recorded_ops(), 0u) << op_name(kind) << " was recorded";
    const Tensor target = is_floating(y.dtype()) ? reduce_sum(y) : y;
    for (const Tensor& g : tape.gradient(target, s.inputs)) {
      EXPECT_FALSE(g.defined()) << op_name(kind) << " has a gradient";
    }
  }
}

TEST(OpTableTest, ARecordKeepsExactlyTheValuesItsGradientDeclares) {
  const OpSampleTable table = op_samples();
  for (const auto& [kind, sample] : table) {
    if (!op_is_differentiable(kind)) continue;
    SCOPED_TRACE(std::string(op_name(kind)));
    const OpSpy spy = spy_on(sample);
    const OpSpy::Call* call = spy.find(kind);
    ASSERT_NE(call, nullptr);
    const autodiff::OpRecord rec(kind, call->attrs, call->inputs, call->outputs);
    ASSERT_EQ(rec.in.size(), call->inputs.size());
    for (size_t i = 0; i < call->inputs.size(); ++i) {
      EXPECT_EQ(rec.in[i].id, call->inputs[i].id());
      if (op_gradient_needs_inputs(kind)) {
        EXPECT_EQ(rec.input(i).id(), call->inputs[i].id());
      } else {
        EXPECT_THROW(rec.input(i), InternalError);
      }
    }
    for (size_t i = 0; i < call->outputs.size(); ++i) {
      EXPECT_EQ(rec.out[i].shape, call->outputs[i].shape());
      if (op_gradient_needs_outputs(kind)) {
        EXPECT_EQ(rec.output(i).id(), call->outputs[i].id());
      } else {
        EXPECT_THROW(rec.output(i), InternalError);
      }
    }
  }
}

TEST(OpTableTest, AGradientReadingAnUndeclaredValueIsAnInternalErrorNamingTheOp) {
  // Add's gradient needs neither values (ops.def: None); Exp's only its output.
  const Tensor a = constant({1.0, 2.0}), b = constant({3.0, 4.0});
  const Tensor sum = a + b;
  const autodiff::OpRecord add(OpKind::Add, {}, V{a, b}, V{sum});
  try {
    add.input(0);
    ADD_FAILURE() << "expected InternalError";
  } catch (const InternalError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("gradient of Add reads input 0"));
  }
  EXPECT_THROW(add.output(0), InternalError);
  const autodiff::OpRecord exp_rec(OpKind::Exp, {}, V{a}, V{exp(a)});
  EXPECT_EQ(exp_rec.output(0).to_vector<double>(), exp(a).to_vector<double>());
  try {
    exp_rec.input(0);
    ADD_FAILURE() << "expected InternalError";
  } catch (const InternalError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("gradient of Exp reads input 0"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("grad_needs Outputs"));
  }
  // op_gradient goes through the same accessors: a record that drops a value
  // its gradient reads (here: Mul's inputs, read as if Mul declared None)
  // cannot silently produce a gradient. A record of another kind stands in
  // for one made under a wrong declaration.
  autodiff::OpRecord mul_as_add(OpKind::Add, {}, V{a, b}, V{a * b});
  mul_as_add.kind = OpKind::Mul;
  EXPECT_THROW(autodiff::op_gradient(mul_as_add, {ones_like(a)}), InternalError);
}

}  // namespace
}  // namespace strata
