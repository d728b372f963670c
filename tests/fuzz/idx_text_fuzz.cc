// libFuzzer target: on any bytes, the IDX parser, the text line reader and the
// fixed-length record reader either succeed or raise DataLossError (the IDX
// parser also UnimplementedError for an unsupported type code); any other
// exception escapes and fails the run.
#include <cstddef>
#include <cstdint>
#include <string>

#include "strata/base/errors.h"
#include "strata/io/idx.h"
#include "strata/io/text_line.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace strata::io;
  if (size == 0) return 0;
  static const char* const kTypes[] = {"", "ZLIB", "GZIP"};
  const char* type = kTypes[data[0] % 3];
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const IdxArray a = parse_idx(bytes, "fuzz");
    uint64_t n = 1;
    for (int64_t d : a.dims) n *= static_cast<uint64_t>(d);
    if (n != a.data.size()) __builtin_trap();
  } catch (const strata::DataLossError&) {
  } catch (const strata::UnimplementedError&) {
  }
  try {
    auto r = TextLineReader::from_bytes(bytes, type);
    while (r.read_next()) {
    }
  } catch (const strata::DataLossError&) {
  }
  try {
    auto r = FixedLengthRecordReader::from_bytes(bytes, {.header_bytes = data[0] % 5,
                                                         .record_bytes = 1 + data[0] % 7,
                                                         .footer_bytes = data[0] % 3,
                                                         .compression_type = type});
    while (auto rec = r.read_next()) {
      if (rec->size() != static_cast<size_t>(1 + data[0] % 7)) __builtin_trap();
    }
  } catch (const strata::DataLossError&) {
  }
  return 0;
}
