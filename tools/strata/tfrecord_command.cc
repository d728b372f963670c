#include "tools/strata/tfrecord_command.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <ostream>

#include "strata/base/errors.h"
#include "strata/io/example.h"
#include "strata/io/idx.h"
#include "strata/io/tfrecord.h"

namespace strata::tools {

namespace {

std::string shard_path(const std::string& out, int index, int shards) {
  if (shards == 1) return out;
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), "-%05d-of-%05d", index, shards);
  return out + suffix;
}

void print_values(const io::FeatureValues& v, std::ostream& out) {
  constexpr size_t kShown = 8;
  const size_t n = v.size();
  out << feature_dtype_name(v.dtype) << "[" << n << "] ";
  for (size_t i = 0; i < std::min(n, kShown); ++i) {
    if (i) out << ' ';
    switch (v.dtype) {
      case io::FeatureDType::float32: out << v.float_values[i]; break;
      case io::FeatureDType::int64: out << v.int64_values[i]; break;
      case io::FeatureDType::string: {
        const std::string& s = v.string_values[i];
        const bool printable =
            std::all_of(s.begin(), s.end(), [](unsigned char c) { return c >= 32 && c < 127; });
        if (printable) {
          out << '"' << s.substr(0, 64) << (s.size() > 64 ? "...\"" : "\"");
        } else {
          out << "<" << s.size() << " bytes>";
        }
        break;
      }
    }
  }
  if (n > kShown) out << " ...";
}

}  // namespace

std::vector<std::string> convert_idx(const ConvertIdxOptions& options, std::ostream& log) {
  STRATA_CHECK_ARG(options.shards >= 1, "tfrecord convert-idx: --shards must be >= 1, got ",
                   options.shards);
  const io::IdxArray images = io::read_idx(options.images);
  const io::IdxArray labels = io::read_idx(options.labels);
  STRATA_CHECK_ARG(
      !images.dims.empty() && labels.dims.size() == 1 && labels.dims[0] == images.dims[0],
      "tfrecord convert-idx: expected images [n, ...] and labels [n], got images ", images.dims,
      " (", options.images, ") and labels ", labels.dims, " (", options.labels, ")");
  const int64_t n = images.dims[0];
  const size_t pixels = n == 0 ? 0 : images.data.size() / n;
  std::vector<io::TFRecordWriter> writers;
  std::vector<std::string> paths;
  for (int s = 0; s < options.shards; ++s) {
    paths.push_back(shard_path(options.out, s, options.shards));
    writers.emplace_back(paths.back(),
                         io::TFRecordOptions{.compression_type = options.compression});
  }
  for (int64_t i = 0; i < n; ++i) {
    io::Example example;
    example.set_bytes_list(
        "image",
        {std::string(reinterpret_cast<const char*>(images.data.data()) + i * pixels, pixels)});
    example.set_int64_list("label", {static_cast<int64_t>(labels.data[i])});
    writers[i % options.shards].write(example.serialize());
  }
  for (auto& w : writers) w.close();
  log << "wrote " << n << " examples (image: " << pixels << " bytes, label: int64) to "
      << paths.size() << " file" << (paths.size() == 1 ? "" : "s") << "\n";
  for (const auto& p : paths) log << "  " << p << "\n";
  return paths;
}

std::string detect_compression(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  STRATA_CHECK(NOT_FOUND, in.good(), "tfrecord: cannot open '", path, "'");
  unsigned char magic[2] = {0, 0};
  in.read(reinterpret_cast<char*>(magic), 2);
  return (in.gcount() == 2 && magic[0] == 0x1f && magic[1] == 0x8b) ? "GZIP" : "";
}

void inspect_tfrecord(const std::string& path, int limit, const std::string& compression,
                      std::ostream& out) {
  const std::string type = compression == "auto" ? detect_compression(path) : compression;
  io::TFRecordReader reader(path, {.compression_type = type});
  int count = 0;
  for (;;) {
    const uint64_t offset = reader.offset();
    std::optional<std::string> record = reader.read_next();
    if (!record) break;
    out << "record " << count << " at offset " << offset << ": " << record->size() << " bytes\n";
    try {
      const io::Example example = io::Example::parse(*record);
      for (const auto& [name, feature] : example.features()) {
        out << "  " << name << ": ";
        if (feature.kind) {
          print_values(*feature.kind, out);
        } else {
          out << "(no value)";
        }
        out << "\n";
      }
    } catch (const Error&) {
      out << "  (not a tf.Example)\n";
    }
    if (++count == limit) break;
  }
  out << count << " record" << (count == 1 ? "" : "s") << " shown\n";
}

int verify_tfrecords(const std::vector<std::string>& paths, const std::string& compression,
                     std::ostream& out) {
  int corrupt = 0;
  for (const std::string& path : paths) {
    try {
      const std::string type = compression == "auto" ? detect_compression(path) : compression;
      io::TFRecordReader reader(path, {.compression_type = type});
      int64_t records = 0;
      while (reader.read_next()) ++records;
      out << "OK " << path << ": " << records << " records\n";
    } catch (const Error& e) {
      ++corrupt;
      out << "CORRUPT " << path << ": " << error_code_name(e.code()) << ": " << e.what() << "\n";
    }
  }
  return corrupt;
}

}  // namespace strata::tools
