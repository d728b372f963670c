#include "strata/keras/layers/preprocessing.h"

#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/data/dataset.h"
#include "strata/keras/layers/serialization.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"

namespace strata::keras::layers {
namespace {

TEST(NormalizationTest, AdaptLearnsPerFeatureMeanAndVarianceAsKeras) {
  // norm = tf.keras.layers.Normalization()
  // norm.adapt(np.array([[1., 10.], [3., 10.], [5., 40.]]))
  // mean = [3, 20]; variance (population) = [8/3, 200]
  // norm([[3., 40.]]) = [[0, 20 / sqrt(200)]] = [[0, 1.4142135]]
  auto norm = Normalization();
  norm->adapt(strata::constant({1.f, 10.f, 3.f, 10.f, 5.f, 40.f}, {3, 2}));
  ASSERT_EQ(norm->weights().size(), 3u);
  EXPECT_EQ(norm->weights()[0].name(), "normalization/mean");
  EXPECT_EQ(norm->weights()[0].value().to_vector<float>(), (std::vector<float>{3.f, 20.f}));
  const std::vector<float> var = norm->weights()[1].value().to_vector<float>();
  EXPECT_FLOAT_EQ(var[0], 8.f / 3.f);
  EXPECT_FLOAT_EQ(var[1], 200.f);
  EXPECT_EQ(norm->weights()[2].value().item<int64_t>(), 3);
  EXPECT_TRUE(norm->trainable_weights().empty());
  std::vector<float> y = (*norm)(strata::constant({3.f, 40.f}, {1, 2})).to_vector<float>();
  EXPECT_FLOAT_EQ(y[0], 0.f);
  EXPECT_FLOAT_EQ(y[1], 20.f / std::sqrt(200.f));
}

TEST(NormalizationTest, AdaptingToADatasetOfBatchesEqualsTheWholeData) {
  // The batches [[1], [2]] then [[3], [4], [10]] combine into mean 4 and
  // variance ((9 + 4 + 1 + 0 + 36) / 5) = 10, as adapting to all five values.
  auto norm = Normalization();
  auto ds =
      data::Dataset::from_tensor_slices({strata::constant({1.f, 2.f, 3.f, 4.f, 10.f}, {5, 1})})
          .batch(2);
  norm->adapt(ds);
  EXPECT_FLOAT_EQ(norm->weights()[0].value().to_vector<float>()[0], 4.f);
  EXPECT_FLOAT_EQ(norm->weights()[1].value().to_vector<float>()[0], 10.f);
  EXPECT_EQ(norm->weights()[2].value().item<int64_t>(), 5);
  // A second adapt starts afresh: [[0], [2]] -> mean 1, variance 1.
  norm->adapt(strata::constant({0.f, 2.f}, {2, 1}));
  EXPECT_FLOAT_EQ(norm->weights()[0].value().to_vector<float>()[0], 1.f);
  EXPECT_FLOAT_EQ(norm->weights()[1].value().to_vector<float>()[0], 1.f);
}

TEST(NormalizationTest, GivenStatisticsAxisNoneAndInvert) {
  // tf.keras.layers.Normalization(mean=2., variance=4.)([[4., 0.]]) = [[1., -1.]]
  auto given =
      Normalization({.mean = std::vector<double>{2.0}, .variance = std::vector<double>{4.0}});
  EXPECT_EQ((*given)(strata::constant({4.f, 0.f}, {1, 2})).to_vector<float>(),
            (std::vector<float>{1.f, -1.f}));
  EXPECT_TRUE(given->weights().empty());
  // invert=True maps back: 2 + [1, -1] * 2 = [4, 0].
  auto inverse = Normalization(
      {.mean = std::vector<double>{2.0}, .variance = std::vector<double>{4.0}, .invert = true});
  EXPECT_EQ((*inverse)(strata::constant({1.f, -1.f}, {1, 2})).to_vector<float>(),
            (std::vector<float>{4.f, 0.f}));
  // axis=None: one mean (2.5) and variance (1.25) over [[1, 2], [3, 4]]; uint8 input is cast.
  auto global = Normalization({.axis = std::nullopt});
  global->adapt(strata::constant(std::vector<uint8_t>{1, 2, 3, 4}, TensorShape{2, 2}));
  EXPECT_EQ(global->weights()[0].shape(), TensorShape({}));
  std::vector<float> z =
      (*global)(strata::constant(std::vector<uint8_t>{1, 4}, TensorShape{1, 2})).to_vector<float>();
  EXPECT_FLOAT_EQ(z[0], -1.5f / std::sqrt(1.25f));
  EXPECT_FLOAT_EQ(z[1], 1.5f / std::sqrt(1.25f));
  EXPECT_THROW(Normalization({.mean = std::vector<double>{1.0}}), InvalidArgumentError);
}

// Keras's StringLookup docs:
//   data = tf.constant([["a", "c", "d"], ["d", "z", "b"]])
//   layer = tf.keras.layers.StringLookup()
//   layer.adapt(data)
//   layer.get_vocabulary()   # ['[UNK]', 'd', 'z', 'c', 'b', 'a']
//   layer(data)              # [[5, 3, 1], [1, 2, 4]]
TEST(StringLookupTest, AdaptSortsTheVocabularyByFrequencyAsKerasDocs) {
  const Tensor data =
      strata::constant(std::vector<std::string>{"a", "c", "d", "d", "z", "b"}, {2, 3});
  auto layer = StringLookup();
  layer->adapt(data);
  EXPECT_EQ(layer->get_vocabulary(), (std::vector<std::string>{"[UNK]", "d", "z", "c", "b", "a"}));
  EXPECT_EQ(layer->vocabulary_size(), 6);
  const Tensor ids = (*layer)(data);
  EXPECT_EQ(ids.dtype(), DType::int64);
  EXPECT_EQ(ids.shape(), TensorShape({2, 3}));
  EXPECT_EQ(ids.to_vector<int64_t>(), (std::vector<int64_t>{5, 3, 1, 1, 2, 4}));
  // Out of vocabulary -> 0.
  EXPECT_EQ(
      (*layer)(strata::constant(std::vector<std::string>{"q", "a"}, {2})).to_vector<int64_t>(),
      (std::vector<int64_t>{0, 5}));
}

// Keras's docs, a given vocabulary and its inverse:
//   vocab = ["a", "b", "c", "d"]
//   data = tf.constant([["a", "c", "d"], ["d", "z", "b"]])
//   tf.keras.layers.StringLookup(vocabulary=vocab)(data)   # [[1, 3, 4], [4, 0, 2]]
//   data = tf.constant([[1, 3, 4], [4, 0, 2]])
//   tf.keras.layers.StringLookup(vocabulary=vocab, invert=True)(data)
//   # [[b'a', b'c', b'd'], [b'd', b'[UNK]', b'b']]
TEST(StringLookupTest, GivenVocabularyAndInvertAsKerasDocs) {
  const std::vector<std::string> vocab = {"a", "b", "c", "d"};
  auto lookup = StringLookup({.vocabulary = vocab});
  const Tensor data =
      strata::constant(std::vector<std::string>{"a", "c", "d", "d", "z", "b"}, {2, 3});
  EXPECT_EQ((*lookup)(data).to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 4, 4, 0, 2}));
  auto inverse = StringLookup({.vocabulary = vocab, .invert = true});
  const Tensor strings =
      (*inverse)(strata::constant(std::vector<int64_t>{1, 3, 4, 4, 0, 2}, {2, 3}));
  EXPECT_EQ(strings.to_vector<std::string>(),
            (std::vector<std::string>{"a", "c", "d", "d", "[UNK]", "b"}));
  // max_tokens counts the OOV index; a repeated vocabulary entry is rejected.
  auto small = StringLookup({.max_tokens = 3});
  small->adapt(data);
  EXPECT_EQ(small->get_vocabulary(), (std::vector<std::string>{"[UNK]", "d", "z"}));
  EXPECT_THROW(StringLookup({.vocabulary = std::vector<std::string>{"a", "a"}}),
               InvalidArgumentError);
  EXPECT_THROW(StringLookup({.num_oov_indices = 2}), UnimplementedError);
}

