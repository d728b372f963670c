#pragma once
// IDX files (the MNIST / Fashion-MNIST format), plain or gzipped.
//
// Layout: 2 zero bytes, a type code (0x08 = unsigned byte, the only type these
// datasets use), the number of dimensions, then each dimension as a big-endian
// uint32, then the values row-major. A file starting with the gzip magic
// (1f 8b) is inflated first.
//
//   strata::io::IdxArray labels = strata::io::read_idx("t10k-labels-idx1-ubyte.gz");
//   labels.dims;        // {10000}
//   labels.data[0];     // 9 (ankle boot)

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::io {

// The dimensions and raw uint8 values of an IDX file. Value type.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // product(dims) values, row-major
};

// Reads an IDX file. NotFoundError if missing; DataLossError (naming the file)
// for a bad magic, an unknown type code, or a size that disagrees with the dims;
// UnimplementedError for valid IDX types other than unsigned byte.
IdxArray read_idx(const std::string& path);

// Parses the bytes of an IDX file (gzipped or not); `name` appears in errors.
IdxArray parse_idx(std::string_view bytes, std::string_view name = "<memory>");

}  // namespace strata::io
