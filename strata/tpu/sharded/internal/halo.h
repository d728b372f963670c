#pragma once
// The geometry of the halo exchange, as plain arithmetic on one spatial
// dimension (rows or columns) of a windowed op (conv2d, pooling) whose
// input is split into equal tiles: which input positions an output tile
// reads, and which of them lie in the padding, in its own tile or in the
// neighbours' (the halo). The sharded rules (sharded_ops.cc) apply it to
// both dimensions; nothing here touches tensors or devices.
//
//   // 16 rows in 2 tiles, 3x3 SAME convolution, stride 1:
//   WindowGeometry g = *window_geometry(16, 3, 1, 1, "SAME");  // out 16, pad_before 1
//   Interval w = input_window(g, 8, 16);         // [7, 17): 1 halo row above, 1 padding row below
//   Interval in_image = clamp(w, 16);            // [7, 16)
//   Halo h = halo(w, {8, 16}, 16);               // {.before = 1, .after = 0}
//
// Thread-safety: pure functions.

#include <cstdint>
#include <optional>
#include <string>

namespace strata::tpu::sharded::internal {

// One dimension of a windowed op, as TF computes it for SAME and VALID.
struct WindowGeometry {
  int64_t out = 0;         // output size
  int64_t pad_before = 0;  // leading padding (SAME: half the total, rounded down)
  int64_t stride = 1;
  int64_t window = 1;  // effective window: (k - 1) * dilation + 1
};

// The geometry of an input of size `in` under a window of `k` taps with
// `stride` and `dilation` and `padding` "SAME" or "VALID"; nullopt when no
// such op exists (a stride, k or dilation below 1, another padding, a VALID
// window larger than the input).
std::optional<WindowGeometry> window_geometry(int64_t in, int64_t k, int64_t stride,
                                              int64_t dilation, const std::string& padding);

// A half-open range [begin, end) of positions.
struct Interval {
  int64_t begin = 0, end = 0;
  int64_t size() const noexcept { return end - begin; }
  bool empty() const noexcept { return end <= begin; }
  friend bool operator==(const Interval&, const Interval&) = default;
};

// The input positions output positions [out_begin, out_end) read, in input
// coordinates: before 0 and from the input size on it lies in the padding.
// Requires out_begin < out_end.
Interval input_window(const WindowGeometry& g, int64_t out_begin, int64_t out_end);

// `w` clipped to the image [0, size) (empty when it lies in the padding only).
Interval clamp(const Interval& w, int64_t size);

// How many positions of `w` inside the image come from the neighbours'
// tiles before and after `tile` (the halo to receive).
struct Halo {
  int64_t before = 0, after = 0;
  friend bool operator==(const Halo&, const Halo&) = default;
};
Halo halo(const Interval& w, const Interval& tile, int64_t size);

}  // namespace strata::tpu::sharded::internal
