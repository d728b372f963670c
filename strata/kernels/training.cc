#include "strata/kernels/training.h"

#include <algorithm>
#include <cmath>

#include "strata/kernels/internal/kernel_util.h"

// This file is built with -fno-math-errno (sqrt of a negative value is only
// NaN here, never an errno write, so the loops vectorise) and
// -ffp-contract=off (no fused multiply-add in the wider clones: every clone
// rounds like Keras's formula evaluated op by op). See CMakeLists.txt.

namespace strata::kernels {
namespace {

#define STRATA_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

template <typename T, bool kAmsgrad>
__attribute__((always_inline)) inline void adam_span(int64_t n, T* __restrict w, T* __restrict m,
                                                     T* __restrict v, T* __restrict vhat,
                                                     const T* __restrict g, T b1, T b2, T alpha,
                                                     T eps) {
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i];
    const T mi = m[i] + (gi - m[i]) * b1;
    const T vi = v[i] + (gi * gi - v[i]) * b2;
    m[i] = mi;
    v[i] = vi;
    T denom_base = vi;
    if constexpr (kAmsgrad) {
      denom_base = std::max(vhat[i], vi);
      vhat[i] = denom_base;
    }
    w[i] = w[i] - mi * alpha / (std::sqrt(denom_base) + eps);
  }
}

STRATA_SIMD_CLONES void adam_f32(int64_t n, float* w, float* m, float* v, float* vhat,
                                 const float* g, float b1, float b2, float alpha, float eps) {
  if (vhat != nullptr) {
    adam_span<float, true>(n, w, m, v, vhat, g, b1, b2, alpha, eps);
  } else {
    adam_span<float, false>(n, w, m, v, vhat, g, b1, b2, alpha, eps);
  }
}

STRATA_SIMD_CLONES void adam_f64(int64_t n, double* w, double* m, double* v, double* vhat,
                                 const double* g, double b1, double b2, double alpha, double eps) {
  if (vhat != nullptr) {
    adam_span<double, true>(n, w, m, v, vhat, g, b1, b2, alpha, eps);
  } else {
    adam_span<double, false>(n, w, m, v, vhat, g, b1, b2, alpha, eps);
  }
}

}  // namespace

void apply_adam(DType dtype, int64_t n, void* var, void* m, void* v, void* vhat, const void* grad,
                const AdamCoefficients& c) {
  internal::dispatch_floating(dtype, "apply_adam", [&](auto tag) {
    using T = decltype(tag);
    T* w = static_cast<T*>(var);
    T* mp = static_cast<T*>(m);
    T* vp = static_cast<T*>(v);
    T* hp = static_cast<T*>(vhat);
    const T* g = static_cast<const T*>(grad);
    const T b1 = static_cast<T>(c.one_minus_beta_1), b2 = static_cast<T>(c.one_minus_beta_2);
    const T alpha = static_cast<T>(c.alpha), eps = static_cast<T>(c.epsilon);
    internal::parallel_for(n, internal::kElementwiseGrain, [&](int64_t begin, int64_t end) {
      T* h = hp ? hp + begin : nullptr;
      if constexpr (std::is_same_v<T, float>) {
        adam_f32(end - begin, w + begin, mp + begin, vp + begin, h, g + begin, b1, b2, alpha, eps);
      } else {
        adam_f64(end - begin, w + begin, mp + begin, vp + begin, h, g + begin, b1, b2, alpha, eps);
      }
    });
  });
}

}  // namespace strata::kernels
