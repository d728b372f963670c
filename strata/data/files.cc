// File sources: list_files and the reader datasets over strata/io.
#include <glob.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <random>
#include <set>

#include "strata/base/errors.h"
#include "strata/core/random.h"
#include "strata/data/dataset.h"
#include "strata/data/internal/node.h"
#include "strata/data/internal/state_io.h"
#include "strata/data/internal/transform_util.h"
#include "strata/io/text_line.h"
#include "strata/io/tfrecord.h"

namespace strata::data {
namespace {

// Reads one file's records: returns nullopt at its end.
using RecordReaderFn = std::function<std::optional<std::string>()>;
using OpenFn = std::function<RecordReaderFn(const std::string& path)>;

// A reader source: one scalar string per record, files read in order.
class FileSourceNode : public DatasetNode {
 public:
  FileSourceNode(NodeKind kind, std::vector<std::string> files, OpenFn open)
      : DatasetNode(kind, {}), files_(std::move(files)), open_(std::move(open)) {}
  std::vector<TensorSpec> element_spec() const override {
    return {TensorSpec(TensorShape{}, DType::string)};
  }
  std::unique_ptr<internal::IteratorImpl> make_iterator() const override {
    struct State {
      size_t file = 0;
      int64_t record = 0;  // records read from the open file
      RecordReaderFn reader;
    };
    auto st = std::make_shared<State>();
    auto files = files_;
    auto open = open_;
    const char* who = node_kind_name(kind());
    return internal::make_fn_iterator(
        [st, files, open]() -> std::optional<Element> {
          while (st->file < files.size()) {
            if (!st->reader) {
              st->reader = open(files[st->file]);
              st->record = 0;
            }
            if (auto rec = st->reader()) {
              ++st->record;
              return Element{constant(*rec)};
            }
            st->reader = nullptr;  // closes the file
            ++st->file;
          }
          return std::nullopt;
        },
        // TF's readers save the file index and the offset in it; the record
        // number serves for every reader here (compressed files included):
        // a restore reopens the file and reads past that many records.
        [st, files](internal::StateWriter& w, std::vector<Element>&) {
          w.write_int("file", static_cast<int64_t>(st->file));
          w.write_int("record", st->reader ? st->record : 0);
          w.write("file_name", constant(st->file < files.size() ? files[st->file] : ""));
        },
        [st, files, open, who](internal::StateReader& r) {
          const int64_t file = r.read_int("file");
          const int64_t record = r.read_int("record");
          STRATA_CHECK_ARG(file >= 0 && file <= static_cast<int64_t>(files.size()),
                           "restoring an iterator: expected a file index in [0, ", files.size(),
                           "] for ", who, " at ", r.where(), ", got ", file);
          const std::string saved_name = r.read("file_name").item<std::string>();
          const std::string name = file < static_cast<int64_t>(files.size()) ? files[file] : "";
          STRATA_CHECK_ARG(saved_name == name, "restoring an iterator: ", who, " at ", r.where(),
                           " was reading '", saved_name, "' as file ", file, ", got '", name,
                           "' at that index");
          st->file = static_cast<size_t>(file);
          st->reader = nullptr;
          st->record = 0;
          if (record > 0) {
            st->reader = open(files[st->file]);
            for (; st->record < record; ++st->record) {
              STRATA_CHECK(DATA_LOSS, st->reader().has_value(), "restoring an iterator: ", who,
                           " had read ", record, " records of '", name, "', which now has ",
                           st->record);
            }
          }
        });
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset>) const override {
    return std::make_shared<FileSourceNode>(kind(), files_, open_);
  }
  std::vector<std::string> files() const override { return files_; }
  std::shared_ptr<const DatasetNode> with_files(std::vector<std::string> files) const override {
    return std::make_shared<FileSourceNode>(kind(), std::move(files), open_);
  }

