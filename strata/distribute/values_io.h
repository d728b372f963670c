#pragma once
// Printing distributed values as TensorFlow prints them (DistributedValues.__str__):
//
//   std::cout << per_replica;
//   // PerReplica:{
//   //   0: tf.Tensor(1.0, shape=(), dtype=float32),
//   //   1: tf.Tensor(2.0, shape=(), dtype=float32)
//   // }
//   std::cout << mirrored;     // Mirrored:{ ... } likewise
//
// One line per local replica, "  <index>: <component>", joined by ",\n".
// Components print with their own operator<< (a Tensor as tf.Tensor(...)).

#include <ostream>

#include "strata/distribute/values.h"

namespace strata::distribute {
namespace internal {

template <typename T>
std::ostream& print_distributed(std::ostream& os, const char* class_name,
                                const DistributedValues<T>& v) {
  os << class_name << ":{\n";
  for (int i = 0; i < v.num_components(); ++i) {
    if (i > 0) os << ",\n";
    os << "  " << i << ": " << v.component(i);
  }
  return os << "\n}";
}

}  // namespace internal

template <typename T>
std::ostream& operator<<(std::ostream& os, const PerReplica<T>& v) {
  return internal::print_distributed(os, "PerReplica", v);
}

template <typename T>
std::ostream& operator<<(std::ostream& os, const Mirrored<T>& v) {
  return internal::print_distributed(os, "Mirrored", v);
}

}  // namespace strata::distribute
