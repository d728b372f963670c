#include "strata/io/example.h"

#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <limits>

#include "strata/base/errors.h"
#include "strata/io/example.pb.h"

namespace strata::io {
namespace {

namespace pb = ::tensorflow;

std::string shape_str(const std::vector<int64_t>& shape) { return str_cat(shape); }

void to_proto(const Feature& f, pb::Feature* out) {
  if (!f.kind) return;
  const FeatureValues& v = *f.kind;
  switch (v.dtype) {
    case FeatureDType::float32: {
      auto* list = out->mutable_float_list()->mutable_value();
      list->Add(v.float_values.begin(), v.float_values.end());
      break;
    }
    case FeatureDType::int64: {
      auto* list = out->mutable_int64_list()->mutable_value();
      list->Add(v.int64_values.begin(), v.int64_values.end());
      break;
    }
    case FeatureDType::string: {
      auto* list = out->mutable_bytes_list();
      for (const std::string& s : v.string_values) list->add_value(s);
      break;
    }
  }
}

Feature from_proto(const pb::Feature& f) {
  switch (f.kind_case()) {
    case pb::Feature::kFloatList:
      return {FeatureValues::of(
          std::vector<float>(f.float_list().value().begin(), f.float_list().value().end()))};
    case pb::Feature::kInt64List:
      return {FeatureValues::of(
          std::vector<int64_t>(f.int64_list().value().begin(), f.int64_list().value().end()))};
    case pb::Feature::kBytesList:
      return {FeatureValues::of(
          std::vector<std::string>(f.bytes_list().value().begin(), f.bytes_list().value().end()))};
    case pb::Feature::KIND_NOT_SET: return {};
  }
  return {};
}

// The dtype a wire Feature holds, or nullopt when no list is set.
std::optional<FeatureDType> dtype_of(const pb::Feature& f) {
  switch (f.kind_case()) {
    case pb::Feature::kFloatList: return FeatureDType::float32;
    case pb::Feature::kInt64List: return FeatureDType::int64;
    case pb::Feature::kBytesList: return FeatureDType::string;
    case pb::Feature::KIND_NOT_SET: return std::nullopt;
  }
  return std::nullopt;
}

size_t count_of(const pb::Feature& f) {
  switch (f.kind_case()) {
    case pb::Feature::kFloatList: return static_cast<size_t>(f.float_list().value_size());
    case pb::Feature::kInt64List: return static_cast<size_t>(f.int64_list().value_size());
    case pb::Feature::kBytesList: return static_cast<size_t>(f.bytes_list().value_size());
    case pb::Feature::KIND_NOT_SET: return 0;
  }
  return 0;
}

// Appends the wire feature's values (of the already-checked dtype) to `out`.
void append_values(const pb::Feature& f, FeatureValues* out) {
  switch (f.kind_case()) {
    case pb::Feature::kFloatList:
      out->float_values.insert(out->float_values.end(), f.float_list().value().begin(),
                               f.float_list().value().end());
      break;
    case pb::Feature::kInt64List:
      out->int64_values.insert(out->int64_values.end(), f.int64_list().value().begin(),
                               f.int64_list().value().end());
      break;
    case pb::Feature::kBytesList:
      out->string_values.insert(out->string_values.end(), f.bytes_list().value().begin(),
                                f.bytes_list().value().end());
      break;
    case pb::Feature::KIND_NOT_SET: break;
  }
}

void append_default(const FeatureValues& d, FeatureValues* out) {
  out->float_values.insert(out->float_values.end(), d.float_values.begin(), d.float_values.end());
  out->int64_values.insert(out->int64_values.end(), d.int64_values.begin(), d.int64_values.end());
  out->string_values.insert(out->string_values.end(), d.string_values.begin(),
                            d.string_values.end());
}

void reserve_values(FeatureValues* v, size_t n) {
  switch (v->dtype) {
    case FeatureDType::float32: v->float_values.reserve(n); break;
    case FeatureDType::int64: v->int64_values.reserve(n); break;
    case FeatureDType::string: v->string_values.reserve(n); break;
  }
}

// Validates the specs once per call and returns the element count of each dense one.
std::map<std::string, size_t> check_specs(const FeatureSpecs& specs, std::string_view who) {
  std::map<std::string, size_t> sizes;
  for (const auto& [name, spec] : specs) {
    const auto* fixed = std::get_if<FixedLenFeature>(&spec);
    if (!fixed) continue;
    uint64_t n = 1;
    for (int64_t d : fixed->shape) {
      STRATA_CHECK_ARG(d >= 0, who, ": FixedLenFeature '", name,
                       "' expected a fully defined shape, got ", shape_str(fixed->shape));
      STRATA_CHECK_ARG(
          d == 0 || n <= std::numeric_limits<uint32_t>::max() / static_cast<uint64_t>(d), who,
          ": FixedLenFeature '", name, "' shape ", shape_str(fixed->shape), " is too large");
      n *= static_cast<uint64_t>(d);
    }
    if (fixed->default_value) {
      STRATA_CHECK_ARG(fixed->default_value->dtype == fixed->dtype, who, ": FixedLenFeature '",
                       name, "' expected a default of type ", feature_dtype_name(fixed->dtype),
                       ", got ", feature_dtype_name(fixed->default_value->dtype));
      STRATA_CHECK_ARG(fixed->default_value->size() == n, who, ": FixedLenFeature '", name,
                       "' expected a default with ", n, " values for shape ",
                       shape_str(fixed->shape), ", got ", fixed->default_value->size());
    }
    sizes[name] = static_cast<size_t>(n);
  }
  return sizes;
}

const pb::Feature* find_feature(const pb::Example& ex, const std::string& name) {
  const auto& map = ex.features().feature();
  auto it = map.find(name);
  if (it == map.end() || it->second.kind_case() == pb::Feature::KIND_NOT_SET) return nullptr;
  return &it->second;
}

// Parses one example's features into `out` (already initialised for the batch).
// `prefix` starts TF-style error messages ("Key: x." or "Name: <unknown>, Key: x, Index: 3.").
void parse_one(const pb::Example& ex, const FeatureSpecs& specs,
               const std::map<std::string, size_t>& sizes, int64_t index, bool batched,
               ParsedFeatures* out) {
  auto prefix = [&](const std::string& name) {
    return batched ? str_cat("Name: <unknown>, Key: ", name, ", Index: ", index, ".  ")
                   : str_cat("Key: ", name, ".  ");
  };
  for (const auto& [name, spec] : specs) {
    ParsedFeature& result = (*out)[name];
    const pb::Feature* f = find_feature(ex, name);
    const FeatureDType want = std::visit([](const auto& s) { return s.dtype; }, spec);
    if (f) {
      const FeatureDType got = *dtype_of(*f);
      STRATA_CHECK_ARG(got == want, prefix(name),
                       "Data types don't match. Data type: ", feature_dtype_name(got),
                       " but expected type: ", feature_dtype_name(want));
    }
    if (const auto* fixed = std::get_if<FixedLenFeature>(&spec)) {
      const size_t n = sizes.at(name);
      if (!f) {
        STRATA_CHECK_ARG(fixed->default_value.has_value(), prefix(name), "Feature: ", name,
                         " (data type: ", feature_dtype_name(want),
                         ") is required but could not be found.");
        append_default(*fixed->default_value, &result.values);
        continue;
      }
      const size_t count = count_of(*f);
      STRATA_CHECK_ARG(count == n, prefix(name), "Number of ", feature_dtype_name(want),
                       " values != expected.  Values size: ", count,
                       " but output shape: ", shape_str(fixed->shape));
      append_values(*f, &result.values);
    } else {
      const size_t count = f ? count_of(*f) : 0;
      for (size_t j = 0; j < count; ++j) {
        if (batched) result.indices.push_back(index);
        result.indices.push_back(static_cast<int64_t>(j));
      }
      if (f) append_values(*f, &result.values);
      int64_t& max_len = result.shape.back();
      max_len = std::max<int64_t>(max_len, static_cast<int64_t>(count));
    }
  }
}

void init_results(const FeatureSpecs& specs, const std::map<std::string, size_t>& sizes,
                  std::optional<int64_t> batch, ParsedFeatures* out) {
  for (const auto& [name, spec] : specs) {
    ParsedFeature& r = (*out)[name];
    if (const auto* fixed = std::get_if<FixedLenFeature>(&spec)) {
      r.sparse = false;
      r.values.dtype = fixed->dtype;
      if (batch) r.shape.push_back(*batch);
      r.shape.insert(r.shape.end(), fixed->shape.begin(), fixed->shape.end());
      reserve_values(&r.values, sizes.at(name) * static_cast<size_t>(batch.value_or(1)));
    } else {
      r.sparse = true;
      r.values.dtype = std::get<VarLenFeature>(spec).dtype;
      if (batch) r.shape.push_back(*batch);
      r.shape.push_back(0);  // max number of values, grown while parsing
    }
  }
}

bool parse_proto(std::string_view bytes, pb::Example* ex) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) return false;
  return ex->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

}  // namespace

