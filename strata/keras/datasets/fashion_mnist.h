#pragma once
// keras.datasets.fashion_mnist.load_data(): Zalando's Fashion-MNIST, 60,000
// training and 10,000 test 28x28 grayscale images of 10 clothing classes.
//
//   auto [train, test] = keras::datasets::fashion_mnist::load_data();
//   auto [x_train, y_train] = train;   // uint8 [60000, 28, 28], uint8 [60000]
//   x_train.shape();                   // [60000, 28, 28]
//
// Reads the gzipped IDX files {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz
// from $STRATA_DATA_DIR when set (the directory itself or its fashion-mnist/
// subdirectory), else from Debian's dataset-fashion-mnist package
// (/usr/share/datasets/fashion-mnist). Nothing is downloaded. A missing file is
// NotFoundError saying how to install it; a malformed one DataLossError
// (strata/io/idx.h); shapes that are not [N, 28, 28] / [N] with matching N are
// DataLossError naming the file.
//
// Thread-safety: a pure function of the files.

#include <string>
#include <utility>

#include "strata/core/tensor.h"

namespace strata::keras::datasets::fashion_mnist {

using XY = std::pair<Tensor, Tensor>;

// {x_train, y_train}, {x_test, y_test}, as Keras (uint8 images and labels).
std::pair<XY, XY> load_data();

// The directory load_data reads from (after applying STRATA_DATA_DIR).
std::string data_dir();

}  // namespace strata::keras::datasets::fashion_mnist
