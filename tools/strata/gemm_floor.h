#pragma once
// The GEMM floor of a training step: the time the step's matrix products take
// when called directly through OpenBLAS's cblas_sgemm at a given thread count,
// with nothing else (no element-wise work, no allocation, no framework). A
// training benchmark divides its step rate by the floor's to say how close to
// the hardware it runs.
//
//   const auto gemms = strata::tools::step_gemms("mlp", 128);
//   const double floor_s = strata::tools::gemm_floor_seconds(gemms, /*threads=*/2);
//   const double floor_rate = 128 / floor_s;                  // examples/s
//
// The shapes are those of one step of `strata train`'s models (tools/strata/
// models.h): forward, the kernels' gradients, and the inputs' gradients of every
// layer but the first (the data needs none). Convolutions count as the GEMMs of
// their im2col form. Element-wise work, pooling and the optimizer are left out:
// the floor is a bound no implementation reaches.
//
// gemm_floor_seconds sets OpenBLAS's thread count for the measurement and puts
// it back to 1 (what the kernels use, see strata/kernels/internal/gemm.h);
// call it when no kernel runs.

#include <cstdint>
#include <string>
#include <vector>

namespace strata::tools {

// Row-major C[m, n] = op(A)[m, k] * op(B)[k, n].
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
};

// The GEMMs of one training step of model "mlp" or "cnn" over `batch`
// examples; InvalidArgumentError naming anything else.
std::vector<GemmShape> step_gemms(const std::string& model, int64_t batch);

// The median over `repetitions` timed rounds (after one warm-up round) of the
// summed wall time of one cblas_sgemm per shape, OpenBLAS running `threads`
// threads.
double gemm_floor_seconds(const std::vector<GemmShape>& gemms, int threads, int repetitions = 7);

}  // namespace strata::tools
