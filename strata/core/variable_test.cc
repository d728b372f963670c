#include "strata/core/variable.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "strata/base/errors.h"
#include "strata/core/device.h"

namespace strata {
namespace {

TEST(VariableTest, EnumsHaveTensorFlowsIntegerValues) {
  EXPECT_EQ(static_cast<int>(VariableSynchronization::AUTO), 0);
  EXPECT_EQ(static_cast<int>(VariableSynchronization::NONE), 1);
  EXPECT_EQ(static_cast<int>(VariableSynchronization::ON_WRITE), 2);
  EXPECT_EQ(static_cast<int>(VariableSynchronization::ON_READ), 3);
  EXPECT_EQ(static_cast<int>(VariableAggregation::NONE), 0);
  EXPECT_EQ(static_cast<int>(VariableAggregation::SUM), 1);
  EXPECT_EQ(static_cast<int>(VariableAggregation::MEAN), 2);
  EXPECT_EQ(static_cast<int>(VariableAggregation::ONLY_FIRST_REPLICA), 3);
}

TEST(VariableTest, HoldsItsInitialValueAndOptions) {
  Variable v(constant({1.f, 2.f}, {2}), {.name = "w",
                                         .trainable = true,
                                         .synchronization = VariableSynchronization::AUTO,
                                         .aggregation = VariableAggregation::SUM});
  EXPECT_EQ(v.name(), "w");
  EXPECT_EQ(v.shape(), TensorShape({2}));
  EXPECT_EQ(v.dtype(), DType::float32);
  EXPECT_TRUE(v.trainable());
  EXPECT_EQ(v.aggregation(), VariableAggregation::SUM);
  EXPECT_EQ(v.device(), current_device().name());
  EXPECT_EQ(v.value().to_vector<float>(), (std::vector<float>{1.f, 2.f}));
  EXPECT_EQ(v.read_value().to_vector<float>(), (std::vector<float>{1.f, 2.f}));
}

TEST(VariableTest, DefaultsMatchTensorFlow) {
  Variable v(constant(1.f));
  EXPECT_EQ(v.name(), "Variable");
  EXPECT_TRUE(v.trainable());
  EXPECT_EQ(v.synchronization(), VariableSynchronization::AUTO);
  EXPECT_EQ(v.aggregation(), VariableAggregation::NONE);
  Variable on_read(constant(1.f), {.synchronization = VariableSynchronization::ON_READ});
  EXPECT_FALSE(on_read.trainable());
  Variable on_read_trainable(
      constant(1.f), {.trainable = true, .synchronization = VariableSynchronization::ON_READ});
  EXPECT_TRUE(on_read_trainable.trainable());
}

TEST(VariableTest, DoesNotAliasTheInitialValue) {
  Tensor init = constant({1.f, 2.f});
  Variable v(init);
  v.assign_add(constant({10.f, 10.f}));
  EXPECT_EQ(init.to_vector<float>(), (std::vector<float>{1.f, 2.f}));
  EXPECT_EQ(v.value().to_vector<float>(), (std::vector<float>{11.f, 12.f}));
}

TEST(VariableTest, AssignAddAndSubUpdateTheValue) {
  Variable v(constant({int64_t{5}, int64_t{7}}));
  v.assign(constant({int64_t{1}, int64_t{2}}));
  EXPECT_EQ(v.value().to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  v.assign_add(constant({int64_t{3}, int64_t{3}}));
  EXPECT_EQ(v.value().to_vector<int64_t>(), (std::vector<int64_t>{4, 5}));
  v.assign_sub(constant({int64_t{1}, int64_t{10}}));
  EXPECT_EQ(v.value().to_vector<int64_t>(), (std::vector<int64_t>{3, -5}));
}

TEST(VariableTest, AssignmentWritesInPlaceWhenNoReaderHoldsTheValue) {
  Variable v(constant({1.0, 2.0}));
  const void* before = v.value().raw_data();  // the temporary read is released here
  v.assign_add(constant({1.0, 1.0}));
  v.assign(constant({5.0, 6.0}));
  EXPECT_EQ(v.value().raw_data(), before);
}

TEST(VariableTest, ReadsHeldAcrossAnAssignmentKeepTheOldValue) {
  Variable v(constant({1.f, 2.f}));
  Tensor old = v.value();
  v.assign_add(constant({1.f, 1.f}));
  EXPECT_EQ(old.to_vector<float>(), (std::vector<float>{1.f, 2.f}));
  Tensor old2 = v.value();
  v.assign(constant({9.f, 9.f}));
  EXPECT_EQ(old2.to_vector<float>(), (std::vector<float>{2.f, 3.f}));
  EXPECT_EQ(v.value().to_vector<float>(), (std::vector<float>{9.f, 9.f}));
}

TEST(VariableTest, EachReadIsANewTensorIdentity) {
  Variable v(constant(1.f));
  EXPECT_NE(v.value().id(), v.value().id());
}

TEST(VariableTest, CopiesShareTheVariable) {
  Variable a(constant(1.f));
  // The copy is the point of the test.
  const Variable b = a;  // NOLINT(performance-unnecessary-copy-initialization)
  b.assign(constant(4.f));
  EXPECT_EQ(a.value().item<float>(), 4.f);
  EXPECT_TRUE(a.is_same(b));
  EXPECT_FALSE(a.is_same(Variable(constant(4.f))));
}

TEST(VariableTest, AssigningAnotherShapeNamesTheVariableAndBothShapes) {
  Variable v(constant({1.f, 2.f}), {.name = "kernel"});
  try {
    v.assign(constant({1.f, 2.f, 3.f}));
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("kernel"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[2]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[3]"), std::string::npos) << msg;
  }
  EXPECT_THROW(v.assign_add(constant({1.f})), InvalidArgumentError);
  EXPECT_THROW(v.assign_sub(constant({1.0, 2.0})), InvalidArgumentError);  // float64 vs float32
  EXPECT_EQ(v.value().to_vector<float>(), (std::vector<float>{1.f, 2.f}));
}

TEST(VariableTest, AddingToABoolVariableIsRejected) {
  Variable v(constant(true));
  EXPECT_THROW(v.assign_add(constant(true)), InvalidArgumentError);
  v.assign(constant(false));
  EXPECT_FALSE(v.value().item<bool>());
}

TEST(VariableTest, UpdateInPlaceRewritesTheBufferAndSparesEarlierReads) {
  Variable v(constant<float>({1, 2, 3}), {.name = "w"});
  const void* first = nullptr;
  v.update_in_place([&](void* data) {
    first = data;
    for (int i = 0; i < 3; ++i) static_cast<float*>(data)[i] *= 2;
  });
  EXPECT_EQ(v.value().to_vector<float>(), (std::vector<float>{2, 4, 6}));
  // No reader: the same buffer is rewritten again.
  v.update_in_place([&](void* data) {
    EXPECT_EQ(data, first);
    static_cast<float*>(data)[0] = 10;
  });
  // A reader keeps its value: the update goes to a fresh copy of the current value.
  const Tensor old = v.value();
  v.update_in_place([&](void* data) {
    EXPECT_NE(data, old.raw_data());
    EXPECT_EQ(static_cast<float*>(data)[1], 4.f);
    static_cast<float*>(data)[1] = -1;
  });
  EXPECT_EQ(old.to_vector<float>(), (std::vector<float>{10, 4, 6}));
  EXPECT_EQ(v.value().to_vector<float>(), (std::vector<float>{10, -1, 6}));
}

TEST(VariableTest, UpdateInPlaceRefusesStringsAndEmptyFunctions) {
  Variable s(constant("a"), {.name = "s"});
  try {
    s.update_in_place([](void*) {});
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("update_in_place(s"), std::string::npos) << what;
    EXPECT_NE(what.find("dtype string"), std::string::npos) << what;
  }
  Variable f(constant(1.f));
  EXPECT_THROW(f.update_in_place(nullptr), InvalidArgumentError);
}

TEST(VariableTest, StringVariablesCanBeAssigned) {
  Variable v(constant("a"));
  Tensor old = v.value();
  v.assign(constant("bc"));
  EXPECT_EQ(v.value().item<std::string>(), "bc");
  EXPECT_EQ(old.item<std::string>(), "a");
}

TEST(VariableTest, EmptyHandleAndEmptyInitialValueAreErrors) {
  Variable empty;
  EXPECT_FALSE(empty.defined());
  EXPECT_THROW(empty.value(), FailedPreconditionError);
  EXPECT_THROW(Variable{Tensor{}}, InvalidArgumentError);
  EXPECT_THROW(Variable(constant(1.f), {.aggregation = static_cast<VariableAggregation>(7)}),
               InvalidArgumentError);
}

TEST(VariableCreatorScopeTest, InnermostCreatorRunsFirstAndChainsToTheDefault) {
  std::vector<std::string> calls;
  VariableCreatorScope outer([&](const NextVariableCreator& next, VariableArgs args) {
    calls.push_back("outer:" + args.options.name);
    args.options.name = "outer/" + args.options.name;
    return next(std::move(args));
  });
  VariableCreatorScope inner([&](const NextVariableCreator& next, VariableArgs args) {
    calls.push_back("inner:" + args.options.name);
    args.options.name = "inner/" + args.options.name;
    return next(std::move(args));
  });
  Variable v(constant(1.f), {.name = "v"});
  EXPECT_EQ(v.name(), "outer/inner/v");
  EXPECT_EQ(calls, (std::vector<std::string>{"inner:v", "outer:inner/v"}));
}

// A stand-in for a distributed implementation: counts the reads.
class CountingImpl final : public VariableImpl {
 public:
  explicit CountingImpl(const VariableArgs& args) : inner_(make_local_variable_impl(args)) {}
  Tensor read() const override {
    ++reads;
    return inner_->read();
  }
  void assign(const Tensor& v) override { inner_->assign(v); }
  void assign_add(const Tensor& v) override { inner_->assign_add(v); }
  void assign_sub(const Tensor& v) override { inner_->assign_sub(v); }
  const std::string& name() const override { return inner_->name(); }
  const TensorShape& shape() const override { return inner_->shape(); }
  DType dtype() const override { return inner_->dtype(); }
  const std::string& device() const override { return inner_->device(); }
  bool trainable() const override { return inner_->trainable(); }
  VariableSynchronization synchronization() const override { return inner_->synchronization(); }
  VariableAggregation aggregation() const override { return inner_->aggregation(); }
  mutable std::atomic<int> reads{0};

 private:
  std::shared_ptr<VariableImpl> inner_;
};

TEST(VariableCreatorScopeTest, ACreatorCanReplaceTheImplementationBehindTheHandle) {
  std::shared_ptr<CountingImpl> made;
  {
    VariableCreatorScope scope([&](const NextVariableCreator&, const VariableArgs& args) {
      made = std::make_shared<CountingImpl>(args);
      return Variable(made);
    });
    Variable v(constant(2.f), {.name = "d"});
    EXPECT_EQ(v.impl_ptr(), made);
    v.value();
    v.read_value();
    EXPECT_EQ(made->reads.load(), 2);
  }
  // Outside the scope the default creator is used again.
  Variable plain(constant(2.f));
  EXPECT_NE(plain.impl_ptr(), made);
}

TEST(VariableCreatorScopeTest, TheCreatorStackIsThreadLocal) {
  int calls = 0;
  VariableCreatorScope scope([&](const NextVariableCreator& next, VariableArgs args) {
    ++calls;
    return next(std::move(args));
  });
  std::thread([] { Variable v(constant(1.f)); }).join();
  EXPECT_EQ(calls, 0);
  Variable v(constant(1.f));
  EXPECT_EQ(calls, 1);
}

class RecordingObserver final : public VariableAccessObserver {
 public:
  void variable_accessed(const Variable& v, const Tensor& value) override {
    names.push_back(v.name());
    ids.push_back(value.id());
  }
  std::vector<std::string> names;
  std::vector<uint64_t> ids;
};

TEST(VariableAccessObserverTest, ObserversSeeEveryReadWhileRegistered) {
  Variable v(constant(1.f), {.name = "a"});
  RecordingObserver obs;
  Tensor t;
  {
    VariableAccessObserverScope scope(obs);
    t = v.value();
  }
  v.value();
  ASSERT_EQ(obs.names, (std::vector<std::string>{"a"}));
  EXPECT_EQ(obs.ids[0], t.id());
}

// Concurrent assigns of whole constant vectors and concurrent reads: every read
// must be uniform (all elements from one assignment), and concurrent
// assign_adds must never be lost.
TEST(VariableThreadSafetyTest, ConcurrentReadsNeverSeeATornValue) {
  constexpr int64_t kN = 4096;
  Variable v(constant(std::vector<float>(kN, 0.f), {kN}));
  std::atomic<bool> torn{false};
  std::vector<std::thread> threads;
  for (int w = 1; w <= 2; ++w) {
    threads.emplace_back([&, w] {
      const Tensor value = constant(std::vector<float>(kN, static_cast<float>(w)), {kN});
      for (int i = 0; i < 300; ++i) v.assign(value);
    });
  }
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&] {
      for (int i = 0; i < 300; ++i) {
        const Tensor t = v.value();
        const float* p = t.data<float>();
        for (int64_t j = 1; j < kN; ++j) {
          if (p[j] != p[0]) torn = true;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(torn.load());
}

TEST(VariableThreadSafetyTest, ConcurrentAssignAddsAreNotLost) {
  Variable v(constant(int64_t{0}));
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&] {
      const Tensor one = constant(int64_t{1});
      for (int i = 0; i < 1000; ++i) {
        v.assign_add(one);
        if (i % 10 == 0) v.value();  // readers force the copy-on-write path too
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(v.value().item<int64_t>(), 4000);
}

}  // namespace
}  // namespace strata
