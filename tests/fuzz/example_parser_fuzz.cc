// libFuzzer target: Example::parse, parse_single_example and parse_example must
// either succeed or throw a strata::Error on any bytes.
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
    // A parsed example re-serialises to bytes that parse to the same example.
    if (!(Example::parse(ex.serialize()) == ex)) __builtin_trap();
  } catch (const strata::Error&) {
  }
  const FeatureSpecs specs = {
      {"a", VarLenFeature(FeatureDType::int64)},
      {"b", VarLenFeature(FeatureDType::string)},
      {"c",
       FixedLenFeature({2}, FeatureDType::float32, FeatureValues::of(std::vector<float>{0, 0}))},
      {"d", VarLenFeature(FeatureDType::float32)},
  };
  try {
    parse_single_example(bytes, specs);
  } catch (const strata::Error&) {
  }
  try {
    const std::vector<std::string> batch = {bytes, bytes};
    parse_example(batch, specs);
  } catch (const strata::Error&) {
  }
  return 0;
}
