#pragma once
// The checkpoint file codec (docs/formats/checkpoint.md): one file holding the
// tensors, their index and the object graph, with a CRC-32C on every part.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "strata/core/dtype.h"
#include "strata/core/tensor.h"
#include "strata/core/tensor_shape.h"
#include "strata/train/object_graph.h"

namespace strata::train::internal {

inline constexpr char kMagic[8] = {'\x89', 'S', 'T', 'C', '\r', '\n', '\x1a', '\n'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr size_t kHeaderSize = 16;
inline constexpr size_t kFooterSize = 48;

// TF's DataType numbers for the dtypes a checkpoint stores (DT_FLOAT = 1, ...).
// UnimplementedError for string tensors.
uint32_t dtype_code(DType dtype);

struct IndexEntry {
  std::string key;
  DType dtype;
  TensorShape shape;
  uint64_t offset;  // absolute byte offset of the values in the file
  uint64_t length;  // bytes
};

// Writes `tensors` (key, value; keys unique) and `graph` to `path` atomically
// (temporary file, fsync, rename, directory fsync). Creates no directories.
void write_checkpoint_file(const std::string& path,
                           const std::vector<std::pair<std::string, Tensor>>& tensors,
                           const ObjectGraph& graph);

// A verified checkpoint file: every check of the format (sizes, magic,
// version, the CRC-32C of the footer, index, graph and each tensor, the
// index's tiling of the data section, the graph's references) passed.
struct CheckpointFile {
  std::string path;
  std::string bytes;  // the whole file
  std::vector<IndexEntry> index;
  ObjectGraph graph;
};

// Reads and verifies `path`. NotFoundError when it does not exist;
// DataLossError naming the file, the section or tensor and the failed check;
// UnimplementedError for a newer format version.
CheckpointFile read_checkpoint_file(const std::string& path);

// The tensor of `entry` (a fresh buffer on the current device).
Tensor decode_tensor(const CheckpointFile& file, const IndexEntry& entry);

}  // namespace strata::train::internal
