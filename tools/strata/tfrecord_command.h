#pragma once
// `strata tfrecord`: convert IDX datasets to TFRecord files of tf.Examples,
// inspect records, verify checksums.
//
//   strata tfrecord convert-idx train-images.gz train-labels.gz out.tfrecord --shards 4
//   --compression GZIP strata tfrecord inspect out.tfrecord-00000-of-00004 --limit 2 strata
//   tfrecord verify out.tfrecord-*      # exit 1 and the first corrupt offset per bad file

#include <iosfwd>
#include <string>
#include <vector>

namespace strata::tools {

struct ConvertIdxOptions {
  std::string images;
  std::string labels;
  std::string out;
  int shards = 1;
  std::string compression;  // "", "ZLIB", "GZIP"
};
// Writes examples {"image": bytes (the image's raw uint8 pixels), "label": int64}
// round-robin into `shards` files: `out` itself for one shard, else
// "<out>-0000i-of-0000n" (TF's sharded naming). Returns the paths written.
std::vector<std::string> convert_idx(const ConvertIdxOptions& options, std::ostream& log);

// The compression of a TFRecord file: "GZIP" when it starts with the gzip magic, else "".
std::string detect_compression(const std::string& path);

// Prints up to `limit` records (0 = all), decoding tf.Example features.
void inspect_tfrecord(const std::string& path, int limit, const std::string& compression,
                      std::ostream& out);

// Reads every record of every file; prints "OK <file>: n records" or
// "CORRUPT <file>: <error>" per file. Returns the number of corrupt files.
int verify_tfrecords(const std::vector<std::string>& paths, const std::string& compression,
                     std::ostream& out);

}  // namespace strata::tools
