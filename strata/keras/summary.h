#pragma once
// Model.summary(): the Keras 2 table of a model's layers.
//
//   model->summary();               // to std::cout
//   std::ostringstream s; keras::print_summary(*model, s);
//
// Output (line_length 65, column ends at 29/55/65, as Keras's sequential layout):
//   Model: "sequential"
//   _________________________________________________________________
//    Layer (type)                Output Shape              Param #
//   =================================================================
//    dense (Dense)               (None, 2)                 12
//   (a blank line after each layer row)
//   =================================================================
//   Total params: 12
//   Trainable params: 12
//   Non-trainable params: 0
//   _________________________________________________________________
// Numbers use Keras's thousands separators ("101,770"). A Sequential model
// shows each layer's output shape with the batch dimension as None; other
// models show "multiple" (their layers' shapes are not static), as Keras
// shows for layers it cannot place. An unbuilt model is InvalidArgumentError
// (Keras's ValueError "This model has not yet been built").
//
// Thread-safety: reads the model only.

#include <ostream>

namespace strata::keras {

class Model;

void print_summary(const Model& model, std::ostream& out);

}  // namespace strata::keras
