// libFuzzer target: the TFRecord reader must never crash, hang or over-read on any
// input; the only allowed failures are strata::Error exceptions (DataLossError for
// corrupt data). The first byte picks the compression and a seek offset.
#include <cstddef>
#include <cstdint>
#include <string>

#include "strata/base/errors.h"
#include "strata/io/tfrecord.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char* const kTypes[] = {"", "ZLIB", "GZIP"};
  const char* type = kTypes[data[0] % 3];
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    auto r = strata::io::TFRecordReader::from_bytes(bytes, {.compression_type = type}, "fuzz");
    size_t total = 0;
    while (auto rec = r.read_next()) {
      total += rec->size();
      if (total > (size << 1) + 64) __builtin_trap();  // produced more than could be there
    }
  } catch (const strata::Error&) {
  }
  try {
    // Reading from an arbitrary offset (as after a bad seek) must fail cleanly too.
    auto r = strata::io::TFRecordReader::from_bytes(bytes, {.compression_type = type}, "fuzz");
    r.seek(data[0] / 3);
    while (r.read_next()) {
    }
  } catch (const strata::Error&) {
  }
  return 0;
}
