#include "strata/autodiff/gradient_tape.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "strata/base/errors.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/collective_ops.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"

namespace strata {
namespace {

TEST(GradientTapeTest, GradientOfAWatchedTensor) {
  const Tensor x = constant(3.f);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = x * x;
  EXPECT_FLOAT_EQ(tape.gradient(y, x).item<float>(), 6.f);
}

TEST(GradientTapeTest, UnwatchedTensorsAreNotRecorded) {
  const Tensor x = constant(3.f);
  GradientTape tape;
  const Tensor y = x * x;
  EXPECT_EQ(tape.num_recorded_ops(), 0u);
  EXPECT_FALSE(tape.gradient(y, x).defined());
}

// The backward pass runs no product for an input nobody differentiates: an
// outer tape watching both operands records every op the inner gradient runs.
TEST(GradientTapeTest, MatMulGradientSkipsTheInputNobodyAsksFor) {
  const Tensor x = constant(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor w = constant(std::vector<float>{1, 0, 0, 1, 1, 1}, {3, 2});
  auto ops_run_by_gradient = [&](bool also_x) {
    GradientTape outer({.persistent = true});
    outer.watch(std::vector<Tensor>{x, w});
    GradientTape inner;
    inner.watch(w);
    if (also_x) inner.watch(x);
    const Tensor y = matmul(x, w);
    const size_t before = outer.num_recorded_ops();
    const std::vector<Tensor> g =
        also_x ? inner.gradient(y, {x, w}) : std::vector<Tensor>{inner.gradient(y, w)};
    // d(sum(x w))/dw = x^T 1: column sums of x in every column.
    EXPECT_EQ(g.back().to_vector<float>(), (std::vector<float>{5, 5, 7, 7, 9, 9}));
    return outer.num_recorded_ops() - before;
  };
  const size_t only_w = ops_run_by_gradient(false);
  const size_t both = ops_run_by_gradient(true);
  EXPECT_GE(only_w, 1u);
  EXPECT_EQ(both, only_w + 1) << "the input gradient is one more MatMul, run only when asked for";
}

TEST(GradientTapeTest, NonScalarTargetIsTheSumOfItsElements) {
  const Tensor x = constant({1.f, 2.f, 3.f});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = x * x;  // d sum(x^2) = 2x
  EXPECT_EQ(tape.gradient(y, x).to_vector<float>(), (std::vector<float>{2.f, 4.f, 6.f}));
}

TEST(GradientTapeTest, OutputGradientsWeightTheTarget) {
  const Tensor x = constant({1.f, 2.f});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = x * x;
  const Tensor g = tape.gradient(y, x, {.output_gradients = constant({10.f, -1.f})});
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{20.f, -4.f}));
}

TEST(GradientTapeTest, GradientsOfSeveralPathsAreSummed) {
  const Tensor x = constant(2.f);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = x * x + x * 3.f + x;  // 2x + 3 + 1 = 8
  EXPECT_FLOAT_EQ(tape.gradient(y, x).item<float>(), 8.f);
}

TEST(GradientTapeTest, NonPersistentTapeUsedTwiceIsAnError) {
  const Tensor x = constant(2.f);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = x * x;
  tape.gradient(y, x);
  try {
    tape.gradient(y, x);
    FAIL() << "expected FailedPreconditionError";
  } catch (const FailedPreconditionError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "non-persistent GradientTape can only be used to compute one set"),
              std::string::npos);
  }
}

TEST(GradientTapeTest, PersistentTapeCanBeUsedRepeatedly) {
  const Tensor x = constant(2.f);
  GradientTape tape({.persistent = true});
  tape.watch(x);
  const Tensor y = x * x;
  const Tensor z = y * x;
  EXPECT_FLOAT_EQ(tape.gradient(y, x).item<float>(), 4.f);
  EXPECT_FLOAT_EQ(tape.gradient(z, x).item<float>(), 12.f);
  EXPECT_FLOAT_EQ(tape.gradient(z, y).item<float>(), 2.f);
}

