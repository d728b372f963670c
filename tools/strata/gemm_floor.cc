#include "tools/strata/gemm_floor.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "strata/base/denormal.h"
#include "strata/base/errors.h"

namespace strata::tools {

namespace {

// A dense layer over `rows` inputs: forward y = x W, dW = x^T dy and (unless it
// is the first layer) dx = dy W^T.
void dense(std::vector<GemmShape>& out, int64_t rows, int64_t in, int64_t units, bool first) {
  out.push_back({.m = rows, .n = units, .k = in});
  out.push_back({.m = in, .n = units, .k = rows, .transpose_a = true});
  if (!first) out.push_back({.m = rows, .n = in, .k = units, .transpose_b = true});
}

}  // namespace

std::vector<GemmShape> step_gemms(const std::string& model, int64_t batch) {
  STRATA_CHECK_ARG(batch >= 1, "step_gemms: expected batch >= 1, got ", batch);
  std::vector<GemmShape> g;
  if (model == "mlp") {  // 784-512-256-10
    dense(g, batch, 784, 512, /*first=*/true);
    dense(g, batch, 512, 256, false);
    dense(g, batch, 256, 10, false);
    return g;
  }
  if (model == "cnn") {
    // Conv 32 3x3 on 28x28x1 -> 26x26x32 (im2col rows: one per output pixel),
    // pool -> 13x13x32, Conv 64 3x3 -> 11x11x64, pool -> 5x5x64 = 1600,
    // Dense 128, Dense 10.
    dense(g, batch * 26 * 26, 3 * 3 * 1, 32, /*first=*/true);
    dense(g, batch * 11 * 11, 3 * 3 * 32, 64, false);
    dense(g, batch, 1600, 128, false);
    dense(g, batch, 128, 10, false);
    return g;
  }
  STRATA_CHECK_ARG(false, "step_gemms: expected model mlp or cnn, got '", model, "'");
  return g;
}

double gemm_floor_seconds(const std::vector<GemmShape>& gemms, int threads, int repetitions) {
  STRATA_CHECK_ARG(threads >= 1, "gemm_floor_seconds: expected threads >= 1, got ", threads);
  STRATA_CHECK_ARG(repetitions >= 1, "gemm_floor_seconds: expected repetitions >= 1, got ",
                   repetitions);
  const ScopedFlushDenormal flush;  // as the kernels run
  // Operands of every shape, filled with values of a trained network's size.
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-0.1f, 0.1f);
  struct Operands {
    std::vector<float> a, b, c;
  };
  std::vector<Operands> ops;
  ops.reserve(gemms.size());
  for (const GemmShape& s : gemms) {
    Operands o{std::vector<float>(static_cast<size_t>(s.m * s.k)),
               std::vector<float>(static_cast<size_t>(s.k * s.n)),
               std::vector<float>(static_cast<size_t>(s.m * s.n))};
    for (float& v : o.a) v = dist(rng);
    for (float& v : o.b) v = dist(rng);
    ops.push_back(std::move(o));
  }
  openblas_set_num_threads(threads);
  auto round = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < gemms.size(); ++i) {
      const GemmShape& s = gemms[i];
      const auto lda = static_cast<int>(s.transpose_a ? s.m : s.k);
      const auto ldb = static_cast<int>(s.transpose_b ? s.k : s.n);
      cblas_sgemm(CblasRowMajor, s.transpose_a ? CblasTrans : CblasNoTrans,
                  s.transpose_b ? CblasTrans : CblasNoTrans, static_cast<int>(s.m),
                  static_cast<int>(s.n), static_cast<int>(s.k), 1.f, ops[i].a.data(), lda,
                  ops[i].b.data(), ldb, 0.f, ops[i].c.data(), static_cast<int>(s.n));
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  round();  // OpenBLAS starts its threads, the operands reach the caches
  std::vector<double> times;
  times.reserve(static_cast<size_t>(repetitions));
  for (int i = 0; i < repetitions; ++i) times.push_back(round());
  openblas_set_num_threads(1);
  std::nth_element(times.begin(), times.begin() + static_cast<ptrdiff_t>(times.size() / 2),
                   times.end());
  return times[times.size() / 2];
}

}  // namespace strata::tools
