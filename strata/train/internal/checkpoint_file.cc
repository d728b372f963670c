#include "strata/train/internal/checkpoint_file.h"

#include <bit>
#include <cstring>
#include <limits>
#include <set>
#include <string_view>

#include "strata/base/coding.h"
#include "strata/base/crc32c.h"
#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/str_cat.h"

namespace strata::train::internal {
namespace {

using coding::decode_fixed32;
using coding::decode_fixed64;
using coding::put_fixed32;
using coding::put_fixed64;

// The bytes of one element as the file stores them: little-endian. On a
// big-endian host each element is reversed (bool and uint8 are one byte).
void append_little_endian(std::string& out, const Tensor& t) {
  const char* p = static_cast<const char*>(t.raw_data());
  const size_t n = t.size_bytes();
  if constexpr (std::endian::native == std::endian::little) {
    out.append(p, n);
  } else {
    const size_t width = dtype_size(t.dtype());
    for (size_t i = 0; i < n; i += width) {
      for (size_t b = width; b > 0; --b) out.push_back(p[i + b - 1]);
    }
  }
}

void put_string(std::string& out, const std::string& s) {
  STRATA_CHECK_ARG(s.size() <= std::numeric_limits<uint32_t>::max(), "checkpoint: a name of ",
                   s.size(), " bytes is longer than 2^32 - 1");
  put_fixed32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

std::string encode_graph(const ObjectGraph& graph) {
  std::string out;
  put_fixed32(out, static_cast<uint32_t>(graph.nodes.size()));
  for (const ObjectGraph::Node& node : graph.nodes) {
    put_fixed32(out, static_cast<uint32_t>(node.children.size()));
    for (const auto& c : node.children) {
      put_string(out, c.name);
      put_fixed32(out, c.node_id);
    }
    put_fixed32(out, static_cast<uint32_t>(node.attributes.size()));
    for (const auto& a : node.attributes) {
      put_string(out, a.name);
      put_string(out, a.checkpoint_key);
    }
    put_fixed32(out, static_cast<uint32_t>(node.slot_variables.size()));
    for (const auto& s : node.slot_variables) {
      put_fixed32(out, s.original_variable_node_id);
      put_string(out, s.slot_name);
      put_fixed32(out, s.slot_variable_node_id);
    }
  }
  return out;
}

DType dtype_from_code(uint32_t code, bool* ok) {
  *ok = true;
  switch (code) {
    case 1: return DType::float32;
    case 2: return DType::float64;
    case 3: return DType::int32;
    case 4: return DType::uint8;
    case 9: return DType::int64;
    case 10: return DType::bool_;
    default: *ok = false; return DType::float32;
  }
}

// Reads one section field by field; every read is bounds-checked and a
// shortfall is a DataLossError naming the file, the section and the offset.
class SectionReader {
 public:
  SectionReader(const std::string& path, std::string_view section_name, std::string_view bytes,
                uint64_t file_offset)
      : path_(path), section_(section_name), bytes_(bytes), base_(file_offset) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw DataLossError(
        str_cat("checkpoint '", path_, "': ", section_, " at byte ", base_ + pos_, ": ", what));
  }
  uint32_t u32(const char* field) {
    need(4, field);
    const uint32_t v = decode_fixed32(bytes_.data() + pos_);
    pos_ += 4;
    return v;
  }
  uint64_t u64(const char* field) {
    need(8, field);
    const uint64_t v = decode_fixed64(bytes_.data() + pos_);
    pos_ += 8;
    return v;
  }
  std::string str(const char* field) {
    const uint32_t n = u32(field);
    need(n, field);
    std::string s(bytes_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  // A count of items each at least `min_item_bytes` long: more than the rest
  // of the section can hold is corruption (and must not drive an allocation).
  uint32_t count(const char* field, size_t min_item_bytes) {
    const uint32_t n = u32(field);
    if (uint64_t{n} * min_item_bytes > bytes_.size() - pos_) {
      fail(str_cat(field, " ", n, " does not fit in the ", bytes_.size() - pos_,
                   " bytes left in the section"));
    }
    return n;
  }
  bool at_end() const { return pos_ == bytes_.size(); }
  size_t pos() const { return pos_; }

 private:
  void need(uint64_t n, const char* field) const {
    if (n > bytes_.size() - pos_) {
      fail(str_cat("section ends inside ", field, " (", n, " bytes needed, ", bytes_.size() - pos_,
                   " left)"));
    }
  }
  const std::string& path_;
  std::string_view section_;
  std::string_view bytes_;
  uint64_t base_;
  size_t pos_ = 0;
};

}  // namespace

uint32_t dtype_code(DType dtype) {
  switch (dtype) {
    case DType::float32: return 1;
    case DType::float64: return 2;
    case DType::int32: return 3;
    case DType::uint8: return 4;
    case DType::int64: return 9;
    case DType::bool_: return 10;
    case DType::string: break;
  }
  throw UnimplementedError("checkpoint: string tensors cannot be saved");
}

void write_checkpoint_file(const std::string& path,
                           const std::vector<std::pair<std::string, Tensor>>& tensors,
                           const ObjectGraph& graph) {
  std::set<std::string_view> keys;
  for (const auto& [key, value] : tensors) {
    STRATA_INTERNAL_CHECK(keys.insert(key).second, "checkpoint key '", key, "' written twice");
    STRATA_CHECK_ARG(value.defined(), "checkpoint: tensor '", key, "' is undefined");
    (void)dtype_code(value.dtype());  // rejects strings before anything is written
  }

  AtomicFileWriter out(path);
  std::string header(kMagic, sizeof kMagic);
  put_fixed32(header, kFormatVersion);
  put_fixed32(header, 0);  // reserved
  out.append(header);

  // The data section: each tensor's bytes; the index records where.
  std::string index;
  put_fixed32(index, static_cast<uint32_t>(tensors.size()));
  uint64_t offset = kHeaderSize;
  std::string buffer;
  for (const auto& [key, value] : tensors) {
    buffer.clear();
    append_little_endian(buffer, value);
    out.append(buffer);
    put_string(index, key);
    put_fixed32(index, dtype_code(value.dtype()));
    put_fixed32(index, static_cast<uint32_t>(value.shape().rank()));
    for (int64_t d : value.shape().dims()) put_fixed64(index, static_cast<uint64_t>(d));
    put_fixed64(index, offset);
    put_fixed64(index, buffer.size());
    put_fixed32(index, crc32c::mask(crc32c::value(buffer)));
    offset += buffer.size();
  }
  const std::string graph_bytes = encode_graph(graph);
  out.append(index);
  out.append(graph_bytes);

  std::string footer;
  put_fixed64(footer, offset);  // index offset
  put_fixed64(footer, index.size());
  put_fixed64(footer, graph_bytes.size());
  put_fixed32(footer, crc32c::mask(crc32c::value(index)));
  put_fixed32(footer, crc32c::mask(crc32c::value(graph_bytes)));
  put_fixed32(footer, 0);  // reserved
  put_fixed32(footer, crc32c::mask(crc32c::extend(crc32c::value(header), footer)));
  footer.append(kMagic, sizeof kMagic);
  STRATA_INTERNAL_CHECK(footer.size() == kFooterSize, "footer is ", footer.size(), " bytes");
  out.append(footer);
  out.commit();
}

CheckpointFile read_checkpoint_file(const std::string& path) {
  CheckpointFile file;
  file.path = path;
  file.bytes = read_file(path);
  const std::string& b = file.bytes;
  auto lose = [&](const std::string& what) -> void {
    throw DataLossError(str_cat("checkpoint '", path, "': ", what));
  };
  const uint64_t size = b.size();
  if (size < kHeaderSize + kFooterSize) {
    lose(str_cat("file is ", size, " bytes, shorter than its ", kHeaderSize + kFooterSize,
                 "-byte header and footer (truncated?)"));
  }
  if (std::memcmp(b.data(), kMagic, sizeof kMagic) != 0) {
    lose("header at byte 0: bad magic (not a Strata checkpoint)");
  }
  const uint64_t f = size - kFooterSize;
  if (std::memcmp(b.data() + f + 40, kMagic, sizeof kMagic) != 0) {
    lose(str_cat("footer at byte ", f + 40, ": bad magic (truncated or overwritten?)"));
  }
  const uint32_t footer_crc =
      crc32c::extend(crc32c::value(b.data(), kHeaderSize), b.data() + f, 36);
  if (crc32c::unmask(decode_fixed32(b.data() + f + 36)) != footer_crc) {
    lose(str_cat("footer at byte ", f, ": CRC-32C of the header and footer does not match"));
  }
  const uint32_t version = decode_fixed32(b.data() + 8);
  if (version == 0) lose("header at byte 8: format version 0");
  if (version > kFormatVersion) {
    throw UnimplementedError(str_cat("checkpoint '", path, "': format version ", version,
                                     " is newer than this reader's ", kFormatVersion));
  }
  if (decode_fixed32(b.data() + 12) != 0) lose("header at byte 12: reserved field is not 0");
  if (decode_fixed32(b.data() + f + 32) != 0) {
    lose(str_cat("footer at byte ", f + 32, ": reserved field is not 0"));
  }
  const uint64_t index_offset = decode_fixed64(b.data() + f);
  const uint64_t index_length = decode_fixed64(b.data() + f + 8);
  const uint64_t graph_length = decode_fixed64(b.data() + f + 16);
  if (index_offset < kHeaderSize || index_offset > f || index_length > f - index_offset ||
      graph_length != f - index_offset - index_length) {
    lose(str_cat("footer at byte ", f, ": sections (index at ", index_offset, ", ", index_length,
                 " bytes; graph ", graph_length, " bytes) do not fill the file's ", size,
                 " bytes"));
  }
  const uint64_t graph_offset = index_offset + index_length;
  const std::string_view index_bytes(b.data() + index_offset, index_length);
  const std::string_view graph_bytes(b.data() + graph_offset, graph_length);
  if (crc32c::unmask(decode_fixed32(b.data() + f + 24)) != crc32c::value(index_bytes)) {
    lose(str_cat("index at byte ", index_offset, ": CRC-32C does not match"));
  }
  if (crc32c::unmask(decode_fixed32(b.data() + f + 28)) != crc32c::value(graph_bytes)) {
    lose(str_cat("object graph at byte ", graph_offset, ": CRC-32C does not match"));
  }

  // The index: entries tile the data section [16, index_offset) in order.
  SectionReader in(path, "index", index_bytes, index_offset);
  const uint32_t count = in.count("tensor count", 4 + 4 + 4 + 8 + 8 + 4);
  uint64_t expected_offset = kHeaderSize;
  std::set<std::string> keys;
  std::vector<uint32_t> crcs;
  for (uint32_t i = 0; i < count; ++i) {
    IndexEntry e;
    e.key = in.str("tensor key");
    if (!keys.insert(e.key).second) in.fail(str_cat("tensor '", e.key, "' listed twice"));
    bool ok = false;
    const uint32_t code = in.u32("dtype");
    e.dtype = dtype_from_code(code, &ok);
    if (!ok) in.fail(str_cat("tensor '", e.key, "': unknown dtype code ", code));
    const uint32_t rank = in.count("rank", 8);
    std::vector<int64_t> dims;
    uint64_t elements = 1;
    for (uint32_t r = 0; r < rank; ++r) {
      const uint64_t d = in.u64("dimension");
      if (d > (uint64_t{1} << 62) || (d != 0 && elements > (uint64_t{1} << 62) / d)) {
        in.fail(str_cat("tensor '", e.key, "': dimension ", d, " is out of range"));
      }
      elements *= d;
      dims.push_back(static_cast<int64_t>(d));
    }
    e.shape = TensorShape(dims);
    e.offset = in.u64("offset");
    e.length = in.u64("length");
    crcs.push_back(crc32c::unmask(in.u32("tensor CRC-32C")));
    if (e.length != elements * dtype_size(e.dtype)) {
      in.fail(str_cat("tensor '", e.key, "': length ", e.length, " does not match shape ",
                      e.shape.to_string(), " of ", dtype_name(e.dtype)));
    }
    if (e.offset != expected_offset || e.length > index_offset - e.offset) {
      in.fail(str_cat("tensor '", e.key, "': bytes [", e.offset, ", +", e.length,
                      ") do not follow the previous tensor at ", expected_offset,
                      " inside the data section ending at ", index_offset));
    }
    expected_offset = e.offset + e.length;
    file.index.push_back(std::move(e));
  }
  if (!in.at_end()) in.fail(str_cat(index_length - in.pos(), " stray bytes after the last entry"));
  if (expected_offset != index_offset) {
    lose(str_cat("data section: the tensors end at byte ", expected_offset,
                 " but the index starts at ", index_offset));
  }
  for (size_t i = 0; i < file.index.size(); ++i) {
    const IndexEntry& e = file.index[i];
    if (crc32c::value(b.data() + e.offset, e.length) != crcs[i]) {
      lose(str_cat("tensor '", e.key, "' at byte ", e.offset, ": CRC-32C does not match"));
    }
  }

  // The object graph; every reference must resolve.
  SectionReader g(path, "object graph", graph_bytes, graph_offset);
  const uint32_t nodes = g.count("node count", 12);
  file.graph.nodes.resize(nodes);
  for (uint32_t n = 0; n < nodes; ++n) {
    ObjectGraph::Node& node = file.graph.nodes[n];
    const uint32_t children = g.count("child count", 8);
    for (uint32_t i = 0; i < children; ++i) {
      ObjectGraph::Child c;
      c.name = g.str("child name");
      c.node_id = g.u32("child node id");
      if (c.node_id >= nodes) {
        g.fail(
            str_cat("node ", n, " child '", c.name, "' refers to node ", c.node_id, " of ", nodes));
      }
      node.children.push_back(std::move(c));
    }
    const uint32_t attributes = g.count("attribute count", 8);
    for (uint32_t i = 0; i < attributes; ++i) {
      ObjectGraph::Attribute a;
      a.name = g.str("attribute name");
      a.checkpoint_key = g.str("checkpoint key");
      if (!keys.contains(a.checkpoint_key)) {
        g.fail(str_cat("node ", n, " attribute '", a.name, "' names tensor '", a.checkpoint_key,
                       "', which the index does not hold"));
      }
      node.attributes.push_back(std::move(a));
    }
    const uint32_t slots = g.count("slot variable count", 12);
    for (uint32_t i = 0; i < slots; ++i) {
      ObjectGraph::SlotVariable s;
      s.original_variable_node_id = g.u32("original variable node id");
      s.slot_name = g.str("slot name");
      s.slot_variable_node_id = g.u32("slot variable node id");
      if (s.original_variable_node_id >= nodes || s.slot_variable_node_id >= nodes) {
        g.fail(str_cat("node ", n, " slot '", s.slot_name, "' refers to nodes ",
                       s.original_variable_node_id, " and ", s.slot_variable_node_id, " of ",
                       nodes));
      }
      node.slot_variables.push_back(std::move(s));
    }
  }
  if (!g.at_end()) g.fail(str_cat(graph_length - g.pos(), " stray bytes after the last node"));
  if (nodes == 0) lose("object graph: no root node");
  return file;
}

Tensor decode_tensor(const CheckpointFile& file, const IndexEntry& entry) {
  Tensor t = Tensor::allocate(entry.dtype, entry.shape);
  char* dst = static_cast<char*>(t.mutable_raw_data());
  const char* src = file.bytes.data() + entry.offset;
  if constexpr (std::endian::native == std::endian::little) {
    if (entry.length > 0) std::memcpy(dst, src, entry.length);
  } else {
    const size_t width = dtype_size(entry.dtype);
    for (size_t i = 0; i < entry.length; i += width) {
      for (size_t b = 0; b < width; ++b) dst[i + b] = src[i + width - 1 - b];
    }
  }
  return t;
}

}  // namespace strata::train::internal
