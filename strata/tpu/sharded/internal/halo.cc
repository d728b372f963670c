#include "strata/tpu/sharded/internal/halo.h"

#include <algorithm>

namespace strata::tpu::sharded::internal {

std::optional<WindowGeometry> window_geometry(int64_t in, int64_t k, int64_t stride,
                                              int64_t dilation, const std::string& padding) {
  if (stride < 1 || k < 1 || dilation < 1) return std::nullopt;
  WindowGeometry g;
  g.stride = stride;
  g.window = (k - 1) * dilation + 1;
  if (padding == "SAME") {
    g.out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>((g.out - 1) * stride + g.window - in, 0);
    g.pad_before = total / 2;
  } else if (padding == "VALID") {
    if (in < g.window) return std::nullopt;
    g.out = (in - g.window) / stride + 1;
  } else {
    return std::nullopt;
  }
  return g;
}

Interval input_window(const WindowGeometry& g, int64_t out_begin, int64_t out_end) {
  return {out_begin * g.stride - g.pad_before, (out_end - 1) * g.stride - g.pad_before + g.window};
}

Interval clamp(const Interval& w, int64_t size) {
  const Interval c{std::max<int64_t>(w.begin, 0), std::min(w.end, size)};
  return c.empty() ? Interval{c.begin, c.begin} : c;
}

Halo halo(const Interval& w, const Interval& tile, int64_t size) {
  const Interval in = clamp(w, size);
  return {std::max<int64_t>(tile.begin - in.begin, 0), std::max<int64_t>(in.end - tile.end, 0)};
}

}  // namespace strata::tpu::sharded::internal
