#include "strata/keras/datasets/fashion_mnist.h"

#include <cstdlib>
#include <filesystem>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/io/idx.h"

namespace strata::keras::datasets::fashion_mnist {
namespace {

constexpr const char* kDebianDir = "/usr/share/datasets/fashion-mnist";
constexpr int kNumClasses = 10;

std::string dims_string(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s.push_back('x');
    s.append(std::to_string(dims[i]));
  }
  return s;
}

Tensor load(const std::string& dir, const std::string& file, int rank) {
  const std::string path = (std::filesystem::path(dir) / file).string();
  if (!std::filesystem::exists(path)) {
    throw NotFoundError(
        str_cat("fashion_mnist.load_data: ", path,
                " not found. Install the dataset with `sudo apt-get install dataset-fashion-mnist` "
                "or set STRATA_DATA_DIR to a directory holding ",
                file));
  }
  const io::IdxArray a = io::read_idx(path);
  const bool ok = int(a.dims.size()) == rank && (rank == 1 || (a.dims[1] == 28 && a.dims[2] == 28));
  STRATA_CHECK(DATA_LOSS, ok, "fashion_mnist.load_data: ", path, " has dimensions ",
               dims_string(a.dims), ", expected ", rank == 1 ? "N" : "Nx28x28");
  return strata::constant(a.data, TensorShape(a.dims));
}

// Fashion-MNIST has 10 classes. A label outside them would surface much later,
// as an index error in the loss of some training step (or not at all), far from
// the file that holds it; it is refused here, naming the file and the index.
void check_labels(const Tensor& labels, const std::string& path) {
  const std::vector<uint8_t> values = labels.to_vector<uint8_t>();
  for (size_t i = 0; i < values.size(); ++i) {
    STRATA_CHECK(DATA_LOSS, values[i] < kNumClasses, "fashion_mnist.load_data: ", path, ": label ",
                 int(values[i]), " at index ", i, ", expected a class in [0, ", kNumClasses, ")");
  }
}

XY load_split(const std::string& dir, const std::string& prefix) {
  Tensor x = load(dir, prefix + "-images-idx3-ubyte.gz", 3);
  const std::string labels_file = prefix + "-labels-idx1-ubyte.gz";
  Tensor y = load(dir, labels_file, 1);
  check_labels(y, (std::filesystem::path(dir) / labels_file).string());
  STRATA_CHECK(DATA_LOSS, x.shape()[0] == y.shape()[0], "fashion_mnist.load_data: ", dir, "/",
               prefix, " has ", x.shape()[0], " images but ", y.shape()[0], " labels");
  return {x, y};
}

}  // namespace

std::string data_dir() {
  if (const char* env = std::getenv("STRATA_DATA_DIR"); env != nullptr && *env != '\0') {
    const std::filesystem::path sub = std::filesystem::path(env) / "fashion-mnist";
    return std::filesystem::is_directory(sub) ? sub.string() : std::string(env);
  }
  return kDebianDir;
}

std::pair<XY, XY> load_data() {
  const std::string dir = data_dir();
  return {load_split(dir, "train"), load_split(dir, "t10k")};
}

}  // namespace strata::keras::datasets::fashion_mnist
