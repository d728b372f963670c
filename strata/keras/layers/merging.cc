#include "strata/keras/layers/merging.h"

#include <utility>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/keras/layers/internal/common.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/math_ops.h"

namespace strata::keras::layers {
namespace {

const char* class_of(MergeLayer::Op op) {
  switch (op) {
    case MergeLayer::Op::kAdd: return "Add";
    case MergeLayer::Op::kSubtract: return "Subtract";
    case MergeLayer::Op::kMultiply: return "Multiply";
    case MergeLayer::Op::kAverage: return "Average";
    case MergeLayer::Op::kMaximum: return "Maximum";
    case MergeLayer::Op::kMinimum: return "Minimum";
  }
  return "Merge";
}

const char* default_name_of(MergeLayer::Op op) {
  switch (op) {
    case MergeLayer::Op::kAdd: return "add";
    case MergeLayer::Op::kSubtract: return "subtract";
    case MergeLayer::Op::kMultiply: return "multiply";
    case MergeLayer::Op::kAverage: return "average";
    case MergeLayer::Op::kMaximum: return "maximum";
    case MergeLayer::Op::kMinimum: return "minimum";
  }
  return "merge";
}

void check_list(const Layer& layer, size_t n) {
  STRATA_CHECK_ARG(n >= 2, internal::describe(layer),
                   ": a merge layer should be called on a list of at least 2 inputs, got ", n);
}

[[noreturn]] void not_a_list(const Layer& layer) {
  STRATA_CHECK_ARG(false, internal::describe(layer),
                   ": a merge layer should be called on a list of inputs, got one tensor");
  throw InternalError("unreachable");
}

}  // namespace

// --- element-wise merges ----------------------------------------------------------

MergeLayer::MergeLayer(Op op, const LayerArgs& args)
    : Layer(class_of(op), default_name_of(op), args), op_(op) {}

TensorShape MergeLayer::compute_output_shape(const TensorShape&) const { not_a_list(*this); }
void MergeLayer::build_weights(const TensorShape&) { not_a_list(*this); }
Tensor MergeLayer::call(const Tensor&, bool) { not_a_list(*this); }

// Keras's _Merge._compute_elemwise_op_output_shape: equal ranks; per
// dimension, 1 broadcasts, unknown (-1) stays unknown, others must agree.
TensorShape MergeLayer::compute_output_shape_list(const std::vector<TensorShape>& shapes) const {
  check_list(*this, shapes.size());
  STRATA_CHECK_ARG(op_ != Op::kSubtract || shapes.size() == 2, internal::describe(*this),
                   ": Subtract takes exactly 2 inputs, got ", shapes.size());
  std::vector<int64_t> out = shapes[0].dims();
  for (size_t i = 1; i < shapes.size(); ++i) {
    STRATA_CHECK_ARG(shapes[i].rank() == shapes[0].rank(), internal::describe(*this),
                     ": inputs must have the same rank, got shapes ", shapes[0].to_string(),
                     " and ", shapes[i].to_string());
    for (int d = 0; d < shapes[i].rank(); ++d) {
      const int64_t a = out[size_t(d)], b = shapes[i].dim(d);
      if (a == 1) {
        out[size_t(d)] = b;
      } else if (b == 1) {
        // keeps a
      } else if (a == -1 || b == -1) {
        out[size_t(d)] = -1;
      } else {
        STRATA_CHECK_ARG(a == b, internal::describe(*this),
                         ": inputs must have compatible shapes, got ", shapes[0].to_string(),
                         " and ", shapes[i].to_string());
      }
    }
  }
  return TensorShape(out);
}

void MergeLayer::build_weights_list(const std::vector<TensorShape>& shapes) {
  (void)compute_output_shape_list(shapes);  // validates the shapes
}

Tensor MergeLayer::call_list(const std::vector<Tensor>& inputs, bool) {
  std::vector<TensorShape> shapes;
  shapes.reserve(inputs.size());
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  (void)compute_output_shape_list(shapes);
  Tensor out = inputs[0];
  for (size_t i = 1; i < inputs.size(); ++i) {
    switch (op_) {
      case Op::kAdd:
      case Op::kAverage: out = strata::add(out, inputs[i]); break;
      case Op::kSubtract: out = strata::subtract(out, inputs[i]); break;
      case Op::kMultiply: out = strata::multiply(out, inputs[i]); break;
      case Op::kMaximum: out = strata::maximum(out, inputs[i]); break;
      case Op::kMinimum: out = strata::minimum(out, inputs[i]); break;
    }
  }
  if (op_ == Op::kAverage) {
    out = strata::divide(out, strata::cast(strata::constant(double(inputs.size())), out.dtype()));
  }
  return out;
}

nlohmann::json MergeLayer::get_config() const { return base_config(); }

std::shared_ptr<MergeLayer> Add(const LayerArgs& args) {
  return std::make_shared<MergeLayer>(MergeLayer::Op::kAdd, args);
}
std::shared_ptr<MergeLayer> Subtract(const LayerArgs& args) {
  return std::make_shared<MergeLayer>(MergeLayer::Op::kSubtract, args);
}
std::shared_ptr<MergeLayer> Multiply(const LayerArgs& args) {
  return std::make_shared<MergeLayer>(MergeLayer::Op::kMultiply, args);
}
std::shared_ptr<MergeLayer> Average(const LayerArgs& args) {
  return std::make_shared<MergeLayer>(MergeLayer::Op::kAverage, args);
}
std::shared_ptr<MergeLayer> Maximum(const LayerArgs& args) {
  return std::make_shared<MergeLayer>(MergeLayer::Op::kMaximum, args);
}
std::shared_ptr<MergeLayer> Minimum(const LayerArgs& args) {
  return std::make_shared<MergeLayer>(MergeLayer::Op::kMinimum, args);
}

// --- Concatenate ------------------------------------------------------------------

ConcatenateLayer::ConcatenateLayer(const ConcatenateOptions& options)
    : Layer("Concatenate", "concatenate", internal::layer_args(options)), axis_(options.axis) {}

std::shared_ptr<ConcatenateLayer> Concatenate(const ConcatenateOptions& options) {
  return std::make_shared<ConcatenateLayer>(options);
}

TensorShape ConcatenateLayer::compute_output_shape(const TensorShape&) const { not_a_list(*this); }
void ConcatenateLayer::build_weights(const TensorShape&) { not_a_list(*this); }
Tensor ConcatenateLayer::call(const Tensor&, bool) { not_a_list(*this); }

TensorShape ConcatenateLayer::compute_output_shape_list(
    const std::vector<TensorShape>& shapes) const {
  check_list(*this, shapes.size());
  const int rank = shapes[0].rank();
  STRATA_CHECK_ARG(axis_ >= -rank && axis_ < rank, internal::describe(*this), ": axis ", axis_,
                   " is out of range for inputs of rank ", rank);
  const int axis = axis_ < 0 ? axis_ + rank : axis_;
  std::vector<int64_t> out = shapes[0].dims();
  for (size_t i = 1; i < shapes.size(); ++i) {
    STRATA_CHECK_ARG(shapes[i].rank() == rank, internal::describe(*this),
                     ": inputs must have the same rank, got shapes ", shapes[0].to_string(),
                     " and ", shapes[i].to_string());
    for (int d = 0; d < rank; ++d) {
      const int64_t a = out[size_t(d)], b = shapes[i].dim(d);
      if (d == axis) {
        out[size_t(d)] = (a < 0 || b < 0) ? -1 : a + b;
      } else if (a < 0) {
        out[size_t(d)] = b;
      } else {
        STRATA_CHECK_ARG(b < 0 || a == b, internal::describe(*this),
                         ": inputs must match in every dimension but the concatenation axis ",
                         axis_, ", got shapes ", shapes[0].to_string(), " and ",
                         shapes[i].to_string());
      }
    }
  }
  return TensorShape(out);
}

void ConcatenateLayer::build_weights_list(const std::vector<TensorShape>& shapes) {
  (void)compute_output_shape_list(shapes);
}

Tensor ConcatenateLayer::call_list(const std::vector<Tensor>& inputs, bool) {
  std::vector<TensorShape> shapes;
  shapes.reserve(inputs.size());
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  (void)compute_output_shape_list(shapes);
  return strata::concat(inputs, axis_ < 0 ? axis_ + inputs[0].rank() : axis_);
}

nlohmann::json ConcatenateLayer::get_config() const {
  nlohmann::json config = base_config();
  config["axis"] = axis_;
  return config;
}

}  // namespace strata::keras::layers
