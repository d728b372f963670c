#pragma once
// The GEMM the kernels share (not part of the public API): OpenBLAS for
// float32/float64, a plain loop for the integer dtypes.

#include <cstdint>
#include <mutex>
#include <type_traits>

#include <cblas.h>

namespace strata::kernels::internal {

// OpenBLAS is told to use one thread once: Strata parallelises GEMM itself over
// the device's pool, so concurrent replicas on different logical devices do
// not oversubscribe the cores. Debian's pthread OpenBLAS with one thread is
// reentrant for concurrent calls.
inline void init_blas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

// Row-major C[m, n] = op(A)[m, k] * op(B)[k, n] + beta * C.
template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T* c, int64_t ldc, T beta = T(0)) {
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, 1.f, a, lda, b, ldb, beta, c, ldc);
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, 1.0, a, lda, b, ldb, beta, c, ldc);
  } else {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        T acc = beta == T(0) ? T(0) : static_cast<T>(beta * c[i * ldc + j]);
        for (int64_t p = 0; p < k; ++p) {
          const T av = ta ? a[p * lda + i] : a[i * lda + p];
          const T bv = tb ? b[j * ldb + p] : b[p * ldb + j];
          acc = static_cast<T>(acc + av * bv);
        }
        c[i * ldc + j] = acc;
      }
    }
  }
}

}  // namespace strata::kernels::internal
