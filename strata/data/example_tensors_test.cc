#include "strata/data/example_tensors.h"

#include <gtest/gtest.h>

#include "strata/base/errors.h"

namespace strata::data {
namespace {

std::string image_example(float first, int64_t label) {
  io::Example e;
  std::vector<float> pixels(784, 0.f);
  pixels[0] = first;
  e.set_float_list("image", pixels)
      .set_int64_list("label", {label})
      .set_bytes_list("tags", {"a", "b"});
  return e.serialize();
}

TEST(ExampleTensors, TheApiSpellingWithTensorDTypesParsesToTensors) {
  const io::FeatureSpecs specs = {{"image", io::FixedLenFeature({784}, float32)},
                                  {"label", io::FixedLenFeature({}, int64)},
                                  {"tags", io::VarLenFeature(DType::string)}};
  auto t = io::parse_single_example(image_example(0.5f, 7), specs);
  EXPECT_EQ(t.at("image").shape(), TensorShape({784}));
  EXPECT_EQ(t.at("image").to_vector<float>()[0], 0.5f);
  EXPECT_EQ(t.at("label").item<int64_t>(), 7);
  EXPECT_EQ(t.at("tags/values").to_vector<std::string>(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(t.at("tags/indices").to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(t.at("tags/dense_shape").to_vector<int64_t>(), (std::vector<int64_t>{2}));
}

TEST(ExampleTensors, BatchesOfRecords) {
  const io::FeatureSpecs specs = {{"label", io::FixedLenFeature({}, int64)},
                                  {"image", io::FixedLenFeature({784}, float32)}};
  const Tensor records =
      constant(std::vector<std::string>{image_example(1.f, 3), image_example(2.f, 4)});
  auto t = io::parse_example(records, specs);
  EXPECT_EQ(t.at("label").to_vector<int64_t>(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(t.at("image").shape(), TensorShape({2, 784}));
  EXPECT_EQ(t.at("image").to_vector<float>()[784], 2.f);
}

// tf.io.parse_example's documented sparse example:
//   serialized = [features {feature {key: "ft" value {float_list {value: [1.0, 2.0]}}}},
//                 features {feature []},
//                 features {feature {key: "ft" value {float_list {value: [3.0]}}}}]
//   tf.io.parse_example(serialized, {"ft": tf.io.VarLenFeature(tf.float32)})
//   -> {"ft": SparseTensor(indices=[[0, 0], [0, 1], [2, 0]], values=[1.0, 2.0, 3.0],
//                          dense_shape=(3, 2))}
TEST(ExampleTensors, ParseExampleGivesTheDocumentedSparseTensor) {
  io::Example first;
  first.set_float_list("ft", {1.f, 2.f});
  io::Example third;
  third.set_float_list("ft", {3.f});
  const Tensor serialized = constant(
      std::vector<std::string>{first.serialize(), io::Example().serialize(), third.serialize()});
  auto t = io::parse_example(serialized, {{"ft", io::VarLenFeature(float32)}});
  EXPECT_EQ(t.at("ft/indices").shape(), TensorShape({3, 2}));
  EXPECT_EQ(t.at("ft/indices").to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 1, 2, 0}));
  EXPECT_EQ(t.at("ft/values").to_vector<float>(), (std::vector<float>{1.f, 2.f, 3.f}));
  EXPECT_EQ(t.at("ft/dense_shape").to_vector<int64_t>(), (std::vector<int64_t>{3, 2}));
}

// tf.io.parse_example's documented dense example, the second example without "age":
//   features = {"age": tf.io.FixedLenFeature([], dtype=tf.int64, default_value=-1),
//               "gender": tf.io.FixedLenFeature([], dtype=tf.string)}
//   -> {"age": [0, -1], "gender": [b"f", b"f"]}
TEST(ExampleTensors, ParseExampleFillsAMissingFeatureWithItsDefault) {
  io::Example with_age;
  with_age.set_int64_list("age", {0}).set_bytes_list("gender", {"f"});
  io::Example without_age;
  without_age.set_bytes_list("gender", {"f"});
  const Tensor serialized =
      constant(std::vector<std::string>{with_age.serialize(), without_age.serialize()});
  io::FeatureValues minus_one;
  minus_one.dtype = io::FeatureDType::int64;
  minus_one.int64_values = {-1};
  auto t = io::parse_example(serialized, {{"age", io::FixedLenFeature({}, int64, minus_one)},
                                          {"gender", io::FixedLenFeature({}, DType::string)}});
  EXPECT_EQ(t.at("age").dtype(), DType::int64);
  EXPECT_EQ(t.at("age").to_vector<int64_t>(), (std::vector<int64_t>{0, -1}));
  EXPECT_EQ(t.at("gender").to_vector<std::string>(), (std::vector<std::string>{"f", "f"}));
  // One record as a scalar string tensor: tf.io.parse_single_example(serialized[0], features).
  auto one = io::parse_single_example(constant(without_age.serialize()),
                                      {{"age", io::FixedLenFeature({}, int64, minus_one)}});
  EXPECT_EQ(one.at("age").shape(), TensorShape({}));
  EXPECT_EQ(one.at("age").item<int64_t>(), -1);
}

TEST(ExampleTensors, BadArgumentsNameWhatIsWrong) {
  EXPECT_THROW(io::FixedLenFeature({1}, DType::float64), InvalidArgumentError);
  const io::FeatureSpecs specs = {{"label", io::FixedLenFeature({}, int64)}};
  EXPECT_THROW(io::parse_example(constant(1.f), specs), InvalidArgumentError);
  try {
    io::parse_single_example(image_example(0.f, 1), {{"missing", io::FixedLenFeature({}, int64)}});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata::data
