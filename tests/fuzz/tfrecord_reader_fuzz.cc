// libFuzzer target: the TFRecord reader must never crash, hang, over-read or
// half-read on any input. Corrupt or truncated data raises DataLossError and
// nothing else (any other exception escapes and fails the run). Uncompressed, the
// records it returned re-frame to exactly the bytes it consumed: a prefix of the
// input, or all of it at a clean end, so it never hands out a partial record.
// The first byte picks the compression and a seek offset.
#include <cstddef>
#include <cstdint>
#include <string>

#include "strata/base/errors.h"
#include "strata/io/tfrecord.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using strata::io::TFRecordReader;
  if (size == 0) return 0;
  static const char* const kTypes[] = {"", "ZLIB", "GZIP"};
  const char* type = kTypes[data[0] % 3];
  const bool plain = data[0] % 3 == 0;
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string reframed;
  bool clean_end = false;
  try {
    auto r = TFRecordReader::from_bytes(bytes, {.compression_type = type}, "fuzz");
    size_t total = 0;
    while (auto rec = r.read_next()) {
      total += rec->size();
      if (total > (size << 1) + 64) __builtin_trap();  // produced more than could be there
      if (plain) reframed += strata::io::tfrecord_frame(*rec);
      if (plain && r.offset() != reframed.size()) __builtin_trap();
    }
    clean_end = true;
  } catch (const strata::DataLossError&) {
  }
  if (plain) {
    if (bytes.compare(0, reframed.size(), reframed) != 0) __builtin_trap();  // not what was there
    if (clean_end && reframed.size() != bytes.size()) __builtin_trap();  // trailing bytes ignored
  }
  try {
    // Reading from an arbitrary offset (as after a bad seek) must fail cleanly too.
    auto r = TFRecordReader::from_bytes(bytes, {.compression_type = type}, "fuzz");
    r.seek(data[0] / 3);
    while (r.read_next()) {
    }
  } catch (const strata::DataLossError&) {
  }
  return 0;
}
