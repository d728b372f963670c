// libFuzzer target: on any bytes, Example::parse either succeeds or raises
// DataLossError, and parse_single_example / parse_example either succeed or raise
// InvalidArgumentError (as TF's ParseExample does for unparsable input and for a
// missing, mistyped or wrong-length feature); any other exception escapes and
// fails the run.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "strata/base/errors.h"
#include "strata/io/example.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace strata::io;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const Example ex = Example::parse(bytes);
    // A parsed example re-serialises to bytes that parse to the same example
    // (compared as bytes: a float feature may hold NaN, which != itself).
    const std::string once = ex.serialize();
    if (Example::parse(once).serialize() != once) __builtin_trap();
  } catch (const strata::DataLossError&) {
  }
  const FeatureSpecs specs = {
      {"a", VarLenFeature(FeatureDType::int64)},
      {"b", VarLenFeature(FeatureDType::string)},
      {"c",
       FixedLenFeature({2}, FeatureDType::float32, FeatureValues::of(std::vector<float>{0, 0}))},
      {"d", VarLenFeature(FeatureDType::float32)},
  };
  try {
    parse_single_example_features(bytes, specs);
  } catch (const strata::InvalidArgumentError&) {
  }
  try {
    const std::vector<std::string> batch = {bytes, bytes};
    parse_example_features(batch, specs);
  } catch (const strata::InvalidArgumentError&) {
  }
  return 0;
}