TEST(GradientTapeTest, NestedTapesGiveSecondDerivatives) {
  const Tensor x = constant(2.f);
  GradientTape outer;
  outer.watch(x);
  Tensor dy;
  {
    GradientTape inner;
    inner.watch(x);
    const Tensor y = x * x * x;
    dy = inner.gradient(y, x);  // 3x^2 = 12
  }
  EXPECT_FLOAT_EQ(dy.item<float>(), 12.f);
  EXPECT_FLOAT_EQ(outer.gradient(dy, x).item<float>(), 12.f);  // 6x = 12
}

TEST(GradientTapeTest, ThirdDerivativeThroughThreeTapes) {
  const Tensor x = constant(3.0);
  GradientTape t3;
  t3.watch(x);
  GradientTape t2;
  t2.watch(x);
  GradientTape t1;
  t1.watch(x);
  const Tensor y = x * x * x * x;        // x^4
  const Tensor d1 = t1.gradient(y, x);   // 4x^3 = 108
  const Tensor d2 = t2.gradient(d1, x);  // 12x^2 = 108
  const Tensor d3 = t3.gradient(d2, x);  // 24x = 72
  EXPECT_DOUBLE_EQ(d1.item<double>(), 108.0);
  EXPECT_DOUBLE_EQ(d2.item<double>(), 108.0);
  EXPECT_DOUBLE_EQ(d3.item<double>(), 72.0);
}

TEST(GradientTapeTest, UnconnectedSourcesGetNoneOrZero) {
  const Tensor x = constant({1.f, 2.f});
  const Tensor z = constant({5.f, 5.f});
  GradientTape tape({.persistent = true});
  tape.watch(x);
  tape.watch(z);
  const Tensor y = x * 2.f;
  EXPECT_FALSE(tape.gradient(y, z).defined());
  const Tensor g = tape.gradient(y, z, {.unconnected_gradients = UnconnectedGradients::ZERO});
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{0.f, 0.f}));
}

TEST(GradientTapeTest, IntegerSourcesGetNoGradient) {
  const Tensor i = constant({int32_t{1}, int32_t{2}});
  const Tensor x = constant({1.f, 1.f});
  GradientTape tape;
  tape.watch(i);
  tape.watch(x);
  const Tensor y = cast(i, DType::float32) * x;
  const auto g = tape.gradient(y, std::vector<Tensor>{i, x});
  EXPECT_FALSE(g[0].defined());
  EXPECT_EQ(g[1].to_vector<float>(), (std::vector<float>{1.f, 2.f}));
}

TEST(GradientTapeTest, StopGradientBlocksThePath) {
  const Tensor x = constant(3.f);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = x * stop_gradient(x);  // d/dx = stop(x) = 3
  EXPECT_FLOAT_EQ(tape.gradient(y, x).item<float>(), 3.f);
}

TEST(GradientTapeTest, TargetEqualToSourceHasGradientOne) {
  const Tensor x = constant({1.f, 2.f});
  GradientTape tape;
  tape.watch(x);
  EXPECT_EQ(tape.gradient(x, x).to_vector<float>(), (std::vector<float>{1.f, 1.f}));
}

TEST(GradientTapeTest, TrainableVariablesAreWatchedOnRead) {
  Variable w(constant({1.f, 2.f}), {.name = "w"});
  Variable frozen(constant({1.f, 1.f}), {.name = "frozen", .trainable = false});
  GradientTape tape;
  const Tensor y = reduce_sum(w.value() * w.value() * frozen.value());
  const auto g = tape.gradient(y, std::vector<Variable>{w, frozen});
  EXPECT_EQ(g[0].to_vector<float>(), (std::vector<float>{2.f, 4.f}));  // two reads, summed
  EXPECT_FALSE(g[1].defined());
  ASSERT_EQ(tape.watched_variables().size(), 0u);  // released with the records
}

