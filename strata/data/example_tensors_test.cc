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
  auto t = data::parse_single_example(image_example(0.5f, 7), specs);
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
  auto t = data::parse_example(records, specs);
  EXPECT_EQ(t.at("label").to_vector<int64_t>(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(t.at("image").shape(), TensorShape({2, 784}));
  EXPECT_EQ(t.at("image").to_vector<float>()[784], 2.f);
}

TEST(ExampleTensors, BadArgumentsNameWhatIsWrong) {
  EXPECT_THROW(io::FixedLenFeature({1}, DType::float64), InvalidArgumentError);
  const io::FeatureSpecs specs = {{"label", io::FixedLenFeature({}, int64)}};
  EXPECT_THROW(data::parse_example(constant(1.f), specs), InvalidArgumentError);
  try {
    data::parse_single_example(image_example(0.f, 1),
                               {{"missing", io::FixedLenFeature({}, int64)}});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata::data
