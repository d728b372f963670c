#include "strata/keras/summary.h"

#include <algorithm>
#include <string>
#include <vector>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/keras/functional.h"
#include "strata/keras/model.h"
#include "strata/keras/sequential.h"

namespace strata::keras {
namespace {

constexpr int kLineLength = 65;
const std::vector<int> kPositions = {29, 55, 65};
// A functional model with branches: Keras's 98 columns and "Connected to".
constexpr int kWideLineLength = 98;
const std::vector<int> kWidePositions = {29, 58, 68, 98};

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
// spaces before the next) and padded to the column's end. What does not fit
// continues on the next lines, as Keras's print_row; a field is broken after
// the end of a list element ("),", "],", "',") when one falls in the column.
void print_row(std::ostream& out, const std::vector<std::string>& fields,
               const std::vector<int>& positions = kPositions) {
  std::vector<std::string> left = fields;
  auto any_left = [&] {
    for (const std::string& f : left) {
      if (!f.empty()) return true;
    }
    return false;
  };
  do {
    std::string line = " ";
    int start = 0;
    for (size_t col = 0; col < left.size(); ++col) {
      const int end = positions[col];
      const int space = col + 1 < left.size() ? 2 : 0;
      size_t cutoff = size_t(std::max(0, end - start - space - (col == 0 ? 1 : 0)));
      const std::string fit = left[col].substr(0, cutoff);
      for (const char* mark : {"),", "},", "],", "',"}) {
        const size_t at = fit.find(mark);
        if (at != std::string::npos) cutoff = std::min(cutoff, at + 2);
      }
      line += left[col].substr(0, cutoff);
      left[col] = cutoff < left[col].size() ? left[col].substr(cutoff) : std::string();
      if (int(line.size()) < end) line += std::string(size_t(end - int(line.size())), ' ');
      start = end;
    }
    out << line << "\n";
  } while (any_left());
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
  const auto* functional = dynamic_cast<const FunctionalModel*>(&model);
  std::vector<std::string> shapes;
  if (sequential != nullptr) {
    for (const TensorShape& s : sequential->layer_output_shapes()) shapes.push_back(shape_repr(s));
  }
  std::vector<FunctionalModel::SummaryRow> rows;
  if (functional != nullptr) {
    rows = functional->summary_rows();
    for (const auto& row : rows) shapes.push_back(row.output_shape);
  }
  const bool wide = functional != nullptr && !functional->sequential_like();
  const int line_length = wide ? kWideLineLength : kLineLength;
  const std::vector<int>& positions = wide ? kWidePositions : kPositions;
  out << "Model: \"" << model.name() << "\"\n";
  out << std::string(size_t(line_length), '_') << "\n";
  if (wide) {
    print_row(out, {"Layer (type)", "Output Shape", "Param #", "Connected to"}, positions);
  } else {
    print_row(out, {"Layer (type)", "Output Shape", "Param #"});
  }
  out << std::string(size_t(line_length), '=') << "\n";
  const auto& layers = model.layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerPtr& layer = layers[i];
    std::vector<std::string> fields = {layer->name() + " (" + layer->class_name() + ")",
                                       i < shapes.size() ? shapes[i] : "multiple",
                                       with_commas(layer->count_params())};
    if (wide) {
      // Keras prints the connections as a Python list: ['dense[0][0]', ...].
      std::string connected = "[";
      for (size_t c = 0; c < rows[i].connected_to.size(); ++c)
        connected += str_cat(c > 0 ? ", '" : "'", rows[i].connected_to[c], "'");
      fields.push_back(str_cat(connected, "]"));
    }
    print_row(out, fields, positions);
    out << std::string(size_t(line_length), ' ') << "\n";
  }
  out << std::string(size_t(line_length), '=') << "\n";
  const int64_t trainable = count(model.trainable_weights());
  const int64_t non_trainable = count(model.non_trainable_weights());
  out << "Total params: " << with_commas(trainable + non_trainable) << "\n";
  out << "Trainable params: " << with_commas(trainable) << "\n";
  out << "Non-trainable params: " << with_commas(non_trainable) << "\n";
  out << std::string(size_t(line_length), '_') << "\n";
}

}  // namespace strata::keras