// config = tf.keras.layers.StringLookup(vocabulary=["a", "b", "c", "d"]).get_config()
// config["vocabulary"] == ["a", "b", "c", "d"]; config["vocabulary_size"] == 5
// tf.keras.layers.StringLookup.from_config(config)(data)   # [[1, 3, 4], [4, 0, 2]]
TEST(StringLookupTest, GetConfigAndFromConfigRemakeTheLayerAsKeras) {
  const std::vector<std::string> vocab = {"a", "b", "c", "d"};
  auto layer = StringLookup({.vocabulary = vocab, .name = "lookup"});
  const nlohmann::json config = layer->get_config();
  EXPECT_EQ(config["name"], "lookup");
  EXPECT_EQ(config["dtype"], "int64");
  EXPECT_EQ(config["vocabulary"], nlohmann::json(vocab));
  EXPECT_EQ(config["vocabulary_size"], 5);
  EXPECT_EQ(config["oov_token"], "[UNK]");
  EXPECT_EQ(config["num_oov_indices"], 1);
  EXPECT_TRUE(config["max_tokens"].is_null());
  EXPECT_TRUE(config["mask_token"].is_null());
  EXPECT_EQ(config["output_mode"], "int");
  EXPECT_EQ(config["invert"], false);
  auto again = StringLookupLayer::from_config(config);
  const Tensor data =
      strata::constant(std::vector<std::string>{"a", "c", "d", "d", "z", "b"}, {2, 3});
  EXPECT_EQ((*again)(data).to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 4, 4, 0, 2}));
  EXPECT_EQ(again->name(), "lookup");
  // keras.layers.deserialize reads the same config; an adapted vocabulary travels with it.
  auto adapted = StringLookup({.max_tokens = 3});
  adapted->adapt(data);
  auto copy = deserialize(serialize(*adapted));
  EXPECT_EQ(std::dynamic_pointer_cast<StringLookupLayer>(copy)->get_vocabulary(),
            (std::vector<std::string>{"[UNK]", "d", "z"}));
  // Keras's arguments Strata does not support are refused by name.
  nlohmann::json masked = config;
  masked["mask_token"] = "";
  EXPECT_THROW(StringLookupLayer::from_config(masked), UnimplementedError);
  nlohmann::json one_hot = config;
  one_hot["output_mode"] = "one_hot";
  EXPECT_THROW(StringLookupLayer::from_config(one_hot), UnimplementedError);
  nlohmann::json bad = config;
  bad["vocabulary"] = 3;
  EXPECT_THROW(StringLookupLayer::from_config(bad), InvalidArgumentError);
}

}  // namespace
}  // namespace strata::keras::layers
