#pragma once
// Distributed values (tf.distribute.DistributedValues): one component per
// local replica.
//
//   sd::PerReplica<Tensor> r = strategy.run(step_fn);        // results differ per replica
//   r.values();                 // std::vector<Tensor>, element i = local replica i
//   r.num_components();         // number of local replicas
//   sd::Mirrored<Tensor> m = ...;   // components known to be identical
//
// PerReplica holds values that may differ between replicas (inputs of a step,
// results of run); Mirrored holds values kept identical (the result of an
// update or a broadcast). As in TensorFlow, `run` never returns Mirrored.
// With one component a PerReplica reads as its value (TF returns the plain
// value from `run` with one replica).
// Both are immutable value types; thread-safe to read.

#include <cstddef>
#include <utility>
#include <vector>

#include "strata/base/errors.h"

namespace strata::distribute {

template <typename T>
class DistributedValues {
 public:
  explicit DistributedValues(std::vector<T> values) : values_(std::move(values)) {
    STRATA_CHECK_ARG(!values_.empty(), "DistributedValues: expected at least one component, got 0");
  }
  const std::vector<T>& values() const noexcept { return values_; }
  int num_components() const noexcept { return static_cast<int>(values_.size()); }
  // The component of local replica `i`.
  const T& component(int i) const {
    STRATA_CHECK_ARG(i >= 0 && i < num_components(),
                     "DistributedValues: expected a replica index in [0, ", num_components(),
                     "), got ", i);
    return values_[i];
  }

 private:
  std::vector<T> values_;
};

template <typename T>
class PerReplica : public DistributedValues<T> {
 public:
  using DistributedValues<T>::DistributedValues;
  // TF's regroup gives the plain value, not a PerReplica, when there is one
  // replica (default strategy, OneDeviceStrategy, a one-device mirrored
  // strategy): `Tensor loss = strategy.run(fn);` reads the same here through
  // this conversion. InvalidArgumentError with more than one component.
  operator const T&() const {  // NOLINT(google-explicit-constructor): TF's plain value
    STRATA_CHECK_ARG(this->num_components() == 1,
                     "PerReplica: expected one replica's value to read as a plain value, got ",
                     this->num_components(), " replicas (reduce it or take its local results)");
    return this->values().front();
  }
};

template <typename T>
class Mirrored : public DistributedValues<T> {
 public:
  using DistributedValues<T>::DistributedValues;
  // As PerReplica's: TF's regroup gives the plain value for one component
  // (extended.update of a plain variable, reduce_to one device).
  operator const T&() const {  // NOLINT(google-explicit-constructor): TF's plain value
    STRATA_CHECK_ARG(this->num_components() == 1,
                     "Mirrored: expected one component to read as a plain value, got ",
                     this->num_components(), " (take its local results)");
    return this->values().front();
  }
};

// How `run` specialises an argument for local replica i: distributed values
// give their i-th component, anything else is passed to every replica as-is.
template <typename T>
const T& select_replica(int, const T& value) {
  return value;
}
template <typename T>
const T& select_replica(int i, const PerReplica<T>& value) {
  return value.component(i);
}
template <typename T>
const T& select_replica(int i, const Mirrored<T>& value) {
  return value.component(i);
}
template <typename T>
const T& select_replica(int i, const DistributedValues<T>& value) {
  return value.component(i);
}

}  // namespace strata::distribute
