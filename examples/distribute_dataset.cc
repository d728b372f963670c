// The seed page's experimental_distribute_dataset example: a TFRecordDataset
// over four files, batched by the global batch size and distributed; each
// step's per-replica batches go to strategy.run. element_spec gives the
// per-replica TensorSpec (what an input_signature would be).
//
//   build/examples/distribute_dataset
#include <filesystem>
#include <iostream>

#include "example_check.h"
#include "strata/strata.h"

namespace tf = strata;
namespace sd = strata::distribute;
using example::expect;

int main() {
  const auto dir = std::filesystem::temp_directory_path() / "strata_example_distribute_dataset";
  std::filesystem::create_directories(dir);
  std::vector<std::string> files;
  for (int f = 1; f <= 4; ++f) {
    files.push_back((dir / (std::to_string(f) + ".tfr")).string());
    tf::io::TFRecordWriter writer(files.back());
    for (int r = 0; r < 4; ++r)
      writer.write("record " + std::to_string(f) + "." + std::to_string(r));
  }

  sd::MirroredStrategy strategy;
  const int64_t global_batch_size = 4;
  auto dataset = tf::data::TFRecordDataset(files).batch(global_batch_size);
  sd::DistributedDataset dist_dataset = strategy.experimental_distribute_dataset(dataset);
  for (const tf::TensorSpec& spec : dist_dataset.element_spec())
    std::cout << "element_spec: " << spec << "\n";

  int64_t records = 0;
  int steps = 0;
  for (const sd::PerReplica<tf::data::Element>& x : dist_dataset) {
    auto sizes =
        strategy.run([](const tf::data::Element& batch) { return batch[0].shape().dim(0); }, x);
    for (int64_t n : strategy.experimental_local_results(sizes)) records += n;
    ++steps;
  }
  std::cout << steps << " steps, " << records << " records over " << strategy.num_replicas_in_sync()
            << " replicas\n";
  expect(records == 16, "every record is seen once");
  expect(steps == 4, "one step per global batch");
  std::filesystem::remove_all(dir);
  return example::exit_code();
}
