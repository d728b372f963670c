#pragma once
// strata::io — bytes on disk in TensorFlow's formats: TFRecord files (with ZLIB /
// GZIP compression), the tf.train.Example codec with parse_single_example /
// parse_example, IDX (MNIST) files, text lines and fixed-length records. This
// layer depends only on base and deals in bytes, strings and typed vectors; the
// data layer wraps it in Datasets and tensors. Formats: docs/formats/.
//
//   namespace io = strata::io;
//   io::TFRecordWriter w(path, {.compression_type = "GZIP"});
//   w.write(io::Example().set_int64_list("label", {3}).serialize());
//   w.close();
//   io::TFRecordReader r(path, {.compression_type = "GZIP"});
//   while (auto rec = r.read_next()) {
//     auto f = io::parse_single_example_features(*rec, {{"label", io::FixedLenFeature({},
//     io::FeatureDType::int64)}}); std::cout << f.at("label").values.int64_values[0];
//   }

#include "strata/io/example.h"
#include "strata/io/idx.h"
#include "strata/io/text_line.h"
#include "strata/io/tfrecord.h"