TEST(GradientTapeTest, ExplicitlyWatchedVariablesAreWatchedWithoutAutoWatch) {
  Variable a(constant(2.f), {.name = "a"});
  Variable b(constant(3.f), {.name = "b", .trainable = false});
  GradientTape tape({.persistent = true, .watch_accessed_variables = false});
  tape.watch(b);
  const Tensor y = a.value() * b.value();
  EXPECT_FALSE(tape.gradient(y, a).defined());
  EXPECT_FLOAT_EQ(tape.gradient(y, b).item<float>(), 2.f);
  ASSERT_EQ(tape.watched_variables().size(), 1u);
  EXPECT_EQ(tape.watched_variables()[0].name(), "b");
}

TEST(GradientTapeTest, VariableReadBeforeTheTapeIsNotWatched) {
  Variable w(constant(2.f));
  const Tensor early = w.value();
  GradientTape tape;
  const Tensor y = early * w.value();
  EXPECT_FLOAT_EQ(tape.gradient(y, w).item<float>(), 2.f);  // only the later read counts
}

TEST(GradientTapeTest, TapesAreThreadLocal) {
  const Tensor x = constant(2.f);
  GradientTape tape;
  tape.watch(x);
  Tensor other;
  std::thread([&] { other = x * x; }).join();
  EXPECT_EQ(tape.num_recorded_ops(), 0u);
  EXPECT_FALSE(tape.gradient(other, x).defined());
}

TEST(GradientTapeTest, OnlyOpsOnAPathFromTheSourcesAreDifferentiated) {
  const Tensor x = constant(2.f);
  const Tensor u = constant(5.f);
  GradientTape tape;
  tape.watch(x);
  tape.watch(u);
  const Tensor side = exp(u) * 100.f;  // recorded, not on a path to y
  const Tensor y = x * 3.f;
  EXPECT_EQ(tape.num_recorded_ops(), 3u);
  EXPECT_FLOAT_EQ(tape.gradient(y, x).item<float>(), 3.f);
  (void)side;
}

TEST(GradientTapeTest, NonPersistentTapeReleasesWhatItHeldAfterGradient) {
  std::weak_ptr<Buffer> held;
  GradientTape tape;
  Tensor y;
  {
    const Tensor x = constant({1.f, 2.f});
    tape.watch(x);
    const Tensor e = exp(x);  // Exp keeps its output for the backward pass
    held = e.buffer();
    y = reduce_sum(e);
    tape.gradient(y, x);
  }
  EXPECT_TRUE(held.expired());
  EXPECT_EQ(tape.num_recorded_ops(), 0u);
}

TEST(GradientTapeTest, RecordsKeepOnlyWhatTheGradientNeeds) {
  std::weak_ptr<Buffer> input_of_add;
  GradientTape tape({.persistent = true});
  Tensor y;
  {
    const Tensor a = constant({1.f, 2.f}) * 1.f;  // unwatched: a temporary
    const Tensor x = constant({3.f, 4.f});
    tape.watch(x);
    input_of_add = a.buffer();
    y = a + x;  // Add's gradient needs shapes only
  }
  EXPECT_TRUE(input_of_add.expired());
}

TEST(GradientTapeTest, GradientOfAVariableThroughAMatmulTrainingStep) {
  Variable w(constant({1.f, 2.f, 3.f, 4.f}, {2, 2}), {.name = "w"});
  const Tensor x = constant({1.f, 1.f}, {1, 2});
  GradientTape tape;
  const Tensor loss = reduce_sum(matmul(x, w.value()));
  const Tensor g = tape.gradient(loss, w);
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{1.f, 1.f, 1.f, 1.f}));
  w.assign_sub(g * 0.5f);
  EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f}));
}

// A replica's collectives that hand the tape a sink recording what it is
// told, and when: the gradients already reported at each report.
class RecordingCollectives final : public ReplicaCollectives {
 public:
  struct Report {
    size_t source;
    Tensor gradient;
  };
  int replica_id() const override { return 0; }
  std::vector<Tensor> all_reduce(bool, const std::vector<Tensor>& values) override {
    return values;
  }
  std::vector<Tensor> all_gather(const std::vector<Tensor>& values, int64_t) override {
    return values;
  }
  std::unique_ptr<GradientSink> gradient_sink(size_t num_sources) override {
    sources = num_sources;
    class Sink final : public GradientSink {
     public:
      explicit Sink(std::vector<Report>& reports) : reports_(&reports) {}
      void gradient_final(size_t source, const Tensor& gradient) override {
        reports_->push_back({source, gradient});
      }

     private:
      std::vector<Report>* reports_;
    };
    return std::make_unique<Sink>(reports);
  }
  size_t sources = 0;
  std::vector<Report> reports;
};