std::string_view feature_dtype_name(FeatureDType dtype) noexcept {
  switch (dtype) {
    case FeatureDType::float32: return "float";
    case FeatureDType::int64: return "int64";
    case FeatureDType::string: return "string";
  }
  return "unknown";
}

FeatureValues FeatureValues::of(std::vector<float> v) {
  FeatureValues r;
  r.dtype = FeatureDType::float32;
  r.float_values = std::move(v);
  return r;
}
FeatureValues FeatureValues::of(std::vector<int64_t> v) {
  FeatureValues r;
  r.dtype = FeatureDType::int64;
  r.int64_values = std::move(v);
  return r;
}
FeatureValues FeatureValues::of(std::vector<std::string> v) {
  FeatureValues r;
  r.dtype = FeatureDType::string;
  r.string_values = std::move(v);
  return r;
}

size_t FeatureValues::size() const noexcept {
  switch (dtype) {
    case FeatureDType::float32: return float_values.size();
    case FeatureDType::int64: return int64_values.size();
    case FeatureDType::string: return string_values.size();
  }
  return 0;
}

Example& Example::set_bytes_list(std::string name, std::vector<std::string> values) {
  return set_feature(std::move(name), Feature{FeatureValues::of(std::move(values))});
}
Example& Example::set_float_list(std::string name, std::vector<float> values) {
  return set_feature(std::move(name), Feature{FeatureValues::of(std::move(values))});
}
Example& Example::set_int64_list(std::string name, std::vector<int64_t> values) {
  return set_feature(std::move(name), Feature{FeatureValues::of(std::move(values))});
}
Example& Example::set_feature(std::string name, Feature feature) {
  features_[std::move(name)] = std::move(feature);
  return *this;
}

