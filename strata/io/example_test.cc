#include "strata/io/example.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "strata/base/errors.h"
#include "strata/testing/files.h"

namespace strata::io {
namespace {

using testing::from_hex;
using D = FeatureDType;

// Example{features{feature{"a": int64_list{value:[1]}}}} from the spec.
const std::string kSpecExample = from_hex("0a 0c 0a 0a 0a 01 61 12 05 1a 03 0a 01 01");

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "<no InvalidArgumentError>";
}

TEST(Example, SerializesTheSpecExampleToItsExactBytes) {
  EXPECT_EQ(Example().set_int64_list("a", {1}).serialize(), kSpecExample);
}

TEST(Example, ParsesTheSpecExampleBytes) {
  const Example ex = Example::parse(kSpecExample);
  ASSERT_EQ(ex.features().size(), 1u);
  EXPECT_EQ(ex.features().at("a").kind, FeatureValues::of(std::vector<int64_t>{1}));
  const ParsedFeatures f =
      parse_single_example_features(kSpecExample, {{"a", FixedLenFeature({}, D::int64)}});
  EXPECT_EQ(f.at("a").values.int64_values, std::vector<int64_t>{1});
  EXPECT_TRUE(f.at("a").shape.empty());
}

TEST(Example, RoundTripsEveryListTypeIncludingNegativesAndEmptyLists) {
  Example ex;
  ex.set_bytes_list("b", {"", std::string("\0\xff", 2), "hello"})
      .set_float_list("f", {1.5f, -0.0f, 3e38f})
      .set_int64_list("i", {-1, 0, INT64_MAX, INT64_MIN})
      .set_int64_list("empty", {});
  ex.set_feature("unset", Feature{});
  const Example back = Example::parse(ex.serialize());
  EXPECT_EQ(back, ex);
}

TEST(Example, SerializationIsDeterministicInKeyOrder) {
  Example a, b;
  a.set_int64_list("x", {1}).set_int64_list("y", {2});
  b.set_int64_list("y", {2}).set_int64_list("x", {1});
  EXPECT_EQ(a.serialize(), b.serialize());
}

TEST(Example, NegativeInt64IsATenByteVarint) {
  const std::string bytes = Example().set_int64_list("a", {-1}).serialize();
  // ... 1a 0c 0a 0a ff ff ff ff ff ff ff ff ff 01
  EXPECT_NE(bytes.find(from_hex("0a 0a ff ff ff ff ff ff ff ff ff 01")), std::string::npos);
}

TEST(Example, FloatsArePackedLittleEndianIeee) {
  const std::string bytes = Example().set_float_list("a", {1.0f}).serialize();
  // Feature{float_list (field 2){value packed: 0a 04 00 00 80 3f}}
  EXPECT_NE(bytes.find(from_hex("12 06 0a 04 00 00 80 3f")), std::string::npos);
}

TEST(Example, UnpackedNumericListsParseLikePackedOnes) {
  // features{feature{"a": int64_list{value: 1, value: 2 (unpacked, tag 08)}}}
  const std::string unpacked_int = from_hex("0a 0d 0a 0b 0a 01 61 12 06 1a 04 08 01 08 02");
  auto f = parse_single_example_features(unpacked_int, {{"a", FixedLenFeature({2}, D::int64)}});
  EXPECT_EQ(f.at("a").values.int64_values, (std::vector<int64_t>{1, 2}));
  // float_list{value: 1.0 unpacked (tag 0d)}
  const std::string unpacked_float = from_hex("0a 0e 0a 0c 0a 01 61 12 07 12 05 0d 00 00 80 3f");
  auto g = parse_single_example_features(unpacked_float, {{"a", FixedLenFeature({}, D::float32)}});
  EXPECT_EQ(g.at("a").values.float_values, std::vector<float>{1.0f});
  // The same values packed (as the writer emits them).
  auto h = parse_single_example_features(Example().set_int64_list("a", {1, 2}).serialize(),
                                         {{"a", FixedLenFeature({2}, D::int64)}});
  EXPECT_EQ(h.at("a").values.int64_values, (std::vector<int64_t>{1, 2}));
}

TEST(Example, MalformedBytesAreDataLossForParseAndInvalidArgumentForParseExample) {
  const std::string bad = from_hex("0a 0c 0a 0a 0a 01");  // truncated
  EXPECT_THROW(Example::parse(bad), DataLossError);
  EXPECT_THROW(parse_single_example_features(bad, {}), InvalidArgumentError);
  EXPECT_THROW(parse_single_example_features(from_hex("ff ff ff"), {}), InvalidArgumentError);
}

TEST(ParseSingleExample, FixedLenFeaturesOfEveryDtypeWithShapes) {
  Example ex;
  ex.set_float_list("image", std::vector<float>(6, 0.5f)).set_bytes_list("name", {"shirt"});
  ex.set_int64_list("label", {3});
  const auto f =
      parse_single_example_features(ex.serialize(), {{"image", FixedLenFeature({2, 3}, D::float32)},
                                                     {"name", FixedLenFeature({1}, D::string)},
                                                     {"label", FixedLenFeature({}, D::int64)}});
  EXPECT_FALSE(f.at("image").sparse);
  EXPECT_EQ(f.at("image").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.at("image").values.float_values, std::vector<float>(6, 0.5f));
  EXPECT_EQ(f.at("name").values.string_values, std::vector<std::string>{"shirt"});
  EXPECT_EQ(f.at("label").values.dtype, D::int64);
}

TEST(ParseSingleExample, MissingFeatureWithoutDefaultNamesTheFeature) {
  const std::string msg = message_of([] {
    parse_single_example_features(kSpecExample, {{"label", FixedLenFeature({}, D::int64)}});
  });
  EXPECT_NE(msg.find("Feature: label (data type: int64) is required but could not be found."),
            std::string::npos)
      << msg;
}

TEST(ParseSingleExample, MissingFeatureTakesTheDefault) {
  const auto f = parse_single_example_features(
      kSpecExample,
      {{"w", FixedLenFeature({2}, D::float32, FeatureValues::of(std::vector<float>{1, 2}))}});
  EXPECT_EQ(f.at("w").values.float_values, (std::vector<float>{1, 2}));
}

TEST(ParseSingleExample, FeatureWithNoListSetCountsAsMissing) {
  Example ex;
  ex.set_feature("a", Feature{});
  EXPECT_THROW(
      parse_single_example_features(ex.serialize(), {{"a", FixedLenFeature({}, D::int64)}}),
      InvalidArgumentError);
  const auto f = parse_single_example_features(ex.serialize(), {{"a", VarLenFeature(D::int64)}});
  EXPECT_TRUE(f.at("a").values.int64_values.empty());
}

TEST(ParseSingleExample, WrongTypeNamesTheFeatureAndBothTypes) {
  const std::string msg = message_of([] {
    parse_single_example_features(kSpecExample, {{"a", FixedLenFeature({}, D::float32)}});
  });
  EXPECT_NE(msg.find("Key: a.  Data types don't match. Data type: int64 but expected type: float"),
            std::string::npos)
      << msg;
  EXPECT_THROW(parse_single_example_features(kSpecExample, {{"a", VarLenFeature(D::string)}}),
               InvalidArgumentError);
}

TEST(ParseSingleExample, WrongNumberOfValuesNamesTheFeatureAndShape) {
  const std::string bytes = Example().set_float_list("x", {1, 2, 3}).serialize();
  const std::string msg = message_of([&] {
    parse_single_example_features(bytes, {{"x", FixedLenFeature({2}, D::float32)}});
  });
  EXPECT_NE(
      msg.find(
          "Key: x.  Number of float values != expected.  Values size: 3 but output shape: [2]"),
      std::string::npos)
      << msg;
}

TEST(ParseSingleExample, InvalidSpecsAreInvalidArgument) {
  EXPECT_THROW(
      parse_single_example_features(kSpecExample, {{"a", FixedLenFeature({-1}, D::int64)}}),
      InvalidArgumentError);
  EXPECT_THROW(
      parse_single_example_features(
          kSpecExample,
          {{"b", FixedLenFeature({2}, D::int64, FeatureValues::of(std::vector<int64_t>{1}))}}),
      InvalidArgumentError);
  EXPECT_THROW(
      parse_single_example_features(
          kSpecExample,
          {{"b", FixedLenFeature({}, D::int64, FeatureValues::of(std::vector<float>{1}))}}),
      InvalidArgumentError);
}

TEST(ParseSingleExample, VarLenFeatureGivesValuesIndicesAndDenseShape) {
  const std::string bytes = Example().set_bytes_list("tags", {"a", "b", "c"}).serialize();
  const auto f = parse_single_example_features(
      bytes, {{"tags", VarLenFeature(D::string)}, {"none", VarLenFeature(D::int64)}});
  const ParsedFeature& t = f.at("tags");
  EXPECT_TRUE(t.sparse);
  EXPECT_EQ(t.values.string_values, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(t.indices, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(t.shape, std::vector<int64_t>{3});
  EXPECT_EQ(f.at("none").shape, std::vector<int64_t>{0});
  EXPECT_TRUE(f.at("none").indices.empty());
}

TEST(ParseExample, BatchesDenseFeaturesAndRankTwoSparseOnes) {
  std::vector<std::string> batch = {
      Example().set_int64_list("label", {1}).set_float_list("v", {1, 2}).serialize(),
      Example().set_float_list("v", {3}).serialize(),
      Example().set_int64_list("label", {2}).serialize(),
  };
  const auto f = parse_example_features(
      batch, {{"label", FixedLenFeature({}, D::int64, FeatureValues::of(std::vector<int64_t>{-1}))},
              {"v", VarLenFeature(D::float32)}});
  EXPECT_EQ(f.at("label").shape, std::vector<int64_t>{3});
  EXPECT_EQ(f.at("label").values.int64_values, (std::vector<int64_t>{1, -1, 2}));
  const ParsedFeature& v = f.at("v");
  EXPECT_EQ(v.values.float_values, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(v.indices, (std::vector<int64_t>{0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(v.shape, (std::vector<int64_t>{3, 2}));
}

TEST(ParseExample, ErrorsNameTheFeatureAndTheExampleIndex) {
  std::vector<std::string> batch = {Example().set_int64_list("label", {1}).serialize(),
                                    Example().set_int64_list("label", {1, 2}).serialize()};
  const std::string msg = message_of([&] {
    parse_example_features(batch, {{"label", FixedLenFeature({}, D::int64)}});
  });
  EXPECT_NE(msg.find("Key: label, Index: 1."), std::string::npos) << msg;
  EXPECT_NE(msg.find("Values size: 2 but output shape: []"), std::string::npos) << msg;
}

TEST(ParseExample, EmptyBatchGivesZeroSizedResults) {
  const auto f =
      parse_example_features(std::vector<std::string>{}, {{"x", FixedLenFeature({4}, D::float32)}});
  EXPECT_EQ(f.at("x").shape, (std::vector<int64_t>{0, 4}));
  EXPECT_TRUE(f.at("x").values.float_values.empty());
}

}  // namespace
}  // namespace strata::io
