#include "strata/core/tensor.h"

#include <gtest/gtest.h>

#include <span>
#include <vector>

#include "strata/core/device.h"
#include "strata/core/tensor_spec.h"

namespace strata {
namespace {

TEST(Tensor, ConstantHoldsValuesShapeAndDtype) {
  Tensor t = constant({1.f, 2.f, 3.f, 4.f}, {2, 2});
  EXPECT_EQ(t.shape(), (TensorShape{2, 2}));
  EXPECT_EQ(t.dtype(), float32);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(t.num_elements(), 4);
  EXPECT_EQ(constant(int64_t{7}).item<int64_t>(), 7);
  EXPECT_EQ(constant(true).dtype(), bool_);
  EXPECT_EQ(constant("abc").item<std::string>(), "abc");
  EXPECT_EQ(constant(std::vector<double>{1.5}, {2, 2}).to_vector<double>(),
            (std::vector<double>{1.5, 1.5, 1.5, 1.5}));
}

TEST(Tensor, BuffersAre64ByteAligned) {
  for (int n : {0, 1, 3, 1000}) {
    Tensor t = Tensor::allocate(float32, {n});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  }
}

TEST(Tensor, CopiesShareTheBuffer) {
  Tensor a = constant({1, 2, 3});
  // The copy is the point of the test.
  const Tensor b = a;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_EQ(a.raw_data(), b.raw_data());
  EXPECT_EQ(a.id(), b.id());
}

TEST(Tensor, WrongCountOrTypeIsInvalidArgument) {
  try {
    constant({1.f, 2.f, 3.f}, {2, 2});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("expected 4 values for shape [2, 2], got 3"),
              std::string::npos)
        << e.what();
  }
  Tensor t = constant({1.f, 2.f});
  EXPECT_THROW(t.to_vector<int32_t>(), InvalidArgumentError);
  EXPECT_THROW(t.item<float>(), InvalidArgumentError);
  EXPECT_THROW(Tensor().shape(), FailedPreconditionError);
  EXPECT_THROW(TensorShape({2, -3}), InvalidArgumentError);
}

TEST(Tensor, SliceRowsAndReshapeAreViews) {
  Tensor t = constant({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor rows = t.slice_rows(1, 3);
  EXPECT_EQ(rows.shape(), (TensorShape{2, 2}));
  EXPECT_EQ(rows.to_vector<int32_t>(), (std::vector<int32_t>{2, 3, 4, 5}));
  EXPECT_EQ(rows.buffer(), t.buffer());
  EXPECT_NE(rows.id(), t.id());
  EXPECT_EQ(t.reshaped({6}).to_vector<int32_t>(), t.to_vector<int32_t>());
  EXPECT_THROW(t.reshaped({4}), InvalidArgumentError);
  EXPECT_THROW(t.slice_rows(2, 4), InvalidArgumentError);
  EXPECT_EQ(t.slice_rows(3, 3).num_elements(), 0);
}

TEST(Tensor, PrintsLikeTensorFlow) {
  EXPECT_EQ(constant({1.f, 2.f, 3.f, 4.f}, {2, 2}).to_string(),
            "tf.Tensor(\n[[1. 2.]\n [3. 4.]], shape=(2, 2), dtype=float32)");
  EXPECT_EQ(constant({1.5f, 2.f}).to_string(), "tf.Tensor([1.5 2. ], shape=(2,), dtype=float32)");
  EXPECT_EQ(constant(int64_t{3}).to_string(), "tf.Tensor(3, shape=(), dtype=int64)");
  EXPECT_EQ(constant(1.f).to_string(), "tf.Tensor(1.0, shape=(), dtype=float32)");
  EXPECT_EQ(constant(-2.5).to_string(), "tf.Tensor(-2.5, shape=(), dtype=float64)");
  // NumPy's digits (TensorFlow prints through NumPy): the shortest value that
  // reads back in the tensor's dtype, at most 8 fractional digits.
  //   tf.constant(0.1) + tf.constant(0.2)            -> tf.Tensor(0.3, shape=(), dtype=float32)
  //   tf.constant(1 / 3)                             -> tf.Tensor(0.33333334, ..., dtype=float32)
  //   tf.constant(1 / 3, tf.float64)                 -> tf.Tensor(0.3333333333333333, ...)
  //   tf.constant([1 / 3, 0.1 + 0.2], tf.float64)    -> [0.33333333 0.3       ]
  //   tf.constant(1e-5), tf.constant([1e-5, 1e-6])   -> 1e-05, [1.e-05 1.e-06]
  EXPECT_EQ(constant(0.1f + 0.2f).to_string(), "tf.Tensor(0.3, shape=(), dtype=float32)");
  EXPECT_EQ(constant(1.f / 3.f).to_string(), "tf.Tensor(0.33333334, shape=(), dtype=float32)");
  EXPECT_EQ(constant({1.0 / 3.0, 0.1 + 0.2}).values_string(), "[0.33333333 0.3       ]");
  EXPECT_EQ(constant(1.0 / 3.0).to_string(),
            "tf.Tensor(0.3333333333333333, shape=(), dtype=float64)");
  EXPECT_EQ(constant(1e-5f).to_string(), "tf.Tensor(1e-05, shape=(), dtype=float32)");
  EXPECT_EQ(constant({1e-5f, 1e-6f}).values_string(), "[1.e-05 1.e-06]");
  EXPECT_EQ(constant({true, false}).to_string(),
            "tf.Tensor([ True False], shape=(2,), dtype=bool)");
  EXPECT_EQ(constant("a'b").to_string(), "tf.Tensor(b'a\\'b', shape=(), dtype=string)");
  EXPECT_EQ(Tensor::allocate(float32, {0, 3}).to_string(),
            "tf.Tensor([], shape=(0, 3), dtype=float32)");
  std::vector<int32_t> big(2000, 1);
  const std::string s = constant(big).to_string();
  EXPECT_NE(s.find("1 1 1 ... 1 1 1"), std::string::npos) << s;
}

TEST(Tensor, LivesOnTheCurrentDevice) {
  Tensor t = constant(1.f);
  EXPECT_EQ(t.device(), current_device().name());
  EXPECT_EQ(t.placement().device_type(), "CPU");
}

TEST(TensorShape, HandlesUnknownDimensionsAndAxes) {
  TensorShape spec{-1, 784};
  EXPECT_FALSE(spec.is_fully_defined());
  EXPECT_EQ(spec.num_elements(), -1);
  EXPECT_TRUE(spec.is_compatible_with({128, 784}));
  EXPECT_FALSE(spec.is_compatible_with({128, 785}));
  EXPECT_FALSE(spec.is_compatible_with({784}));
  EXPECT_EQ(spec.to_string(), "[None, 784]");
  EXPECT_EQ(spec.merge_with({32, -1}), (TensorShape{32, 784}));
  EXPECT_EQ(TensorShape({2, 3, 4}).canonical_axis(-1, "t"), 2);
  EXPECT_THROW(TensorShape({2, 3}).canonical_axis(2, "reduce_sum"), InvalidArgumentError);
  EXPECT_TRUE(TensorShape::unknown_rank().is_compatible_with({1, 2, 3}));
  EXPECT_EQ(TensorShape{}.num_elements(), 1);
}

TEST(TensorShape, KeepsHighRanksAndViewsItsDimensions) {
  // Ranks up to kInlineDims live inside the object, higher ones on the heap:
  // both behave the same.
  for (int rank : {0, 1, TensorShape::kInlineDims, TensorShape::kInlineDims + 1, 9}) {
    std::vector<int64_t> dims(rank);
    for (int i = 0; i < rank; ++i) dims[i] = i + 2;
    const TensorShape s(dims);
    EXPECT_EQ(s.rank(), rank);
    const std::vector<int64_t> back = s.dims();  // converts to a vector
    EXPECT_EQ(back, dims);
    const TensorShape copy = s;  // NOLINT(performance-unnecessary-copy-initialization)
    EXPECT_EQ(copy, s);
    EXPECT_EQ(TensorShape(std::span<const int64_t>(s.dims())), s);
    if (rank == 0) continue;
    EXPECT_EQ(s.dims().back(), rank + 1);
    EXPECT_EQ(s.with_dim(0, 7).dim(0), 7);
    EXPECT_EQ(s.dim(0), 2);  // with_dim made a copy
    EXPECT_EQ(s.inserted(rank, 5).rank(), rank + 1);
    EXPECT_EQ(s.inserted(0, 5).dims()[1], 2);
    EXPECT_EQ(s.removed(0).rank(), rank - 1);
    EXPECT_EQ(s.concatenate(s).rank(), 2 * rank);
    EXPECT_EQ(s.concatenate(s).dims()[rank], 2);
    EXPECT_EQ(s.sub_shape(1, rank), s.removed(0));
  }
  EXPECT_NE((TensorShape{2, 3}), (TensorShape{2, 3, 1}));
  EXPECT_NE((TensorShape{}), TensorShape::unknown_rank());
  EXPECT_THROW(TensorShape({1, 2, 3, 4, 5, 6, -2}), InvalidArgumentError);
  EXPECT_THROW(TensorShape({2}).inserted(0, -5), InvalidArgumentError);
}

TEST(TensorSpec, PrintsAndMatchesTensors) {
  TensorSpec spec(TensorShape{-1, 2}, float32);
  EXPECT_EQ(spec.to_string(), "TensorSpec(shape=(None, 2), dtype=tf.float32, name=None)");
  EXPECT_TRUE(spec.is_compatible_with(constant({1.f, 2.f}, {1, 2})));
  EXPECT_FALSE(spec.is_compatible_with(constant({1, 2}, {1, 2})));
}

TEST(DType, NamesSizesAndPromotion) {
  EXPECT_EQ(dtype_name(bool_), "bool");
  EXPECT_EQ(dtype_from_name("int64"), int64);
  EXPECT_THROW(dtype_from_name("float16"), InvalidArgumentError);
  EXPECT_EQ(dtype_size(float64), 8u);
  EXPECT_EQ(promote_types(int32, float32), float32);
  EXPECT_EQ(promote_types(uint8, int32), int32);
  EXPECT_EQ(promote_types(bool_, uint8), uint8);
  EXPECT_EQ(promote_types(float32, float64), float64);
  EXPECT_THROW(promote_types(string, int32), InvalidArgumentError);
}

}  // namespace
}  // namespace strata
