// The iterator-state codec (docs/formats/checkpoint.md, "Iterator state").
#include "strata/data/iterator_state.h"

#include <bit>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "strata/base/coding.h"
#include "strata/base/crc32c.h"
#include "strata/base/errors.h"
#include "strata/base/str_cat.h"

namespace strata::data {
namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'I', 'T', 'E', 'R', '1'};

// TensorFlow's DataType numbers (types.proto), as the checkpoint format uses.
uint32_t dtype_code(DType d) {
  switch (d) {
    case DType::float32: return 1;
    case DType::float64: return 2;
    case DType::int32: return 3;
    case DType::uint8: return 4;
    case DType::string: return 7;
    case DType::int64: return 9;
    case DType::bool_: return 10;
  }
  return 0;
}

std::optional<DType> dtype_of_code(uint32_t c) {
  switch (c) {
    case 1: return DType::float32;
    case 2: return DType::float64;
    case 3: return DType::int32;
    case 4: return DType::uint8;
    case 7: return DType::string;
    case 9: return DType::int64;
    case 10: return DType::bool_;
    default: return std::nullopt;
  }
}

void put_bytes(std::string& out, std::string_view s) {
  coding::put_fixed64(out, s.size());
  out.append(s);
}

// A bounds-checked cursor; every failure is a DataLossError naming the offset.
class Cursor {
 public:
  explicit Cursor(std::string_view bytes) : bytes_(bytes) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw DataLossError(str_cat("iterator state: ", what, " at byte ", pos_, " of ", bytes_.size(),
                                "; the state is corrupted or not an iterator state"));
  }
  void need(size_t n, const char* field) const {
    if (bytes_.size() - pos_ < n) fail(str_cat("truncated ", field));
  }
  uint32_t u32(const char* field) {
    need(4, field);
    const uint32_t v = coding::decode_fixed32(bytes_.data() + pos_);
    pos_ += 4;
    return v;
  }
  uint64_t u64(const char* field) {
    need(8, field);
    const uint64_t v = coding::decode_fixed64(bytes_.data() + pos_);
    pos_ += 8;
    return v;
  }
  std::string_view bytes(uint64_t n, const char* field) {
    if (n > bytes_.size() - pos_) fail(str_cat("truncated ", field));
    std::string_view v = bytes_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  size_t pos() const { return pos_; }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

}  // namespace

void IteratorState::set(const std::string& key, Tensor value) {
  STRATA_INTERNAL_CHECK(value.defined(), "iterator state '", key, "' is an empty tensor");
  entries_[key] = std::move(value);
}

const Tensor& IteratorState::get(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end())
    throw DataLossError(str_cat("iterator state: expected an entry '", key,
                                "', got none (the state was saved from another input pipeline)"));
  return it->second;
}

Tensor IteratorState::encode() const {
  std::string out(kMagic, sizeof kMagic);
  coding::put_fixed64(out, entries_.size());
  for (const auto& [key, t] : entries_) {
    put_bytes(out, key);
    coding::put_fixed32(out, dtype_code(t.dtype()));
    coding::put_fixed32(out, static_cast<uint32_t>(t.rank()));
    for (int64_t d : t.shape().dims()) coding::put_fixed64(out, static_cast<uint64_t>(d));
    if (t.dtype() == DType::string) {
      const std::string* s = t.data<std::string>();
      for (int64_t i = 0; i < t.num_elements(); ++i) put_bytes(out, s[i]);
      continue;
    }
    const char* p = static_cast<const char*>(t.raw_data());
    const size_t n = t.size_bytes();
    coding::put_fixed64(out, n);
    if constexpr (std::endian::native == std::endian::little) {
      out.append(p, n);
    } else {
      const size_t width = dtype_size(t.dtype());
      for (size_t i = 0; i < n; i += width)
        for (size_t b = width; b > 0; --b) out.push_back(p[i + b - 1]);
    }
  }
  coding::put_fixed32(out, crc32c::mask(crc32c::value(out)));
  Tensor bytes = Tensor::allocate(DType::uint8, TensorShape{static_cast<int64_t>(out.size())});
  if (!out.empty()) std::memcpy(bytes.mutable_raw_data(), out.data(), out.size());
  return bytes;
}

IteratorState IteratorState::decode(const Tensor& bytes) {
  STRATA_CHECK_ARG(bytes.defined() && bytes.dtype() == DType::uint8 && bytes.rank() == 1,
                   "iterator state: expected a rank-1 uint8 tensor, got ",
                   bytes.defined() ? bytes.shape().to_string() : std::string("an empty tensor"),
                   " ", bytes.defined() ? dtype_name(bytes.dtype()) : "");
  const std::string_view all(static_cast<const char*>(bytes.raw_data()), bytes.size_bytes());
  Cursor whole(all);
  if (all.size() < sizeof kMagic + 8 + 4) whole.fail("too short for a header and a checksum");
  if (std::memcmp(all.data(), kMagic, sizeof kMagic) != 0) whole.fail("bad magic");
  const uint32_t stored = coding::decode_fixed32(all.data() + all.size() - 4);
  if (crc32c::unmask(stored) != crc32c::value(all.substr(0, all.size() - 4)))
    whole.fail("checksum mismatch");
  Cursor c(all.substr(0, all.size() - 4));
  c.bytes(sizeof kMagic, "magic");
  const uint64_t count = c.u64("entry count");
  IteratorState state;
  for (uint64_t e = 0; e < count; ++e) {
    const std::string key(c.bytes(c.u64("key length"), "key"));
    const auto dtype = dtype_of_code(c.u32("dtype"));
    if (!dtype) c.fail(str_cat("unknown dtype in entry '", key, "'"));
    const uint32_t rank = c.u32("rank");
    if (rank > 64) c.fail(str_cat("rank ", rank, " of entry '", key, "'"));
    std::vector<int64_t> dims;
    int64_t n = 1;
    for (uint32_t i = 0; i < rank; ++i) {
      const uint64_t d = c.u64("dimension");
      if (d > (uint64_t{1} << 40) || (d > 0 && static_cast<uint64_t>(n) > (uint64_t{1} << 40) / d))
        c.fail(str_cat("dimension ", d, " of entry '", key, "'"));
      dims.push_back(static_cast<int64_t>(d));
      n *= static_cast<int64_t>(d);
    }
    const TensorShape shape(dims);
    if (*dtype == DType::string) {
      std::vector<std::string> values;
      for (int64_t i = 0; i < n; ++i)
        values.emplace_back(c.bytes(c.u64("string length"), "string"));
      state.set(key, constant(values, shape));
      continue;
    }
    const uint64_t length = c.u64("payload length");
    if (length != static_cast<uint64_t>(n) * dtype_size(*dtype))
      c.fail(str_cat("payload of ", length, " bytes for entry '", key, "' of ", n, " elements"));
    const std::string_view payload = c.bytes(length, "payload");
    Tensor t = Tensor::allocate(*dtype, shape);
    char* dst = static_cast<char*>(t.mutable_raw_data());
    if constexpr (std::endian::native == std::endian::little) {
      if (length > 0) std::memcpy(dst, payload.data(), length);
    } else {
      const size_t width = dtype_size(*dtype);
      for (size_t i = 0; i < length; i += width)
        for (size_t b = 0; b < width; ++b) dst[i + b] = payload[i + width - 1 - b];
    }
    state.set(key, std::move(t));
  }
  if (c.pos() != all.size() - 4) c.fail("stray bytes after the last entry");
  return state;
}

}  // namespace strata::data
