// io benchmarks: TFRecord reading with CRC verification against a plain read() of
// the same page-cached file, and tf.Example parsing of Fashion-MNIST-like records.
//   io_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "strata/io/example.h"
#include "strata/io/tfrecord.h"

namespace {

namespace io = strata::io;

constexpr size_t kRecordBytes = 4096;
constexpr size_t kFileBytes = size_t{256} << 20;

// A 256 MiB file of 4 KiB records, written once per process and read once so it
// sits in the page cache; removed at exit.
const std::string& tfrecord_file() {
  static const std::string path = [] {
    std::string dir = (std::filesystem::temp_directory_path() / "strata_io_bench_XXXXXX").string();
    if (!mkdtemp(dir.data())) std::abort();
    std::string p = dir + "/records.tfrecord";
    std::mt19937_64 rng(1);
    std::string payload(kRecordBytes, '\0');
    io::TFRecordWriter w(p);
    for (size_t written = 0; written < kFileBytes; written += kRecordBytes + 16) {
      for (auto& c : payload) c = static_cast<char>(rng());
      w.write(payload);
    }
    w.close();
    static std::string cleanup_dir = dir;
    std::atexit([] { std::filesystem::remove_all(cleanup_dir); });
    return p;
  }();
  return path;
}

size_t plain_read(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  std::vector<char> buf(1 << 20);
  size_t total = 0;
  ssize_t r;
  while ((r = ::read(fd, buf.data(), buf.size())) > 0) total += static_cast<size_t>(r);
  ::close(fd);
  return total;
}

void BM_PlainRead(benchmark::State& state) {
  const std::string& path = tfrecord_file();
  size_t bytes = plain_read(path);  // warm the page cache
  for (auto _ : state) {
    bytes = plain_read(path);
    benchmark::DoNotOptimize(bytes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_PlainRead)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_TFRecordReadVerified(benchmark::State& state) {
  const std::string& path = tfrecord_file();
  const size_t bytes = plain_read(path);
  size_t records = 0;
  for (auto _ : state) {
    io::TFRecordReader r(path);
    records = 0;
    while (auto rec = r.read_next()) {
      benchmark::DoNotOptimize(rec->data());
      ++records;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["records"] = static_cast<double>(records);
}
BENCHMARK(BM_TFRecordReadVerified)->Unit(benchmark::kMillisecond)->UseRealTime();

std::vector<std::string> fashion_like_examples(size_t n) {
  std::mt19937 rng(7);
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    std::string image(784, '\0');
    for (auto& c : image) c = static_cast<char>(rng());
    out.push_back(io::Example()
                      .set_bytes_list("image", {image})
                      .set_int64_list("label", {static_cast<int64_t>(rng() % 10)})
                      .serialize());
  }
  return out;
}

const io::FeatureSpecs& fashion_spec() {
  static const io::FeatureSpecs spec = {
      {"image", io::FixedLenFeature({}, io::FeatureDType::string)},
      {"label", io::FixedLenFeature({}, io::FeatureDType::int64)}};
  return spec;
}

void BM_ParseSingleExampleFashionMnist(benchmark::State& state) {
  const auto examples = fashion_like_examples(1024);
  size_t i = 0;
  for (auto _ : state) {
    auto f = io::parse_single_example_features(examples[i++ % examples.size()], fashion_spec());
    benchmark::DoNotOptimize(f);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_ParseSingleExampleFashionMnist);

void BM_ParseExampleBatch128FashionMnist(benchmark::State& state) {
  const auto examples = fashion_like_examples(128);
  for (auto _ : state) {
    auto f = io::parse_example_features(examples, fashion_spec());
    benchmark::DoNotOptimize(f);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * examples.size()));
}
BENCHMARK(BM_ParseExampleBatch128FashionMnist);

}  // namespace

BENCHMARK_MAIN();