 private:
  std::vector<std::string> files_;
  OpenFn open_;
};

// list_files: file names as scalar strings, in glob-sorted order or shuffled
// (a new order per iteration, TF's reshuffle_each_iteration default).
class ListFilesNode : public DatasetNode {
 public:
  ListFilesNode(std::vector<std::string> files, bool shuffle, uint64_t seed)
      : DatasetNode(NodeKind::kListFiles, {}),
        files_(std::move(files)),
        shuffle_(shuffle),
        seed_(seed),
        epoch_(std::make_shared<std::atomic<uint64_t>>(0)) {}
  int64_t cardinality() const override { return static_cast<int64_t>(files_.size()); }
  std::vector<TensorSpec> element_spec() const override {
    return {TensorSpec(TensorShape{}, DType::string)};
  }
  std::unique_ptr<internal::IteratorImpl> make_iterator() const override {
    auto order = std::make_shared<std::vector<std::string>>(files_);
    if (shuffle_) {
      random::Philox gen(seed_, epoch_->fetch_add(1));
      // Fisher-Yates with Philox draws.
      for (size_t i = order->size(); i > 1; --i) {
        auto b = gen(i);
        const size_t j = ((uint64_t{b[0]} << 32) | b[1]) % i;
        std::swap((*order)[i - 1], (*order)[j]);
      }
    }
    auto pos = std::make_shared<size_t>(0);
    auto epoch = epoch_;
    return internal::make_fn_iterator(
        [order, pos]() -> std::optional<Element> {
          if (*pos == order->size()) return std::nullopt;
          return Element{constant((*order)[(*pos)++])};
        },
        [order, pos, epoch](internal::StateWriter& w, std::vector<Element>&) {
          w.write("order", constant(*order));
          w.write_int("position", static_cast<int64_t>(*pos));
          w.write_int("next_epoch", static_cast<int64_t>(epoch->load()));
        },
        [order, pos, epoch](internal::StateReader& r) {
          *order = r.read("order").to_vector<std::string>();
          const int64_t p = r.read_int("position");
          STRATA_CHECK_ARG(p >= 0 && p <= static_cast<int64_t>(order->size()),
                           "restoring an iterator: expected a list_files position in [0, ",
                           order->size(), "] at ", r.where(), ", got ", p);
          *pos = static_cast<size_t>(p);
          *epoch = static_cast<uint64_t>(r.read_int("next_epoch"));
        });
  }
  std::shared_ptr<const DatasetNode> with_inputs(std::vector<Dataset>) const override {
    return std::make_shared<ListFilesNode>(files_, shuffle_, seed_);
  }
  std::vector<std::string> files() const override { return files_; }
  std::shared_ptr<const DatasetNode> with_files(std::vector<std::string> files) const override {
    return std::make_shared<ListFilesNode>(std::move(files), shuffle_, seed_);
  }

 private:
  std::vector<std::string> files_;
  bool shuffle_;
  uint64_t seed_;
  std::shared_ptr<std::atomic<uint64_t>> epoch_;
};

void check_files(const std::vector<std::string>& files, const char* who) {
  STRATA_CHECK_ARG(!files.empty(), who, ": expected at least one file name, got none");
  for (const auto& f : files)
    STRATA_CHECK_ARG(!f.empty(), who, ": expected non-empty file names, got \"\"");
}

}  // namespace

Dataset Dataset::list_files(const std::vector<std::string>& patterns, ListFilesOptions o) {
  STRATA_CHECK_ARG(!patterns.empty(), "list_files: expected at least one pattern, got none");
  std::set<std::string> found;
  for (const std::string& p : patterns) {
    glob_t g{};
    const int rc = ::glob(p.c_str(), 0, nullptr, &g);
    if (rc == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) found.insert(g.gl_pathv[i]);
    ::globfree(&g);
  }
  STRATA_CHECK_ARG(!found.empty(), "No files matched pattern: ",
                   patterns.size() == 1 ? patterns[0] : str_cat(patterns));
  std::random_device rd;
  const uint64_t seed = o.seed.value_or((uint64_t{rd()} << 32) | rd());
  return Dataset(std::make_shared<ListFilesNode>(
      std::vector<std::string>(found.begin(), found.end()), o.shuffle.value_or(true), seed));
}

Dataset TFRecordDataset(std::vector<std::string> files, const TFRecordOptions& o) {
  check_files(files, "TFRecordDataset");
  STRATA_CHECK_ARG(o.buffer_size >= 0, "TFRecordDataset: expected buffer_size >= 0, got ",
                   o.buffer_size);
  // Validates the compression type now (TF fails at construction too).
  io::TFRecordReader::from_bytes("", {.compression_type = o.compression_type});
  const std::string ct = o.compression_type;
  return Dataset(std::make_shared<FileSourceNode>(
      NodeKind::kTFRecord, std::move(files), [ct](const std::string& path) {
        auto r =
            std::make_shared<io::TFRecordReader>(path, io::TFRecordOptions{.compression_type = ct});
        return RecordReaderFn([r] { return r->read_next(); });
      }));
}

Dataset TextLineDataset(std::vector<std::string> files) {
  check_files(files, "TextLineDataset");
  return Dataset(std::make_shared<FileSourceNode>(
      NodeKind::kTextLine, std::move(files), [](const std::string& path) {
        auto r = std::make_shared<io::TextLineReader>(path);
        return RecordReaderFn([r] { return r->read_next(); });
      }));
}

Dataset FixedLengthRecordDataset(std::vector<std::string> files, int64_t record_bytes,
                                 int64_t header_bytes, int64_t footer_bytes) {
  check_files(files, "FixedLengthRecordDataset");
  STRATA_CHECK_ARG(record_bytes > 0, "FixedLengthRecordDataset: expected record_bytes > 0, got ",
                   record_bytes);
  STRATA_CHECK_ARG(header_bytes >= 0 && footer_bytes >= 0,
                   "FixedLengthRecordDataset: expected header_bytes, footer_bytes >= 0, got ",
                   header_bytes, ", ", footer_bytes);
  const io::FixedLengthRecordOptions fo{
      .header_bytes = header_bytes, .record_bytes = record_bytes, .footer_bytes = footer_bytes};
  return Dataset(std::make_shared<FileSourceNode>(
      NodeKind::kFixedLengthRecord, std::move(files), [fo](const std::string& path) {
        auto r = std::make_shared<io::FixedLengthRecordReader>(path, fo);
        return RecordReaderFn([r] { return r->read_next(); });
      }));
}

}  // namespace strata::data
