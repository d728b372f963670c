#include "strata/keras/summary.h"

#include <string>
#include <vector>

#include "strata/base/errors.h"
#include "strata/keras/model.h"
#include "strata/keras/sequential.h"

namespace strata::keras {
namespace {

constexpr int kLineLength = 65;
constexpr int kPositions[] = {29, 55, 65};

// Keras prints counts with "{:,}".
std::string with_commas(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

// One row: a leading space, then each field cut to its column (leaving two
// spaces before the next) and padded to the column's end.
void print_row(std::ostream& out, const std::vector<std::string>& fields) {
  std::string line = " ";
  int start = 0;
  for (size_t col = 0; col < fields.size(); ++col) {
    const int end = kPositions[col];
    const int space = col + 1 < fields.size() ? 2 : 0;
    const int room = end - start - space - (col == 0 ? 1 : 0);
    line += fields[col].substr(0, size_t(std::max(0, room)));
    if (int(line.size()) < end) line += std::string(size_t(end - int(line.size())), ' ');
    start = end;
  }
  out << line << "\n";
}

std::string shape_string(const TensorShape& s) {
  std::string out = "(";
  for (int i = 0; i < s.rank(); ++i) {
    if (i > 0) out += ", ";
    out += s.dim(i) < 0 ? "None" : std::to_string(s.dim(i));
  }
  if (s.rank() == 1) out += ",";
  return out + ")";
}

int64_t count(const std::vector<Variable>& vars) {
  int64_t n = 0;
  for (const Variable& v : vars) n += v.shape().num_elements();
  return n;
}

}  // namespace

void print_summary(const Model& model, std::ostream& out) {
  STRATA_CHECK_ARG(
      model.built(), "This model (", model.name(),
      ") has not yet been built. Build the model first by calling build() or by calling the model "
      "on a batch of data (or give the first layer an input_shape).");
  const auto* sequential = dynamic_cast<const SequentialModel*>(&model);
  std::vector<std::string> shapes;
  if (sequential != nullptr) {
    for (const TensorShape& s : sequential->layer_output_shapes())
      shapes.push_back(shape_string(s));
  }
  out << "Model: \"" << model.name() << "\"\n";
  out << std::string(kLineLength, '_') << "\n";
  print_row(out, {"Layer (type)", "Output Shape", "Param #"});
  out << std::string(kLineLength, '=') << "\n";
  const auto& layers = model.layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerPtr& layer = layers[i];
    print_row(out,
              {layer->name() + " (" + layer->class_name() + ")",
               i < shapes.size() ? shapes[i] : "multiple", with_commas(layer->count_params())});
    out << std::string(kLineLength, ' ') << "\n";
  }
  out << std::string(kLineLength, '=') << "\n";
  const int64_t trainable = count(model.trainable_weights());
  const int64_t non_trainable = count(model.non_trainable_weights());
  out << "Total params: " << with_commas(trainable + non_trainable) << "\n";
  out << "Trainable params: " << with_commas(trainable) << "\n";
  out << "Non-trainable params: " << with_commas(non_trainable) << "\n";
  out << std::string(kLineLength, '_') << "\n";
}

}  // namespace strata::keras
