#include "strata/keras/regularizers.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "strata/base/errors.h"
#include "strata/ops/math_ops.h"

namespace strata::keras::regularizers {
namespace {

// Keras keeps the factors as float32 (backend.cast_to_floatx).
double floatx(double v, const char* who, const char* field) {
  STRATA_CHECK_ARG(std::isfinite(v) && v >= 0.0, who, ": ", field,
                   " must be a finite value >= 0, got ", v);
  return double(float(v));
}

class L1L2Regularizer : public Regularizer {
 public:
  L1L2Regularizer(std::string cls, double l1, double l2)
      : class_name_(std::move(cls)), l1_(l1), l2_(l2) {}

  Tensor operator()(const Tensor& x) const override {
    STRATA_CHECK_ARG(x.defined(), class_name_, " regularizer: got an undefined tensor");
    Tensor penalty;
    if (l1_ != 0.0 || class_name_ == "L1") {
      penalty = strata::multiply(strata::cast(strata::constant(l1_), x.dtype()),
                                 strata::reduce_sum(strata::abs(x)));
    }
    if (l2_ != 0.0 || class_name_ == "L2") {
      Tensor p = strata::multiply(strata::cast(strata::constant(l2_), x.dtype()),
                                  strata::reduce_sum(strata::square(x)));
      penalty = penalty.defined() ? strata::add(penalty, p) : p;
    }
    // L1L2 with both factors zero: Keras's regularization = 0.
    if (!penalty.defined()) penalty = strata::cast(strata::constant(0.0), x.dtype());
    return penalty;
  }
  std::string class_name() const override { return class_name_; }
  nlohmann::json get_config() const override {
    if (class_name_ == "L1") return {{"l1", l1_}};
    if (class_name_ == "L2") return {{"l2", l2_}};
    return {{"l1", l1_}, {"l2", l2_}};
  }

 private:
  std::string class_name_;
  double l1_, l2_;
};

}  // namespace

RegularizerPtr L1(double l1) {
  return std::make_shared<L1L2Regularizer>("L1", floatx(l1, "L1", "l1"), 0.0);
}

RegularizerPtr L2(double l2) {
  return std::make_shared<L1L2Regularizer>("L2", 0.0, floatx(l2, "L2", "l2"));
}

RegularizerPtr L1L2(const L1L2Options& options) {
  return std::make_shared<L1L2Regularizer>("L1L2", floatx(options.l1, "L1L2", "l1"),
                                           floatx(options.l2, "L1L2", "l2"));
}

nlohmann::json serialize(const Regularizer& regularizer) {
  return {{"class_name", regularizer.class_name()}, {"config", regularizer.get_config()}};
}

RegularizerPtr deserialize(const nlohmann::json& config) {
  STRATA_CHECK_ARG(
      config.is_object() && config.contains("class_name") && config["class_name"].is_string(),
      "regularizers.deserialize: expected {\"class_name\": ..., \"config\": ...}, got ",
      config.dump());
  const std::string cls = config["class_name"].get<std::string>();
  const nlohmann::json c = config.value("config", nlohmann::json::object());
  if (cls == "L1" || cls == "l1") return L1(c.value("l1", 0.01));
  if (cls == "L2" || cls == "l2") return L2(c.value("l2", 0.01));
  if (cls == "L1L2" || cls == "l1_l2")
    return L1L2({.l1 = c.value("l1", 0.0), .l2 = c.value("l2", 0.0)});
  STRATA_CHECK(UNIMPLEMENTED, false, "regularizers.deserialize: unknown regularizer \"", cls, "\"");
  return nullptr;
}

}  // namespace strata::keras::regularizers
