#pragma once
// keras.layers: every built-in layer, one include.
//
//   #include "strata/keras/layers/layers.h"
//   namespace layers = strata::keras::layers;
//   auto dense = layers::Dense(128, {.activation = "relu"});
//   auto conv = layers::Conv2D(32, {3, 3}, {.activation = "relu"});
//   auto pool = layers::MaxPooling2D({2, 2});
//   auto flat = layers::Flatten();
//   auto drop = layers::Dropout(0.2);
//   auto norm = layers::BatchNormalization();
//   auto soft = layers::Activation("softmax");
//
// Also: Conv1D, Conv2DTranspose, AveragePooling2D, {Max,Average}Pooling1D,
// Global{Max,Average}Pooling{1,2}D, Reshape, ZeroPadding2D, Cropping2D,
// UpSampling2D, Permute, RepeatVector, Rescaling, LayerNormalization,
// Embedding, ReLU, LeakyReLU, ELU, Softmax, PReLU, InputLayer (and
// keras::Input), the merge layers Add, Subtract, Multiply, Average, Maximum,
// Minimum, Concatenate. Each factory is named like
// the Python class and returns a std::shared_ptr to <Name>Layer (see
// strata/keras/layer.h for the Layer contract).

#include "strata/keras/layers/advanced_activations.h"
#include "strata/keras/layers/conv.h"
#include "strata/keras/layers/core.h"
#include "strata/keras/layers/dense.h"
#include "strata/keras/layers/embedding.h"
#include "strata/keras/layers/input_layer.h"
#include "strata/keras/layers/merging.h"
#include "strata/keras/layers/normalization.h"
#include "strata/keras/layers/pooling.h"
#include "strata/keras/layers/preprocessing.h"
#include "strata/keras/layers/reshaping.h"
#include "strata/keras/layers/serialization.h"
