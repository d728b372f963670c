#include "strata/keras/weights_io.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>

#include "strata/base/coding.h"
#include "strata/base/crc32c.h"
#include "strata/base/errors.h"
#include "strata/base/file.h"
#include "strata/base/str_cat.h"
#include "strata/keras/internal/distributed_file_utils.h"
#include "strata/keras/model.h"

namespace strata::keras {
namespace {

// "\x89STW\r\n\x1a\n": a non-ASCII first byte and the CR-LF / ^Z / LF bytes
// catch text-mode transfers, as PNG's signature does.
constexpr char kMagic[8] = {'\x89', 'S', 'T', 'W', '\r', '\n', '\x1a', '\n'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 32;  // magic, version, reserved, manifest size, data size
constexpr size_t kCrcBytes = 4;

// The tensor's elements as little-endian bytes, whatever the host's order.
std::string little_endian_bytes(const Tensor& t, const std::string& name) {
  STRATA_CHECK(UNIMPLEMENTED, t.dtype() != DType::string, "save_weights: variable '", name,
               "' has dtype string, which the weights format does not store");
  const size_t elem = dtype_size(t.dtype());
  std::string out(static_cast<const char*>(t.raw_data()), t.size_bytes());
  if constexpr (std::endian::native == std::endian::big) {
    for (size_t i = 0; i < out.size(); i += elem)
      std::reverse(out.begin() + i, out.begin() + i + elem);
  }
  return out;
}

Tensor tensor_from_little_endian(DType dtype, const TensorShape& shape, const char* data) {
  const size_t elem = dtype_size(dtype);
  std::string bytes(data, size_t(shape.num_elements()) * elem);
  if constexpr (std::endian::native == std::endian::big) {
    for (size_t i = 0; i < bytes.size(); i += elem)
      std::reverse(bytes.begin() + i, bytes.begin() + i + elem);
  }
  Tensor t = Tensor::allocate(dtype, shape);
  if (!bytes.empty()) std::memcpy(t.mutable_raw_data(), bytes.data(), bytes.size());
  return t;
}

std::string local_name(const std::string& name) {
  const size_t slash = name.rfind('/');
  return slash == std::string::npos ? name : name.substr(slash + 1);
}

[[noreturn]] void data_loss(const std::string& path, uint64_t offset, const std::string& what) {
  throw DataLossError(
      str_cat("weights file '", path, "': ", what, " (at byte offset ", offset, ")"));
}

std::vector<NamedTensor> named(const std::vector<Variable>& vars) {
  std::vector<NamedTensor> out;
  out.reserve(vars.size());
  for (const Variable& v : vars) out.push_back({v.name(), v.value()});
  return out;
}

// Checks `stored` against `vars` one for one (count, local name, shape, dtype).
void check_matches(const std::vector<NamedTensor>& stored, const std::vector<Variable>& vars,
                   const std::string& what, const std::string& path) {
  STRATA_CHECK_ARG(stored.size() == vars.size(), "load_weights('", path, "'): the file has ",
                   stored.size(), " ", what, " variables but the ", what, " has ", vars.size());
  for (size_t i = 0; i < vars.size(); ++i) {
    const NamedTensor& s = stored[i];
    const Variable& v = vars[i];
    STRATA_CHECK_ARG(local_name(s.name) == local_name(v.name()), "load_weights('", path,
                     "'): ", what, " variable #", i, " is '", v.name(), "' but the file has '",
                     s.name, "' there");
    STRATA_CHECK_ARG(s.value.shape() == v.shape() && s.value.dtype() == v.dtype(), "load_weights('",
                     path, "'): ", what, " variable '", v.name(), "' is ", v.shape().to_string(),
                     " ", dtype_name(v.dtype()), " but the file's '", s.name, "' is ",
                     s.value.shape().to_string(), " ", dtype_name(s.value.dtype()));
  }
}

std::vector<Variable> optimizer_variables(const Model& model) {
  return model.optimizer() ? model.optimizer()->variables() : std::vector<Variable>{};
}

WeightsFile contents_of(const Model& model, const std::string& kind, bool with_optimizer) {
  WeightsFile f;
  f.kind = kind;
  f.model = named(model.weights());
  if (with_optimizer) f.optimizer = named(optimizer_variables(model));
  return f;
}

}  // namespace

void write_weights_file(const std::string& path, const WeightsFile& contents) {
  nlohmann::json manifest;
  manifest["format"] = "strata.keras.weights";
  manifest["version"] = kVersion;
  manifest["kind"] = contents.kind;
  std::string data;
  auto group = [&](const std::vector<NamedTensor>& tensors) {
    nlohmann::json entries = nlohmann::json::array();
    for (const NamedTensor& t : tensors) {
      STRATA_CHECK_ARG(t.value.defined(), "save_weights: variable '", t.name, "' has no value");
      nlohmann::json e;
      e["name"] = t.name;
      e["dtype"] = std::string(dtype_name(t.value.dtype()));
      e["shape"] = t.value.shape().dims();
      e["offset"] = data.size();
      const std::string bytes = little_endian_bytes(t.value, t.name);
      e["size"] = bytes.size();
      data += bytes;
      entries.push_back(e);
    }
    return entries;
  };
  manifest["model"] = group(contents.model);
  manifest["optimizer"] = group(contents.optimizer);
  manifest["metadata"] = contents.metadata;
  if (!contents.config.empty()) {
    STRATA_CHECK_ARG(contents.kind == "model", "write_weights_file('", path,
                     "'): only a file of kind 'model' holds a config, not one of kind '",
                     contents.kind, "'");
    manifest["config"] = nlohmann::json::parse(contents.config);
  }
  const std::string m = manifest.dump();

  std::string out;
  out.reserve(kHeaderBytes + kCrcBytes * 3 + m.size() + data.size());
  out.append(kMagic, sizeof(kMagic));
  coding::put_fixed32(out, kVersion);
  coding::put_fixed32(out, 0);  // reserved
  coding::put_fixed64(out, m.size());
  coding::put_fixed64(out, data.size());
  coding::put_fixed32(out, crc32c::mask(crc32c::value(out)));
  out += m;
  coding::put_fixed32(out, crc32c::mask(crc32c::value(m)));
  out += data;
  coding::put_fixed32(out, crc32c::mask(crc32c::value(data)));
  strata::write_file_atomically(path, out);
}

WeightsFile read_weights_file(const std::string& path) {
  const std::string in = strata::read_file(path);
  const uint64_t size = in.size();
  if (size < kHeaderBytes + kCrcBytes) {
    data_loss(path, size,
              str_cat("truncated: the file has ", size, " bytes, the header needs ",
                      kHeaderBytes + kCrcBytes));
  }
  if (std::memcmp(in.data(), kMagic, sizeof(kMagic)) != 0)
    data_loss(path, 0, "not a Strata weights file (bad magic)");
  if (crc32c::unmask(coding::decode_fixed32(in.data() + kHeaderBytes)) !=
      crc32c::value(std::string_view(in).substr(0, kHeaderBytes))) {
    data_loss(path, kHeaderBytes, "header checksum mismatch");
  }
  const uint32_t version = coding::decode_fixed32(in.data() + 8);
  STRATA_CHECK(UNIMPLEMENTED, version <= kVersion, "weights file '", path, "' has format version ",
               version, "; this Strata reads version ", kVersion);
  if (version == 0) data_loss(path, 8, "format version 0 is invalid");
  const uint64_t m_size = coding::decode_fixed64(in.data() + 16);
  const uint64_t d_size = coding::decode_fixed64(in.data() + 24);
  const uint64_t m_at = kHeaderBytes + kCrcBytes;
  const uint64_t d_at = m_at + m_size + kCrcBytes;
  // Sizes come from a checksummed header, but guard the arithmetic anyway.
  if (m_size > size || d_size > size || d_at + d_size + kCrcBytes != size) {
    data_loss(
        path, std::min<uint64_t>(size, m_at),
        str_cat("truncated or padded: the header says ",
                m_at + m_size + kCrcBytes + d_size + kCrcBytes, " bytes, the file has ", size));
  }
  const std::string_view manifest_bytes = std::string_view(in).substr(m_at, m_size);
  if (crc32c::unmask(coding::decode_fixed32(in.data() + m_at + m_size)) !=
      crc32c::value(manifest_bytes)) {
    data_loss(path, m_at + m_size, "manifest checksum mismatch");
  }
  const std::string_view data = std::string_view(in).substr(d_at, d_size);
  if (crc32c::unmask(coding::decode_fixed32(in.data() + d_at + d_size)) != crc32c::value(data)) {
    data_loss(path, d_at + d_size, "data checksum mismatch");
  }
  WeightsFile out;
  try {
    const nlohmann::json manifest = nlohmann::json::parse(manifest_bytes);
    out.kind = manifest.at("kind").get<std::string>();
    if (out.kind != "weights" && out.kind != "model" && out.kind != "training_state") {
      data_loss(path, m_at,
                str_cat("manifest field 'kind' is '", out.kind,
                        "', expected 'weights', 'model' or 'training_state'"));
    }
    // Every tensor's bytes belong to it alone: two entries sharing bytes would
    // load one tensor's data into another without any checksum noticing.
    std::map<uint64_t, std::pair<uint64_t, std::string>> ranges;  // offset -> (end, name)
    auto claim = [&](uint64_t offset, uint64_t bytes, const std::string& name) {
      if (bytes == 0) return;
      auto next = ranges.lower_bound(offset);
      if (next != ranges.end() && next->first < offset + bytes) {
        data_loss(path, d_at + offset,
                  str_cat("manifest entries '", name, "' and '", next->second.second,
                          "' overlap in the data section"));
      }
      if (next != ranges.begin() && std::prev(next)->second.first > offset) {
        data_loss(path, d_at + offset,
                  str_cat("manifest entries '", std::prev(next)->second.second, "' and '", name,
                          "' overlap in the data section"));
      }
      ranges.emplace(offset, std::make_pair(offset + bytes, name));
    };
    auto group = [&](const char* field) {
      std::vector<NamedTensor> tensors;
      for (const nlohmann::json& e : manifest.at(field)) {
        const std::string name = e.at("name").get<std::string>();
        const DType dtype = dtype_from_name(e.at("dtype").get<std::string>());
        const TensorShape shape(e.at("shape").get<std::vector<int64_t>>());
        const uint64_t offset = e.at("offset").get<uint64_t>();
        const uint64_t bytes = e.at("size").get<uint64_t>();
        if (bytes != uint64_t(shape.num_elements()) * dtype_size(dtype) || offset > d_size ||
            bytes > d_size - offset) {
          data_loss(path, d_at + offset,
                    str_cat("manifest entry '", name, "' does not fit the data section"));
        }
        claim(offset, bytes, name);
        tensors.push_back({name, tensor_from_little_endian(dtype, shape, data.data() + offset)});
      }
      return tensors;
    };
    out.model = group("model");
    out.optimizer = group("optimizer");
    if (out.kind == "weights" && !out.optimizer.empty()) {
      data_loss(path, m_at,
                str_cat("manifest of kind 'weights' lists ", out.optimizer.size(),
                        " optimizer variables; only 'model' and 'training_state' hold them"));
    }
    out.metadata = manifest.at("metadata").get<std::map<std::string, std::string>>();
    if (manifest.contains("config")) {
      const nlohmann::json& config = manifest["config"];
      if (!config.is_object() || out.kind != "model") {
        data_loss(path, m_at,
                  str_cat("manifest field 'config' must be an object in a file of kind 'model', "
                          "got ",
                          config.is_object() ? "one in a file of kind '" + out.kind + "'"
                                             : config.dump()));
      }
      out.config = config.dump();
    }
  } catch (const nlohmann::json::exception& e) {
    data_loss(path, m_at, str_cat("malformed manifest: ", e.what()));
  } catch (const InvalidArgumentError& e) {
    data_loss(path, m_at, str_cat("malformed manifest: ", e.what()));
  }
  return out;
}

namespace {

// Every worker reads the variables (any collective a read needs runs on all
// of them); a worker that should not checkpoint writes into its temporary
// directory, removed right after (distributed_file_utils.h).
void write_as_this_worker(const Model& model, const std::string& path, const WeightsFile& f) {
  const distribute::Strategy& strategy = model.distribute_strategy();
  const std::string target = internal::write_filepath(path, strategy);
  write_weights_file(target, f);
  internal::remove_temp_dir_with_filepath(target, strategy);
}

}  // namespace

void save_weights(const Model& model, const std::string& path) {
  write_as_this_worker(model, path, contents_of(model, "weights", /*with_optimizer=*/false));
}

void save_model(const Model& model, const std::string& path, const std::string& config) {
  WeightsFile f = contents_of(model, "model", /*with_optimizer=*/true);
  f.config = config;
  write_as_this_worker(model, path, f);
}

void load_weights(Model& model, const std::string& path) {
  const WeightsFile f = read_weights_file(path);
  const std::vector<Variable> vars = model.weights();
  STRATA_CHECK(FAILED_PRECONDITION, model.built() || f.model.empty(), "load_weights('", path,
               "'): model '", model.name(),
               "' is not built; call it on a batch (or give an input_shape) first");
  check_matches(f.model, vars, "model", path);
  for (size_t i = 0; i < vars.size(); ++i) vars[i].assign(f.model[i].value);
}

void save_training_state(const Model& model, const std::string& path,
                         const std::map<std::string, std::string>& metadata) {
  WeightsFile f = contents_of(model, "training_state", /*with_optimizer=*/true);
  f.metadata = metadata;
  write_weights_file(path, f);
}

std::map<std::string, std::string> load_training_state(Model& model, const std::string& path) {
  const WeightsFile f = read_weights_file(path);
  assign_training_state(model, f, path, /*with_optimizer=*/true);
  return f.metadata;
}

void assign_training_state(Model& model, const WeightsFile& f, const std::string& path,
                           bool with_optimizer) {
  STRATA_CHECK(FAILED_PRECONDITION, model.built() || f.model.empty(), "load_training_state('", path,
               "'): model '", model.name(),
               "' is not built; call it on a batch (or give an input_shape) first");
  const std::vector<Variable> vars = model.weights();
  check_matches(f.model, vars, "model", path);
  std::vector<Variable> opt_vars = optimizer_variables(model);
  const bool restore_optimizer = with_optimizer && !f.optimizer.empty();
  if (restore_optimizer) {
    STRATA_CHECK(FAILED_PRECONDITION, model.optimizer() != nullptr, "load_training_state('", path,
                 "'): the file has optimizer variables but model '", model.name(),
                 "' has no optimizer (compile it)");
    if (!model.optimizer()->built() && f.optimizer.size() != opt_vars.size()) {
      // An optimizer that has not stepped yet has no slots: create them (zeros,
      // iterations untouched), as Keras's deferred restoration would. (A file
      // saved before the first step has no slots either: nothing to build.)
      model.optimizer()->build(model.trainable_variables());
      opt_vars = optimizer_variables(model);
    }
    check_matches(f.optimizer, opt_vars, "optimizer", path);
  }
  for (size_t i = 0; i < vars.size(); ++i) vars[i].assign(f.model[i].value);
  if (restore_optimizer) {
    for (size_t i = 0; i < f.optimizer.size(); ++i) opt_vars[i].assign(f.optimizer[i].value);
  }
}

}  // namespace strata::keras