std::string Example::serialize() const {
  google::protobuf::Arena arena;
  auto* ex = google::protobuf::Arena::CreateMessage<pb::Example>(&arena);
  auto* map = ex->mutable_features()->mutable_feature();
  for (const auto& [name, feature] : features_) to_proto(feature, &(*map)[name]);
  std::string out;
  {
    google::protobuf::io::StringOutputStream sos(&out);
    google::protobuf::io::CodedOutputStream cos(&sos);
    // Deterministic serialisation writes map entries in key order (TF's
    // SerializeToString does not promise an order; parsers accept any).
    cos.SetSerializationDeterministic(true);
    ex->SerializeToCodedStream(&cos);
  }
  return out;
}

Example Example::parse(std::string_view bytes) {
  google::protobuf::Arena arena;
  auto* ex = google::protobuf::Arena::CreateMessage<pb::Example>(&arena);
  STRATA_CHECK(DATA_LOSS, parse_proto(bytes, ex),
               "Example::parse: expected a serialized tf.train.Example, got ", bytes.size(),
               " bytes that do not parse");
  Example result;
  for (const auto& [name, feature] : ex->features().feature()) {
    result.features_[name] = from_proto(feature);
  }
  return result;
}

ParsedFeatures parse_single_example_features(std::string_view serialized,
                                             const FeatureSpecs& specs) {
  const auto sizes = check_specs(specs, "parse_single_example");
  google::protobuf::Arena arena;
  auto* ex = google::protobuf::Arena::CreateMessage<pb::Example>(&arena);
  STRATA_CHECK_ARG(parse_proto(serialized, ex),
                   "parse_single_example: Could not parse example input (", serialized.size(),
                   " bytes)");
  ParsedFeatures out;
  init_results(specs, sizes, std::nullopt, &out);
  parse_one(*ex, specs, sizes, 0, /*batched=*/false, &out);
  return out;
}

ParsedFeatures parse_example_features(std::span<const std::string> serialized,
                                      const FeatureSpecs& specs) {
  const auto sizes = check_specs(specs, "parse_example");
  ParsedFeatures out;
  init_results(specs, sizes, static_cast<int64_t>(serialized.size()), &out);
  google::protobuf::Arena arena;
  for (size_t i = 0; i < serialized.size(); ++i) {
    auto* ex = google::protobuf::Arena::CreateMessage<pb::Example>(&arena);
    STRATA_CHECK_ARG(parse_proto(serialized[i], ex),
                     "parse_example: Could not parse example input ", i, " (", serialized[i].size(),
                     " bytes)");
    parse_one(*ex, specs, sizes, static_cast<int64_t>(i), /*batched=*/true, &out);
    arena.Reset();
  }
  return out;
}

}  // namespace strata::io
