#include "strata/keras/layer.h"

#include <gtest/gtest.h>

#include "strata/base/errors.h"
#include "strata/ops/math_ops.h"
#include "strata/ops/operators.h"

namespace strata::keras {
namespace {

// y = x * scale + shift, with a trainable scale and a non-trainable shift.
class ScaleShift : public Layer {
 public:
  explicit ScaleShift(const LayerArgs& args = {}) : Layer("ScaleShift", "scale_shift", args) {}
  TensorShape compute_output_shape(const TensorShape& s) const override { return s; }
  int builds = 0;

 protected:
  void build_weights(const TensorShape& input_shape) override {
    ++builds;
    const TensorShape features{input_shape.dim(input_shape.rank() - 1)};
    scale_ = add_weight("scale", features, {.initializer = initializers::ones()});
    shift_ =
        add_weight("shift", features, {.initializer = initializers::zeros(), .trainable = false});
  }
  Tensor call(const Tensor& x, bool) override { return x * scale_.value() + shift_.value(); }

 private:
  Variable scale_, shift_;
};

class Pair : public Layer {
 public:
  Pair() : Layer("Pair", "pair") {}
  TensorShape compute_output_shape(const TensorShape& s) const override { return s; }
  std::shared_ptr<ScaleShift> a = track_layer(std::make_shared<ScaleShift>());
  std::shared_ptr<ScaleShift> b = track_layer(std::make_shared<ScaleShift>());

 protected:
  Tensor call(const Tensor& x, bool training) override { return (*b)((*a)(x, training), training); }
};

TEST(LayerTest, BuildsOnFirstCallAndNamesWeightsUniquely) {
  reset_uids_for_testing();
  ScaleShift first;
  ScaleShift second;
  EXPECT_EQ(first.name(), "scale_shift");
  EXPECT_EQ(second.name(), "scale_shift_1");
  EXPECT_FALSE(first.built());
  Tensor y = first(strata::constant({1.f, 2.f, 3.f, 4.f}, {2, 2}));
  EXPECT_TRUE(first.built());
  first(strata::constant({1.f, 2.f}, {1, 2}));
  EXPECT_EQ(first.builds, 1);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  ASSERT_EQ(first.weights().size(), 2u);
  EXPECT_EQ(first.weights()[0].name(), "scale_shift/scale");
  EXPECT_EQ(first.trainable_weights().size(), 1u);
  EXPECT_EQ(first.non_trainable_weights().size(), 1u);
  EXPECT_EQ(first.count_params(), 4);
}

TEST(LayerTest, NestedLayersAndFreezing) {
  reset_uids_for_testing();
  Pair pair;
  pair(strata::constant({1.f, 2.f, 3.f}, {1, 3}));
  EXPECT_EQ(pair.weights().size(), 4u);
  EXPECT_EQ(pair.trainable_variables().size(), 2u);
  pair.set_trainable(false);
  EXPECT_TRUE(pair.trainable_variables().empty());
  EXPECT_EQ(pair.non_trainable_weights().size(), 4u);
  EXPECT_EQ(pair.count_params(), 12);
}

TEST(LayerTest, SetWeightsChecksEverythingBeforeAssigning) {
  reset_uids_for_testing();
  ScaleShift layer;
  layer(strata::constant({1.f, 2.f}, {1, 2}));
  const std::vector<Tensor> before = layer.get_weights();
  try {
    layer.set_weights({strata::constant({5.f, 6.f}, {2}), strata::constant({1.f, 2.f, 3.f}, {3})});
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("scale_shift/shift"), std::string::npos) << e.what();
  }
  EXPECT_EQ(layer.get_weights()[0].to_vector<float>(), before[0].to_vector<float>());
  EXPECT_THROW(layer.set_weights({strata::constant({5.f, 6.f}, {2})}), InvalidArgumentError);
  layer.set_weights({strata::constant({5.f, 6.f}, {2}), strata::constant({1.f, 1.f}, {2})});
  EXPECT_EQ(layer(strata::constant({1.f, 1.f}, {1, 2})).to_vector<float>(),
            (std::vector<float>{6, 7}));
}

TEST(LayerTest, RejectsBadInputShapeAndUndefinedInput) {
  EXPECT_THROW(ScaleShift({.input_shape = std::vector<int64_t>{0}}), InvalidArgumentError);
  ScaleShift layer;
  EXPECT_THROW(layer(Tensor()), InvalidArgumentError);
}

}  // namespace
}  // namespace strata::keras