// The hook the overlapped all-reduce uses: the gradient of each variable is
// reported once, as soon as the backward pass cannot add to it any more
// (the last layer's first), and it is the very tensor gradient() returns.
TEST(GradientTapeTest, EachVariablesGradientIsReportedOnceAsSoonAsItIsFinal) {
  const Tensor x = constant(std::vector<float>{1, -2, 3, 4, -5, 6}, {2, 3});
  Variable w1(constant(std::vector<float>{0.5f, -1, 2, 0.25f, -0.5f, 1}, {3, 2}), {.name = "w1"});
  Variable w2(constant(std::vector<float>{1.5f, -2}, {2, 1}), {.name = "w2"});
  Variable unused(constant(1.f), {.name = "unused"});
  // w1 is read twice (two paths); w2 once, after both reads of w1.
  auto loss_of = [&] {
    const Tensor h = relu(matmul(x, w1.value())) + matmul(x, w1.value()) * 0.5f;
    return reduce_sum(square(matmul(h, w2.value())));
  };
  std::vector<Tensor> plain;
  {
    GradientTape tape;
    plain = tape.gradient(loss_of(), std::vector<Variable>{w1, unused, w2});
  }
  RecordingCollectives collectives;
  std::vector<Tensor> grads;
  {
    ReplicaCollectivesScope scope(collectives);
    GradientTape tape;
    grads = tape.gradient(loss_of(), std::vector<Variable>{w1, unused, w2});
  }
  ASSERT_EQ(collectives.sources, 3u);
  // `unused` has no op reading it: final before the walk; then w2 (read by
  // the last matmul), then w1 once the walk passed its first read.
  ASSERT_EQ(collectives.reports.size(), 3u);
  EXPECT_EQ(collectives.reports[0].source, 1u);
  EXPECT_FALSE(collectives.reports[0].gradient.defined());
  EXPECT_EQ(collectives.reports[1].source, 2u);
  EXPECT_EQ(collectives.reports[2].source, 0u);
  EXPECT_EQ(collectives.reports[1].gradient.id(), grads[2].id());
  EXPECT_EQ(collectives.reports[2].gradient.id(), grads[0].id());
  // The sink changes nothing in the results: the same bits as without it.
  for (size_t i : {size_t{0}, size_t{2}}) {
    ASSERT_TRUE(grads[i].defined() && plain[i].defined());
    EXPECT_EQ(grads[i].to_vector<float>(), plain[i].to_vector<float>()) << "source " << i;
  }
  EXPECT_FALSE(grads[1].defined());
  // d/dw2 of sum((h w2)^2) = h^T (2 h w2), computed here without a tape.
  const Tensor xw = matmul(x, w1.value());
  const Tensor h = relu(xw) + xw * 0.5f;
  const std::vector<float> expected_w2 =
      matmul(transpose(h), matmul(h, w2.value()) * 2.f).to_vector<float>();
  const std::vector<float> got_w2 = grads[2].to_vector<float>();
  ASSERT_EQ(got_w2.size(), expected_w2.size());
  for (size_t i = 0; i < got_w2.size(); ++i) EXPECT_NEAR(got_w2[i], expected_w2[i], 1e-4f);
}

// Gradients of tensors (not variables) and tapes outside a replica's
// collectives report to nobody.
TEST(GradientTapeTest, TensorSourcesAskForNoSink) {
  RecordingCollectives collectives;
  ReplicaCollectivesScope scope(collectives);
  const Tensor x = constant(2.f);
  GradientTape tape;
  tape.watch(x);
  EXPECT_FLOAT_EQ(tape.gradient(x * x, x).item<float>(), 4.f);
  EXPECT_EQ(collectives.sources, 0u);
  EXPECT_TRUE(collectives.reports.empty());
}

}  // namespace
}  // namespace strata
