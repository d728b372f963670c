#include "strata/keras/datasets/fashion_mnist.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <numeric>

#include "strata/base/errors.h"

namespace strata::keras::datasets::fashion_mnist {
namespace {

bool installed() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz");
}

TEST(FashionMnistTest, LoadsKerasShapesDtypesAndLabels) {
  if (!installed() && std::getenv("STRATA_DATA_DIR") == nullptr)
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  auto [train, test] = load_data();
  auto [x_train, y_train] = train;
  auto [x_test, y_test] = test;
  EXPECT_EQ(x_train.shape(), TensorShape({60000, 28, 28}));
  EXPECT_EQ(y_train.shape(), TensorShape({60000}));
  EXPECT_EQ(x_test.shape(), TensorShape({10000, 28, 28}));
  EXPECT_EQ(y_test.shape(), TensorShape({10000}));
  EXPECT_EQ(x_train.dtype(), DType::uint8);
  EXPECT_EQ(y_test.dtype(), DType::uint8);
  // First labels and the first image's pixel sum, read independently with Python's gzip.
  const std::vector<uint8_t> ytr = y_train.to_vector<uint8_t>(), yte = y_test.to_vector<uint8_t>();
  EXPECT_EQ(std::vector<uint8_t>(ytr.begin(), ytr.begin() + 10),
            (std::vector<uint8_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));
  EXPECT_EQ(std::vector<uint8_t>(yte.begin(), yte.begin() + 10),
            (std::vector<uint8_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
  const uint8_t* first = x_train.data<uint8_t>();
  EXPECT_EQ(std::accumulate(first, first + 784, int64_t(0)), 76247);
  const uint8_t* first_test = x_test.data<uint8_t>();
  EXPECT_EQ(std::accumulate(first_test, first_test + 784, int64_t(0)), 33456);
}

TEST(FashionMnistTest, MissingFilesSayHowToInstall) {
  const std::string empty =
      (std::filesystem::temp_directory_path() / "strata_no_fashion_mnist").string();
  std::filesystem::create_directories(empty);
  const char* old = std::getenv("STRATA_DATA_DIR");
  const std::string saved = old ? old : "";
  ::setenv("STRATA_DATA_DIR", empty.c_str(), 1);
  try {
    load_data();
    ADD_FAILURE() << "expected NotFoundError";
  } catch (const NotFoundError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("sudo apt-get install dataset-fashion-mnist"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("STRATA_DATA_DIR"));
  }
  if (old) {
    ::setenv("STRATA_DATA_DIR", saved.c_str(), 1);
  } else {
    ::unsetenv("STRATA_DATA_DIR");
  }
  std::filesystem::remove_all(empty);
}

}  // namespace
}  // namespace strata::keras::datasets::fashion_mnist
