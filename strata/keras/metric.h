#pragma once
// keras.metrics.Metric: the base of every metric.
//
//   auto acc = keras::metrics::SparseCategoricalAccuracy();   // std::shared_ptr<...Metric>
//   acc->update_state(labels, logits);
//   (*acc)(labels, logits);          // Keras's acc(labels, logits): update, then result()
//   acc->result().item<float>();     // fraction correct so far
//   acc->reset_state();
//
// State lives in variables made by add_weight() with synchronization ON_READ
// and aggregation SUM: under a strategy each replica accumulates into its own
// copy and result() read in cross-replica context sums the copies (the
// strategy plug-in point for metric aggregation; the metric never names a
// strategy). result() is computed from the (aggregated) state.
//
// Thread-safety: one update at a time per replica copy; reads are safe.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/core/variable.h"

namespace strata::keras::metrics {

class Metric {
 public:
  Metric(std::string name, DType dtype = DType::float32);
  virtual ~Metric() = default;
  Metric(const Metric&) = delete;
  Metric& operator=(const Metric&) = delete;

  const std::string& name() const noexcept { return name_; }
  DType dtype() const noexcept { return dtype_; }

  // The compiled-metric form: accumulate for one batch. sample_weight
  // (undefined = 1) broadcasts against the per-example values as Keras.
  // Metrics that take a single value (Mean, Sum) hide this with their own
  // update_state(values, sample_weight).
  void update_state(const Tensor& y_true, const Tensor& y_pred,
                    const Tensor& sample_weight = Tensor()) {
    update_state_impl(y_true, y_pred, sample_weight);
  }
  // The metric's value from the accumulated state (a scalar of dtype()).
  virtual Tensor result() const = 0;
  // Keras's Metric.__call__, `eval_accuracy(labels, predictions)`:
  // update_state with the arguments, then result(). A metric is held by
  // pointer, so the call reads `(*eval_accuracy)(labels, predictions)`.
  Tensor operator()(const Tensor& y_true, const Tensor& y_pred,
                    const Tensor& sample_weight = Tensor()) {
    update_state(y_true, y_pred, sample_weight);
    return result();
  }
  // Sets every state variable back to zero.
  virtual void reset_state();
  // The older Keras name of reset_state (TF 2.x guides still call it).
  void reset_states() { reset_state(); }
  // The state variables, in creation order.
  const std::vector<Variable>& variables() const noexcept { return variables_; }

 protected:
  virtual void update_state_impl(const Tensor& y_true, const Tensor& y_pred,
                                 const Tensor& sample_weight) = 0;
  // A zero-initialised state variable "<metric name>/<name>", ON_READ + SUM.
  Variable add_weight(const std::string& name, const TensorShape& shape = TensorShape{},
                      std::optional<DType> dtype = std::nullopt);

 private:
  std::string name_;
  DType dtype_;
  std::vector<Variable> variables_;
};

using MetricPtr = std::shared_ptr<Metric>;

}  // namespace strata::keras::metrics
