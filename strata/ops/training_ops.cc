#include "strata/ops/training_ops.h"

#include <functional>

#include "strata/base/errors.h"
#include "strata/base/str_cat.h"
#include "strata/kernels/training.h"

namespace strata {
namespace {

void check_like(const Variable& var, const Variable& slot, const char* role) {
  STRATA_CHECK_ARG(slot.defined(), "apply_adam(", var.name(), "): expected a variable as ", role,
                   ", got an empty handle");
  STRATA_CHECK_ARG(slot.shape() == var.shape() && slot.dtype() == var.dtype(), "apply_adam(",
                   var.name(), "): expected ", role, " '", slot.name(), "' of shape ", var.shape(),
                   " ", dtype_name(var.dtype()), ", got ", slot.shape(), " ",
                   dtype_name(slot.dtype()));
}

}  // namespace

void apply_adam(const Variable& var, const Variable& m, const Variable& v, const Variable* vhat,
                const Tensor& grad, const AdamCoefficients& coefficients) {
  STRATA_CHECK_ARG(var.defined(), "apply_adam: expected a variable, got an empty handle");
  STRATA_CHECK_ARG(var.dtype() == DType::float32 || var.dtype() == DType::float64, "apply_adam(",
                   var.name(), "): expected a float32 or float64 variable, got dtype ",
                   dtype_name(var.dtype()));
  STRATA_CHECK_ARG(grad.defined(), "apply_adam(", var.name(),
                   "): expected a gradient, got an empty tensor");
  STRATA_CHECK_ARG(grad.shape() == var.shape() && grad.dtype() == var.dtype(), "apply_adam(",
                   var.name(), "): expected a gradient of shape ", var.shape(), " ",
                   dtype_name(var.dtype()), ", got ", grad.shape(), " ", dtype_name(grad.dtype()));
  check_like(var, m, "m");
  check_like(var, v, "v");
  if (vhat != nullptr) check_like(var, *vhat, "vhat");
  const int64_t n = var.shape().num_elements();
  const void* g = grad.raw_data();
  // The nested updates pass their lambdas by std::ref: a std::function holds a
  // reference_wrapper inline, where a copy of a capturing lambda would take a
  // heap allocation per variable and step.
  void* w = nullptr;
  void* mp = nullptr;
  void* vp = nullptr;
  const auto update_vhat = [&](void* hp) {
    kernels::apply_adam(var.dtype(), n, w, mp, vp, hp, g, coefficients);
  };
  const auto update_v = [&](void* p) {
    vp = p;
    if (vhat == nullptr) {
      kernels::apply_adam(var.dtype(), n, w, mp, vp, nullptr, g, coefficients);
      return;
    }
    vhat->update_in_place(std::ref(update_vhat));
  };
  const auto update_m = [&](void* p) {
    mp = p;
    v.update_in_place(std::ref(update_v));
  };
  const auto update_var = [&](void* p) {
    w = p;
    m.update_in_place(std::ref(update_m));
  };
  var.update_in_place(std::ref(update_var));
}

}  // namespace strata
