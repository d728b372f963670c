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

// One body, compiled for AVX-512, AVX2 and the baseline; the widest the CPU
// has is picked once, at first use. (GCC's target_clones would pick it in an
// ifunc resolver that runs during relocation, before a sanitizer runtime is
// initialised: TSan builds crashed at start-up.)
template <typename T>
using AdamFn = void (*)(int64_t n, T* w, T* m, T* v, T* vhat, const T* g, T b1, T b2, T alpha,
                        T eps);

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

#define STRATA_ADAM_VARIANT(name, attributes)                                                 \
  template <typename T>                                                                       \
  attributes void name(int64_t n, T* w, T* m, T* v, T* vhat, const T* g, T b1, T b2, T alpha, \
                       T eps) {                                                               \
    if (vhat != nullptr) {                                                                    \
      adam_span<T, true>(n, w, m, v, vhat, g, b1, b2, alpha, eps);                            \
    } else {                                                                                  \
      adam_span<T, false>(n, w, m, v, vhat, g, b1, b2, alpha, eps);                           \
    }                                                                                         \
  }
STRATA_ADAM_VARIANT(adam_avx512, __attribute__((target("avx512f"))))
STRATA_ADAM_VARIANT(adam_avx2, __attribute__((target("avx2"))))
STRATA_ADAM_VARIANT(adam_baseline, )
#undef STRATA_ADAM_VARIANT

template <typename T>
AdamFn<T> widest_adam() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return &adam_avx512<T>;
  if (__builtin_cpu_supports("avx2")) return &adam_avx2<T>;
  return &adam_baseline<T>;
}

template <typename T>
void adam(int64_t n, T* w, T* m, T* v, T* vhat, const T* g, T b1, T b2, T alpha, T eps) {
  static const AdamFn<T> widest = widest_adam<T>();
  widest(n, w, m, v, vhat, g, b1, b2, alpha, eps);
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
      adam<T>(end - begin, w + begin, mp + begin, vp + begin, h, g + begin, b1, b2, alpha, eps);
    });
  });
}

}  // namespace strata::kernels
