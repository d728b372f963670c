#include "strata/tpu/sharded/sharded_ops.h"

#include <algorithm>
#include <array>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <unordered_set>
#include <utility>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/base/thread_pool.h"
#include "strata/kernels/nn.h"
#include "strata/ops/array_ops.h"
#include "strata/ops/recorder.h"
#include "strata/tpu/sharded/internal/halo.h"
#include "strata/tpu/sharded/internal/sharded_exec.h"

namespace strata::tpu::sharded {

using internal::any_split;
using internal::broadcast_tile;
using internal::broadcasts_into;
using internal::count_fallback;
using internal::fallback;
using internal::holders;
using internal::input_window;
using internal::Interval;
using internal::parts;
using internal::run_shards;
using internal::window_geometry;
using internal::WindowGeometry;

namespace {

// --- fallback counters ---------------------------------------------------------

// How often each op fell back to one device (fallback_count), process-wide.
struct FallbackCounters {
  Mutex mu;
  std::map<std::string, int64_t> counts STRATA_GUARDED_BY(mu);
};
FallbackCounters& fallback_counters() {
  static FallbackCounters c;
  return c;
}

// --- parallel shard execution ----------------------------------------------------

// Collects the ops one shard records, for replay into the calling thread's
// recorders (the tapes) once every shard has run. While shards run, nobody
// writes the tapes (the caller is paused and every shard buffers), so their
// is_tracking may be read concurrently; replaying shard by shard, in
// logical-device order, keeps the recording topological (data crosses threads
// only between parallel regions) and the gradient summation order fixed.
class ShardRecorder final : public OpRecorder {
 public:
  explicit ShardRecorder(const std::vector<OpRecorder*>& targets) : targets_(&targets) {}
  bool is_tracking(const Tensor& t) const override {
    return produced_.contains(t.id()) ||
           std::any_of(targets_->begin(), targets_->end(),
                       [&](const OpRecorder* r) { return r->is_tracking(t); });
  }
  void record(OpKind kind, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
              const OpAttrs& attrs) override {
    records_.push_back(
        {kind, {inputs.begin(), inputs.end()}, {outputs.begin(), outputs.end()}, attrs});
    for (const Tensor& t : outputs) produced_.insert(t.id());
  }
  // Hands every buffered op to each target tracking one of its inputs, as
  // record_op does.
  void replay() const {
    for (const Record& rec : records_) {
      for (OpRecorder* r : *targets_) {
        const bool tracked =
            std::any_of(rec.inputs.begin(), rec.inputs.end(),
                        [&](const Tensor& t) { return t.defined() && r->is_tracking(t); });
        if (tracked) r->record(rec.kind, rec.inputs, rec.outputs, rec.attrs);
      }
    }
  }

 private:
  struct Record {
    OpKind kind;
    std::vector<Tensor> inputs, outputs;
    OpAttrs attrs;
  };
  const std::vector<OpRecorder*>* targets_;
  std::vector<Record> records_;
  std::unordered_set<uint64_t> produced_;
};

}  // namespace

namespace internal {

void count_fallback(const std::string& op) {
  FallbackCounters& c = fallback_counters();
  MutexLock lock(c.mu);
  ++c.counts[op];
}

// Runs fn(d) for every logical device d in `which`, each under a DeviceScope of
// devices[d] and as a task of that device's pool (the caller runs the first).
// result[d] for the others stays undefined. Rethrows the first error after
// every shard has run.
std::vector<Tensor> run_shards(const std::vector<const Device*>& devices,
                               const std::vector<int>& which,
                               const std::function<Tensor(int)>& fn) {
  std::vector<Tensor> out(devices.size());
  if (which.size() == 1) {
    DeviceScope scope(*devices[static_cast<size_t>(which[0])]);
    out[static_cast<size_t>(which[0])] = fn(which[0]);
    return out;
  }
  std::span<OpRecorder* const> active = active_recorders();
  const std::vector<OpRecorder*> targets(active.begin(), active.end());
  std::vector<ShardRecorder> recorders(which.size(), ShardRecorder(targets));
  std::vector<std::exception_ptr> errors(which.size());
  auto body = [&](size_t i) {
    try {
      const int d = which[i];
      DeviceScope scope(*devices[static_cast<size_t>(d)]);
      std::optional<RecorderScope> recording;
      if (!targets.empty()) recording.emplace(recorders[i]);
      out[static_cast<size_t>(d)] = fn(d);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  {
    // The caller's own shard buffers too: nothing writes the tapes until every
    // shard has run. A shard that no worker of its device has started when the
    // caller waits for it runs on the caller (inside this pause as well).
    RecordingPause pause;
    std::vector<TaskHandle> shards;
    shards.reserve(which.size() - 1);
    for (size_t i = 1; i < which.size(); ++i) {
      const Device& device = *devices[static_cast<size_t>(which[i])];
      shards.push_back(device.thread_pool().submit([&body, i] { body(i); }));
    }
    body(0);
    // Each shard is a bounded computation (it waits on no other shard); body
    // catches its errors, so wait() does not throw.
    for (TaskHandle& shard : shards) shard.wait();
  }
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  for (const ShardRecorder& r : recorders) r.replay();
  return out;
}

std::vector<int> holders(const tpu::Sharding& s) {
  std::vector<int> which;
  for (int d = 0; d < s.num_logical_devices(); ++d) {
    if (s.holds_shard(d)) which.push_back(d);
  }
  return which;
}

// The partition count of dimension i (1 unless tiled).
int64_t parts(const tpu::Sharding& s, int i) {
  return s.is_tiled() ? s.partition_dimensions()[static_cast<size_t>(i)] : 1;
}

bool any_split(const tpu::Sharding& s) {
  if (!s.is_tiled()) return false;
  return std::any_of(s.partition_dimensions().begin(), s.partition_dimensions().end(),
                     [](int64_t p) { return p > 1; });
}

// The fallback: gather every input to logical device 0 of the first, run
// `op` there once, re-shard to `like`'s sharding when the result's shape
// suits it, else replicate.
ShardedTensor fallback(const std::string& name, const std::vector<ShardedTensor>& inputs,
                       const std::function<Tensor(const std::vector<Tensor>&)>& op) {
  count_fallback(name);
  const ShardedTensor& first = inputs.front();
  const Device* device = first.devices().front();
  std::vector<Tensor> full;
  full.reserve(inputs.size());
  for (const ShardedTensor& x : inputs) full.push_back(unshard(x, device));
  Tensor out;
  {
    DeviceScope scope(*device);
    out = op(full);
  }
  tpu::Sharding target = first.sharding();
  try {
    target.check_shape(out.shape());
  } catch (const InvalidArgumentError&) {
    target = tpu::Sharding::replicated(first.num_logical_devices());
  }
  return shard(out, target, first.devices());
}

}  // namespace internal

namespace {

ShardedTensor make(const tpu::Sharding& sharding, const TensorShape& shape,
                   std::vector<Tensor> shards, const std::vector<const Device*>& devices) {
  return ShardedTensor(sharding, shape, std::move(shards), devices);
}

std::vector<int64_t> hw(const std::vector<int64_t>& v, const char* what) {
  if (v.size() == 2) return v;
  STRATA_CHECK_ARG(v.size() == 4, "sharded: expected ", what, " of length 2 or 4, got length ",
                   v.size());
  return {v[1], v[2]};
}

// Device d's input window for rows [r0, r1) x columns [c0, c1) of the full
// input (may reach into the padding): its own tile plus the halo slices of its
// neighbours' tiles, padded with `pad_value` outside the image. Runs as d's
// shard. `valid` (if non-null) receives the window's in-image extent.
Tensor recorded_window(const ShardedTensor& x, int d, int64_t r0, int64_t r1, int64_t c0,
                       int64_t c1, double pad_value, std::pair<int64_t, int64_t>* valid) {
  const tpu::Sharding& s = x.sharding();
  const int64_t H = x.shape()[1], W = x.shape()[2];
  const int64_t th = H / parts(s, 1), tw = W / parts(s, 2);
  const std::vector<int64_t> index =
      s.is_tiled() ? s.tile_index(d) : std::vector<int64_t>{0, 0, 0, 0};
  const int64_t lo_r = std::max<int64_t>(r0, 0), hi_r = std::min(r1, H);
  const int64_t lo_c = std::max<int64_t>(c0, 0), hi_c = std::min(c1, W);
  STRATA_CHECK_ARG(lo_r < hi_r && lo_c < hi_c,
                   "sharded: an output window lies entirely in the padding");
  std::vector<Tensor> rows;
  for (int64_t i = lo_r / th; i <= (hi_r - 1) / th; ++i) {
    std::vector<Tensor> cols;
    for (int64_t j = lo_c / tw; j <= (hi_c - 1) / tw; ++j) {
      const std::vector<int64_t> at = {index[0], i, j, 0};
      const Tensor& src = s.is_tiled() ? x.shard(s.logical_device_at_tile(at)) : x.shard(d);
      const int64_t a = std::max(lo_r, i * th) - i * th, b = std::min(hi_r, (i + 1) * th) - i * th;
      const int64_t e = std::max(lo_c, j * tw) - j * tw, f = std::min(hi_c, (j + 1) * tw) - j * tw;
      if (a == 0 && b == th && e == 0 && f == tw) {
        cols.push_back(src);
      } else {
        cols.push_back(slice(src, {0, a, e, 0}, {-1, b - a, f - e, -1}));
      }
    }
    rows.push_back(cols.size() == 1 ? cols[0] : concat(cols, 2));
  }
  Tensor patch = rows.size() == 1 ? rows[0] : concat(rows, 1);
  if (valid) *valid = {hi_r - lo_r, hi_c - lo_c};
  if (lo_r == r0 && hi_r == r1 && lo_c == c0 && hi_c == c1) return patch;
  return pad(patch, {{0, 0}, {lo_r - r0, r1 - hi_r}, {lo_c - c0, c1 - hi_c}, {0, 0}}, pad_value);
}

// The same window assembled by one copy: every output row is the padding
// value or runs of the tiles' rows (the halo rows only are read from the
// neighbours' shards). No ops are recorded, so only without an active tape.
template <typename T>
Tensor copied_window(const ShardedTensor& x, int d, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                     double pad_value) {
  const tpu::Sharding& s = x.sharding();
  const int64_t H = x.shape()[1], W = x.shape()[2], C = x.shape()[3];
  const int64_t th = H / parts(s, 1), tw = W / parts(s, 2);
  const int64_t nb = x.shape()[0] / parts(s, 0);
  const std::vector<int64_t> index =
      s.is_tiled() ? s.tile_index(d) : std::vector<int64_t>{0, 0, 0, 0};
  const int64_t rows = r1 - r0, cols = c1 - c0;
  Tensor out = Tensor::allocate(x.dtype(), TensorShape({nb, rows, cols, C}),
                                x.devices()[static_cast<size_t>(d)]);
  T* o = out.mutable_data<T>();
  const T pad = static_cast<T>(pad_value);
  const int64_t lo_c = std::max<int64_t>(c0, 0), hi_c = std::min(c1, W);
  // Source tiles of one tile row i, by tile column.
  std::vector<const T*> src(static_cast<size_t>(parts(s, 2)));
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t r = r0; r < r1; ++r) {
      T* row = o + ((b * rows) + (r - r0)) * cols * C;
      if (r < 0 || r >= H) {
        std::fill(row, row + cols * C, pad);
        continue;
      }
      const int64_t i = r / th;
      std::fill(row, row + (lo_c - c0) * C, pad);
      for (int64_t j = lo_c / tw; j <= (hi_c - 1) / tw; ++j) {
        const std::vector<int64_t> at = {index[0], i, j, 0};
        const Tensor& tile = s.is_tiled() ? x.shard(s.logical_device_at_tile(at)) : x.shard(d);
        const int64_t a = std::max(lo_c, j * tw), e = std::min(hi_c, (j + 1) * tw);
        const T* from = tile.data<T>() + ((b * th + (r - i * th)) * tw + (a - j * tw)) * C;
        std::copy(from, from + (e - a) * C, row + (a - c0) * C);
      }
      std::fill(row + (hi_c - c0) * C, row + cols * C, pad);
    }
  }
  return out;
}

Tensor window(const ShardedTensor& x, int d, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
              double pad_value, std::pair<int64_t, int64_t>* valid = nullptr) {
  // With a tape, recorded ops (gradients flow); else one copy, no temporaries.
  const bool fast = valid == nullptr && !any_recorder_active() &&
                    (x.dtype() == DType::float32 || x.dtype() == DType::float64);
  if (!fast) return recorded_window(x, d, r0, r1, c0, c1, pad_value, valid);
  STRATA_CHECK_ARG(std::max<int64_t>(r0, 0) < std::min(r1, x.shape()[1]) &&
                       std::max<int64_t>(c0, 0) < std::min(c1, x.shape()[2]),
                   "sharded: an output window lies entirely in the padding");
  return x.dtype() == DType::float32 ? copied_window<float>(x, d, r0, r1, c0, c1, pad_value)
                                     : copied_window<double>(x, d, r0, r1, c0, c1, pad_value);
}

// Device e's tile of the input gradient: the sum of the parts of every
// window gradient d_patch[d] that overlap e's tile (own window and the
// neighbours' halo rows), in one buffer.
template <typename T>
Tensor gather_tile_gradient(const ShardedTensor& x, int e, const std::vector<int>& which,
                            const std::vector<Tensor>& d_patch,
                            const std::function<std::array<int64_t, 4>(int)>& window_of) {
  const tpu::Sharding& s = x.sharding();
  const int64_t H = x.shape()[1], W = x.shape()[2], C = x.shape()[3];
  const int64_t th = H / parts(s, 1), tw = W / parts(s, 2);
  const int64_t nb = x.shape()[0] / parts(s, 0);
  auto index_of = [&](int d) {
    return s.is_tiled() ? s.tile_index(d) : std::vector<int64_t>{0, 0, 0, 0};
  };
  const std::vector<int64_t> ei = index_of(e);
  const int64_t e_r0 = ei[1] * th, e_c0 = ei[2] * tw;
  Tensor out = Tensor::allocate(x.dtype(), TensorShape({nb, th, tw, C}),
                                x.devices()[static_cast<size_t>(e)]);
  T* o = out.mutable_data<T>();
  std::fill(o, o + out.num_elements(), T(0));
  for (int d : which) {
    if (index_of(d)[0] != ei[0]) continue;
    const auto [r0, r1, c0, c1] = window_of(d);
    const int64_t a = std::max(r0, e_r0), b = std::min(r1, e_r0 + th);
    const int64_t f = std::max(c0, e_c0), h = std::min(c1, e_c0 + tw);
    if (a >= b || f >= h) continue;
    const T* g = d_patch[static_cast<size_t>(d)].data<T>();
    const int64_t rows = r1 - r0, cols = c1 - c0;
    for (int64_t n = 0; n < nb; ++n) {
      for (int64_t r = a; r < b; ++r) {
        const T* from = g + ((n * rows + (r - r0)) * cols + (f - c0)) * C;
        T* to = o + ((n * th + (r - e_r0)) * tw + (f - e_c0)) * C;
        for (int64_t k = 0; k < (h - f) * C; ++k) to[k] += from[k];
      }
    }
  }
  return out;
}

enum class Windowed { Conv, MaxPool, AvgPool };

// The spatially partitioned windowed ops. nullopt: no rule applies (the
// caller falls back).
// Where each device's output tile and input window lie for a windowed op.
struct Plan {
  WindowGeometry gh, gw;
  int64_t oth = 0, otw = 0;  // output tile height / width
  std::vector<int64_t> k, strides, dilations;
  // Device d's window rows [r0, r1) and columns [c0, c1) in input coordinates
  // (negative or past the end inside the padding).
  struct Window {
    int64_t r0, r1, c0, c1;
  };
  Window window_of(const tpu::Sharding& s, int d) const {
    const std::vector<int64_t> index =
        s.is_tiled() ? s.tile_index(d) : std::vector<int64_t>{0, 0, 0, 0};
    const int64_t o_r = index[1] * oth, o_c = index[2] * otw;
    const Interval rows = input_window(gh, o_r, o_r + oth);
    const Interval cols = input_window(gw, o_c, o_c + otw);
    return {rows.begin, rows.end, cols.begin, cols.end};
  }
};

std::optional<Plan> plan_for(const ShardedTensor& x, Windowed kind, const Tensor& filters,
                             const std::vector<int64_t>& ksize,
                             const std::vector<int64_t>& strides0,
                             const std::vector<int64_t>& dilations0, const std::string& padding) {
  const tpu::Sharding& s = x.sharding();
  if (x.rank() != 4 || parts(s, 3) != 1) return std::nullopt;
  Plan p;
  p.strides = hw(strides0, "strides");
  p.dilations = hw(dilations0, "dilations");
  if (kind == Windowed::Conv) {
    if (filters.rank() != 4 || filters.shape()[2] != x.shape()[3]) return std::nullopt;
    p.k = {filters.shape()[0], filters.shape()[1]};
  } else {
    p.k = hw(ksize, "ksize");
  }
  std::optional<WindowGeometry> gh =
      window_geometry(x.shape()[1], p.k[0], p.strides[0], p.dilations[0], padding);
  std::optional<WindowGeometry> gw =
      window_geometry(x.shape()[2], p.k[1], p.strides[1], p.dilations[1], padding);
  if (!gh || !gw) return std::nullopt;
  if (gh->out % parts(s, 1) != 0 || gw->out % parts(s, 2) != 0) return std::nullopt;
  p.gh = *gh;
  p.gw = *gw;
  p.oth = gh->out / parts(s, 1);
  p.otw = gw->out / parts(s, 2);
  return p;
}

// The whole (unpartitioned) convolution's geometry, for one batch slice.
kernels::ConvGeometry conv_geometry(const ShardedTensor& x, const Plan& p, const Tensor& filters) {
  kernels::ConvGeometry g;
  g.batch = x.shape()[0] / parts(x.sharding(), 0);
  g.in_h = x.shape()[1];
  g.in_w = x.shape()[2];
  g.in_c = x.shape()[3];
  g.filter_h = p.k[0];
  g.filter_w = p.k[1];
  g.out_c = filters.shape()[3];
  g.out_h = p.gh.out;
  g.out_w = p.gw.out;
  g.stride_h = p.strides[0];
  g.stride_w = p.strides[1];
  g.dilation_h = p.dilations[0];
  g.dilation_w = p.dilations[1];
  g.pad_top = p.gh.pad_before;
  g.pad_left = p.gw.pad_before;
  return g;
}

// Whether the shards of x (and filters) can go to the tiled kernels, which
// read the halo in place: float32 and no tape (they record no ops).
bool tiled_kernels_apply(const ShardedTensor& x, const Tensor& filters) {
  return x.dtype() == DType::float32 && filters.dtype() == DType::float32 && !any_recorder_active();
}

// The tiles of x's batch slice that logical device d's tile lies in, as the
// grid of the whole height and width (a replicated/maximal x: d's copy).
kernels::ConvTileGrid tile_grid(const ShardedTensor& x, int d) {
  const tpu::Sharding& s = x.sharding();
  if (!s.is_tiled()) return {{x.shard(d)}, 1, 1};
  const std::vector<int64_t> index = s.tile_index(d);
  kernels::ConvTileGrid grid{{}, parts(s, 1), parts(s, 2)};
  for (int64_t i = 0; i < grid.grid_rows; ++i) {
    for (int64_t j = 0; j < grid.grid_cols; ++j) {
      const std::vector<int64_t> at = {index[0], i, j, 0};
      grid.tiles.push_back(x.shard(s.logical_device_at_tile(at)));
    }
  }
  return grid;
}

// Logical device d's output tile of a windowed op, in output coordinates.
kernels::ConvWindow output_tile(const tpu::Sharding& s, const Plan& p, int d) {
  const std::vector<int64_t> index =
      s.is_tiled() ? s.tile_index(d) : std::vector<int64_t>{0, 0, 0, 0};
  return {index[1] * p.oth, (index[1] + 1) * p.oth, index[2] * p.otw, (index[2] + 1) * p.otw};
}

std::optional<ShardedTensor> spatial(const ShardedTensor& x, Windowed kind, const Tensor& filters,
                                     const std::vector<int64_t>& ksize,
                                     const std::vector<int64_t>& strides0,
                                     const std::vector<int64_t>& dilations0,
                                     const std::string& padding) {
  const tpu::Sharding& s = x.sharding();
  std::optional<Plan> plan = plan_for(x, kind, filters, ksize, strides0, dilations0, padding);
  if (!plan) return std::nullopt;
  const std::vector<int64_t>& k = plan->k;
  const std::vector<int64_t>& strides = plan->strides;
  const int64_t channels = kind == Windowed::Conv ? filters.shape()[3] : x.shape()[3];
  const TensorShape out_shape({x.shape()[0], plan->gh.out, plan->gw.out, channels});
  const nn::Conv2DOptions valid_conv{
      .strides = strides, .padding = "VALID", .dilations = plan->dilations};
  if (kind == Windowed::Conv && tiled_kernels_apply(x, filters)) {
    const kernels::ConvGeometry g = conv_geometry(x, *plan, filters);
    if (kernels::tiled_conv2d_supported(g)) {
      // Each device computes its output tile of the whole convolution,
      // reading its halo rows/columns in place from the neighbours' shards.
      std::vector<Tensor> shards = run_shards(x.devices(), holders(s), [&](int d) {
        return kernels::tiled_conv2d(tile_grid(x, d), filters, g, output_tile(s, *plan, d));
      });
      return make(s, out_shape, std::move(shards), x.devices());
    }
  }
  std::vector<Tensor> shards = run_shards(x.devices(), holders(s), [&](int d) {
    const auto [r0, r1, c0, c1] = plan->window_of(s, d);
    switch (kind) {
      case Windowed::Conv:
        return nn::conv2d(window(x, d, r0, r1, c0, c1, 0.0), filters, valid_conv);
      case Windowed::MaxPool:
        return nn::max_pool2d(
            window(x, d, r0, r1, c0, c1, -std::numeric_limits<double>::infinity()), k, strides,
            "VALID");
      case Windowed::AvgPool: {
        std::pair<int64_t, int64_t> extent;
        Tensor patch = window(x, d, r0, r1, c0, c1, 0.0, &extent);
        Tensor avg = nn::avg_pool2d(patch, k, strides, "VALID");
        if (patch.shape()[1] == extent.first && patch.shape()[2] == extent.second) return avg;
        // TF's SAME average counts only in-image elements: divide by the
        // pooled in-image fraction of each window.
        const int64_t top = -std::min<int64_t>(r0, 0), left = -std::min<int64_t>(c0, 0);
        Tensor mask = pad(ones({1, extent.first, extent.second, 1}, patch.dtype()),
                          {{0, 0},
                           {top, patch.shape()[1] - extent.first - top},
                           {left, patch.shape()[2] - extent.second - left},
                           {0, 0}});
        return divide(avg, nn::avg_pool2d(mask, k, strides, "VALID"));
      }
    }
    throw InternalError("sharded: unknown windowed op");
  });
  return make(s, out_shape, std::move(shards), x.devices());
}

}  // namespace

namespace internal {

// Slices a plain operand `b` (broadcast against a tensor of `full` shape) to
// logical device d's tile of `s`.
Tensor broadcast_tile(const Tensor& b, const tpu::Sharding& s, const TensorShape& full, int d) {
  if (!s.is_tiled()) return b;
  const int offset = full.rank() - b.rank();
  const std::vector<int64_t> at = s.shard_offset(full, d);
  const TensorShape tile = s.shard_shape(full);
  std::vector<int64_t> begin(static_cast<size_t>(b.rank()), 0),
      size(static_cast<size_t>(b.rank()), -1);
  bool sliced = false;
  for (int i = 0; i < b.rank(); ++i) {
    const int fi = i + offset;
    if (b.shape()[i] == full[fi] && tile[fi] != full[fi]) {
      begin[static_cast<size_t>(i)] = at[static_cast<size_t>(fi)];
      size[static_cast<size_t>(i)] = tile[fi];
      sliced = true;
    }
  }
  return sliced ? slice(b, begin, size) : b;
}

// Whether broadcasting `b` against `a_shape` gives `a_shape` back.
bool broadcasts_into(const TensorShape& b, const TensorShape& a) {
  if (b.rank() > a.rank()) return false;
  for (int i = 1; i <= b.rank(); ++i) {
    if (b[-i] != 1 && b[-i] != a[-i]) return false;
  }
  return true;
}

}  // namespace internal

// --- ShardedTensor -------------------------------------------------------------------

ShardedTensor::ShardedTensor(tpu::Sharding sharding, TensorShape shape, std::vector<Tensor> shards,
                             std::vector<const Device*> devices)
    : sharding_(std::move(sharding)),
      shape_(std::move(shape)),
      shards_(std::move(shards)),
      devices_(std::move(devices)) {
  const size_t n = static_cast<size_t>(sharding_.num_logical_devices());
  STRATA_CHECK_ARG(shards_.size() == n && devices_.size() == n, "ShardedTensor: expected ", n,
                   " shards and devices for sharding ", sharding_.to_string(), ", got ",
                   shards_.size(), " shards and ", devices_.size(), " devices");
  sharding_.check_shape(shape_);
  const TensorShape tile = sharding_.shard_shape(shape_);
  for (size_t d = 0; d < n; ++d) {
    if (!sharding_.holds_shard(static_cast<int>(d))) continue;
    STRATA_CHECK_ARG(shards_[d].defined() && shards_[d].shape() == tile,
                     "ShardedTensor: expected shard ", d, " of shape ", tile, ", got ",
                     shards_[d].defined() ? shards_[d].shape().to_string() : std::string("none"));
    STRATA_CHECK_ARG(devices_[d] != nullptr, "ShardedTensor: device ", d, " is null");
  }
}

DType ShardedTensor::dtype() const {
  return shard(sharding_.is_maximal() ? sharding_.maximal_device() : 0).dtype();
}

const Tensor& ShardedTensor::shard(int logical_device) const {
  STRATA_CHECK_ARG(logical_device >= 0 && logical_device < num_logical_devices(),
                   "ShardedTensor::shard: expected a logical device in [0, ", num_logical_devices(),
                   "), got ", logical_device);
  STRATA_CHECK_ARG(sharding_.holds_shard(logical_device), "ShardedTensor::shard: logical device ",
                   logical_device, " holds no shard of a tensor with sharding ",
                   sharding_.to_string());
  return shards_[static_cast<size_t>(logical_device)];
}

ShardedTensor shard(const Tensor& full, const tpu::Sharding& sharding,
                    const std::vector<const Device*>& devices) {
  sharding.check_shape(full.shape());
  STRATA_CHECK_ARG(static_cast<int>(devices.size()) == sharding.num_logical_devices(),
                   "sharded::shard: expected one device per logical device (",
                   sharding.num_logical_devices(), "), got ", devices.size());
  if (!sharding.is_tiled()) {
    // Replicated / maximal: the holders share the value (no copy).
    std::vector<Tensor> shards(devices.size());
    for (int d : holders(sharding)) shards[static_cast<size_t>(d)] = full;
    return make(sharding, full.shape(), std::move(shards), devices);
  }
  const TensorShape tile = sharding.shard_shape(full.shape());
  // Slice the bare value: an annotated input would send each slice back to the
  // op dispatcher wherever a shard runs in a replica context (the caller's own
  // shard, or one its wait runs), and a shard must be a plain tensor on its device.
  const Tensor bare = full.with_extension(nullptr);
  std::vector<Tensor> shards = run_shards(devices, holders(sharding), [&](int d) {
    return slice(bare, sharding.shard_offset(full.shape(), d), tile.dims());
  });
  return make(sharding, full.shape(), std::move(shards), devices);
}

ShardedTensor shard_annotated(const Tensor& annotated, const std::vector<const Device*>& devices) {
  if (const ShardedTensor* carried = carried_shards(annotated)) return *carried;
  const tpu::Sharding* s = tpu::sharding_of(annotated);
  return shard(annotated, s ? *s : tpu::Sharding::maximal(0, static_cast<int>(devices.size())),
               devices);
}

Tensor unshard(const ShardedTensor& x, const Device* device) {
  const tpu::Sharding& s = x.sharding();
  if (!s.is_tiled()) return x.shard(s.is_maximal() ? s.maximal_device() : 0);
  DeviceScope scope(device ? *device : *x.devices().front());
  // Concatenate along the last dimension first, then outward (row-major tiles).
  std::vector<Tensor> level(x.shards());
  const std::vector<int64_t>& p = s.partition_dimensions();
  for (int axis = static_cast<int>(p.size()) - 1; axis >= 0; --axis) {
    const int64_t n = p[static_cast<size_t>(axis)];
    if (n == 1) continue;
    std::vector<Tensor> next;
    for (size_t i = 0; i < level.size(); i += static_cast<size_t>(n)) {
      next.push_back(concat(std::vector<Tensor>(level.begin() + static_cast<std::ptrdiff_t>(i),
                                                level.begin() + static_cast<std::ptrdiff_t>(i) + n),
                            axis));
    }
    level = std::move(next);
  }
  return level.front();
}

ShardedTensor reshard(const ShardedTensor& x, const tpu::Sharding& sharding) {
  if (x.sharding() == sharding) return x;
  return shard(unshard(x), sharding, x.devices());
}

// --- element-wise --------------------------------------------------------------------

ShardedTensor unary(const ShardedTensor& x, const UnaryFn& op, const std::string& /*name*/) {
  std::vector<Tensor> shards =
      run_shards(x.devices(), holders(x.sharding()), [&](int d) { return op(x.shard(d)); });
  return make(x.sharding(), x.shape(), std::move(shards), x.devices());
}

ShardedTensor relu(const ShardedTensor& x) { return unary(x, &strata::relu, "relu"); }

ShardedTensor binary(const ShardedTensor& a, const Tensor& b, const BinaryFn& op,
                     const std::string& name) {
  if (!broadcasts_into(b.shape(), a.shape())) {
    const ShardedTensor bb =
        shard(b, tpu::Sharding::replicated(a.num_logical_devices()), a.devices());
    return fallback(name, {a, bb}, [&](const std::vector<Tensor>& t) { return op(t[0], t[1]); });
  }
  std::vector<Tensor> shards = run_shards(a.devices(), holders(a.sharding()), [&](int d) {
    return op(a.shard(d), broadcast_tile(b, a.sharding(), a.shape(), d));
  });
  return make(a.sharding(), a.shape(), std::move(shards), a.devices());
}

ShardedTensor binary(const ShardedTensor& a, const ShardedTensor& b, const BinaryFn& op,
                     const std::string& name) {
  if (b.sharding().is_replicated()) return binary(a, b.shard(0), op, name);
  if (a.sharding() == b.sharding() && a.shape() == b.shape()) {
    std::vector<Tensor> shards = run_shards(a.devices(), holders(a.sharding()),
                                            [&](int d) { return op(a.shard(d), b.shard(d)); });
    return make(a.sharding(), a.shape(), std::move(shards), a.devices());
  }
  if (a.sharding().is_replicated() && broadcasts_into(a.shape(), b.shape())) {
    std::vector<Tensor> shards = run_shards(b.devices(), holders(b.sharding()), [&](int d) {
      return op(broadcast_tile(a.shard(0), b.sharding(), b.shape(), d), b.shard(d));
    });
    return make(b.sharding(), b.shape(), std::move(shards), b.devices());
  }
  return fallback(name, {a, b}, [&](const std::vector<Tensor>& t) { return op(t[0], t[1]); });
}

ShardedTensor add(const ShardedTensor& a, const ShardedTensor& b) {
  return binary(a, b, &strata::add, "add");
}
ShardedTensor add(const ShardedTensor& a, const Tensor& b) {
  return binary(a, b, &strata::add, "add");
}
ShardedTensor subtract(const ShardedTensor& a, const ShardedTensor& b) {
  return binary(a, b, &strata::subtract, "subtract");
}
ShardedTensor multiply(const ShardedTensor& a, const ShardedTensor& b) {
  return binary(a, b, &strata::multiply, "multiply");
}
ShardedTensor multiply(const ShardedTensor& a, const Tensor& b) {
  return binary(a, b, &strata::multiply, "multiply");
}

ShardedTensor apply_replicated(const std::vector<ShardedTensor>& inputs,
                               const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                               const std::string& name) {
  STRATA_CHECK_ARG(!inputs.empty(), "sharded::apply_replicated: expected at least one input");
  const int n = inputs.front().num_logical_devices();
  const tpu::Sharding replicated = tpu::Sharding::replicated(n);
  std::vector<ShardedTensor> copies;
  for (const ShardedTensor& x : inputs) {
    STRATA_CHECK_ARG(x.num_logical_devices() == n,
                     "sharded::apply_replicated: expected inputs over ", n,
                     " logical devices, got one over ", x.num_logical_devices());
    if (!x.sharding().is_replicated()) count_fallback(name);
    copies.push_back(reshard(x, replicated));
  }
  std::vector<Tensor> shards =
      run_shards(inputs.front().devices(), holders(replicated), [&](int d) {
        std::vector<Tensor> local;
        local.reserve(copies.size());
        for (const ShardedTensor& x : copies) local.push_back(x.shard(d));
        return fn(local);
      });
  const TensorShape shape = shards.front().shape();
  return make(replicated, shape, std::move(shards), inputs.front().devices());
}

// --- linear algebra and reductions ----------------------------------------------------------

ShardedTensor matmul(const ShardedTensor& a, const Tensor& b) {
  const tpu::Sharding& s = a.sharding();
  auto plain = [&](const std::vector<Tensor>& t) { return strata::matmul(t[0], t[1]); };
  const bool shapes_ok = a.rank() == 2 && b.rank() == 2 && a.shape()[1] == b.shape()[0];
  if (!shapes_ok || !s.is_tiled()) {
    if (!s.is_tiled() && shapes_ok) {
      // Replicated / maximal: every holder multiplies its copy.
      std::vector<Tensor> shards =
          run_shards(a.devices(), holders(s), [&](int d) { return strata::matmul(a.shard(d), b); });
      return make(s, TensorShape({a.shape()[0], b.shape()[1]}), std::move(shards), a.devices());
    }
    return fallback("matmul",
                    {a, shard(b, tpu::Sharding::replicated(a.num_logical_devices()), a.devices())},
                    plain);
  }
  const int64_t pm = parts(s, 0), pk = parts(s, 1);
  const TensorShape out_shape({a.shape()[0], b.shape()[1]});
  if (pk == 1) {
    // Batch (row) split: each device multiplies its rows, no communication.
    std::vector<Tensor> shards =
        run_shards(a.devices(), holders(s), [&](int d) { return strata::matmul(a.shard(d), b); });
    return make(tpu::Sharding::tiled({pm, 1}), out_shape, std::move(shards), a.devices());
  }
  if (pm == 1) {
    // Contraction split: partial products a_k @ b_k, then an all-reduce (every
    // device sums all partials), giving a replicated result.
    const int64_t kt = a.shape()[1] / pk;
    std::vector<Tensor> partial = run_shards(a.devices(), holders(s), [&](int d) {
      return strata::matmul(a.shard(d), slice(b, {d * kt, 0}, {kt, -1}));
    });
    std::vector<Tensor> shards =
        run_shards(a.devices(), holders(s), [&](int) { return add_n(partial); });
    return make(tpu::Sharding::replicated(a.num_logical_devices()), out_shape, std::move(shards),
                a.devices());
  }
  return fallback("matmul",
                  {a, shard(b, tpu::Sharding::replicated(a.num_logical_devices()), a.devices())},
                  plain);
}

namespace {

enum class Reduction { Sum, Mean, Max, Min, Prod };

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::Sum: return "reduce_sum";
    case Reduction::Mean: return "reduce_mean";
    case Reduction::Max: return "reduce_max";
    case Reduction::Min: return "reduce_min";
    case Reduction::Prod: return "reduce_prod";
  }
  return "reduce";
}

ShardedTensor reduce(const ShardedTensor& x, const ReduceOptions& o, Reduction r) {
  const tpu::Sharding& s = x.sharding();
  const char* name = reduction_name(r);
  Tensor (*local)(const Tensor&, const ReduceOptions&) = nullptr;
  // The partial reduce of a cross-shard reduction and how partials combine.
  Tensor (*partial_op)(const Tensor&, const ReduceOptions&) = nullptr;
  Tensor (*combine)(const Tensor&, const Tensor&) = nullptr;
  switch (r) {
    case Reduction::Sum:
    case Reduction::Mean:
      local = r == Reduction::Sum ? &strata::reduce_sum : &strata::reduce_mean;
      partial_op = &strata::reduce_sum;
      break;
    case Reduction::Max:
      local = partial_op = &strata::reduce_max;
      combine = &strata::maximum;
      break;
    case Reduction::Min:
      local = partial_op = &strata::reduce_min;
      combine = &strata::minimum;
      break;
    case Reduction::Prod:
      local = partial_op = &strata::reduce_prod;
      combine = &strata::multiply;
      break;
  }
  std::vector<int64_t> axes = o.axis;
  if (axes.empty()) {
    for (int i = 0; i < x.rank(); ++i) axes.push_back(i);
  }
  for (int64_t& a : axes) {
    STRATA_CHECK_ARG(a >= -x.rank() && a < x.rank(), name, ": expected axis in [", -x.rank(), ", ",
                     x.rank(), "), got ", a, " for shape ", x.shape());
    if (a < 0) a += x.rank();
  }
  auto reduced = [&](int i) { return std::find(axes.begin(), axes.end(), i) != axes.end(); };
  bool any_split_reduced = false, all_split_reduced = true;
  for (int i = 0; i < x.rank(); ++i) {
    if (parts(s, i) == 1) continue;
    if (reduced(i)) {
      any_split_reduced = true;
    } else {
      all_split_reduced = false;
    }
  }
  const ReduceOptions full_axes{.axis = axes, .keepdims = o.keepdims};
  std::vector<int64_t> out_dims, out_parts;
  for (int i = 0; i < x.rank(); ++i) {
    if (reduced(i) && !o.keepdims) continue;
    out_dims.push_back(reduced(i) ? 1 : x.shape()[i]);
    out_parts.push_back(reduced(i) ? 1 : parts(s, i));
  }
  const TensorShape out_shape(out_dims);
  if (!any_split(s) || !any_split_reduced) {
    std::vector<Tensor> shards =
        run_shards(x.devices(), holders(s), [&](int d) { return local(x.shard(d), full_axes); });
    // No split dimension is reduced, so a tiled layout keeps its splits.
    const tpu::Sharding out_s =
        s.is_tiled() && !out_parts.empty() ? tpu::Sharding::tiled(out_parts) : s;
    return make(out_s, out_shape, std::move(shards), x.devices());
  }
  if (all_split_reduced) {
    // Local reduces, then the cross-shard combine on every device (all-reduce).
    std::vector<Tensor> partial = run_shards(
        x.devices(), holders(s), [&](int d) { return partial_op(x.shard(d), full_axes); });
    std::vector<Tensor> present;
    for (int d : holders(s)) present.push_back(partial[static_cast<size_t>(d)]);
    int64_t count = 1;
    for (int64_t a : axes) count *= x.shape()[static_cast<int>(a)];
    std::vector<Tensor> shards = run_shards(x.devices(), holders(s), [&](int) {
      if (combine == nullptr) {
        Tensor total = add_n(present);
        if (r != Reduction::Mean) return total;
        return multiply(total, cast(constant(1.0 / static_cast<double>(count)), total.dtype()));
      }
      Tensor acc = present.front();
      for (size_t i = 1; i < present.size(); ++i) acc = combine(acc, present[i]);
      return acc;
    });
    return make(tpu::Sharding::replicated(s.num_logical_devices()), out_shape, std::move(shards),
                x.devices());
  }
  return fallback(name, {x}, [&](const std::vector<Tensor>& t) { return local(t[0], o); });
}

// The filter gradient of a sharded conv2d: the sum of the devices' partial
// gradients (those of `which`), on `device` (the all-reduce of the partials).
Tensor sum_filter_gradients(const std::vector<Tensor>& d_filters, const std::vector<int>& which,
                            const Device& device) {
  std::vector<Tensor> present;
  present.reserve(which.size());
  for (int d : which) present.push_back(d_filters[static_cast<size_t>(d)]);
  DeviceScope scope(device);
  return present.size() == 1 ? present[0] : add_n(present);
}

}  // namespace

ShardedTensor reduce_sum(const ShardedTensor& x, const ReduceOptions& options) {
  return reduce(x, options, Reduction::Sum);
}
ShardedTensor reduce_mean(const ShardedTensor& x, const ReduceOptions& options) {
  return reduce(x, options, Reduction::Mean);
}
ShardedTensor reduce_max(const ShardedTensor& x, const ReduceOptions& options) {
  return reduce(x, options, Reduction::Max);
}
ShardedTensor reduce_min(const ShardedTensor& x, const ReduceOptions& options) {
  return reduce(x, options, Reduction::Min);
}
ShardedTensor reduce_prod(const ShardedTensor& x, const ReduceOptions& options) {
  return reduce(x, options, Reduction::Prod);
}

ShardedTensor reshape(const ShardedTensor& x, const std::vector<int64_t>& shape0) {
  const tpu::Sharding& s = x.sharding();
  // Resolve a -1 against the element count.
  std::vector<int64_t> shape = shape0;
  int64_t known = 1;
  int unknown = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      unknown = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (unknown >= 0 && known > 0)
    shape[static_cast<size_t>(unknown)] = x.shape().num_elements() / known;
  auto plain = [&](const std::vector<Tensor>& t) { return strata::reshape(t[0], shape0); };
  if (!s.is_tiled()) {
    std::vector<Tensor> shards = run_shards(
        x.devices(), holders(s), [&](int d) { return strata::reshape(x.shard(d), shape0); });
    return make(s, TensorShape(shape), std::move(shards), x.devices());
  }
  int last = -1;
  for (int i = 0; i < x.rank(); ++i) {
    if (parts(s, i) > 1) last = i;
  }
  bool survives = static_cast<int>(shape.size()) > last;
  for (int i = 0; survives && i <= last; ++i)
    survives = shape[static_cast<size_t>(i)] == x.shape()[i];
  if (!survives) return fallback("reshape", {x}, plain);
  const TensorShape tile = s.shard_shape(x.shape());
  std::vector<int64_t> tile_shape = shape, out_parts(shape.size(), 1);
  for (int i = 0; i <= last; ++i) {
    tile_shape[static_cast<size_t>(i)] = tile[i];
    out_parts[static_cast<size_t>(i)] = parts(s, i);
  }
  std::vector<Tensor> shards = run_shards(
      x.devices(), holders(s), [&](int d) { return strata::reshape(x.shard(d), tile_shape); });
  return make(tpu::Sharding::tiled(out_parts), TensorShape(shape), std::move(shards), x.devices());
}

// --- windowed ops ----------------------------------------------------------------------------

ShardedTensor conv2d(const ShardedTensor& x, const Tensor& filters,
                     const nn::Conv2DOptions& options) {
  std::optional<ShardedTensor> out =
      spatial(x, Windowed::Conv, filters, {}, options.strides, options.dilations, options.padding);
  if (out) return *out;
  const ShardedTensor f =
      shard(filters, tpu::Sharding::replicated(x.num_logical_devices()), x.devices());
  return fallback("conv2d", {x, f},
                  [&](const std::vector<Tensor>& t) { return nn::conv2d(t[0], t[1], options); });
}

Conv2DGradients conv2d_gradients(const ShardedTensor& x, const Tensor& filters,
                                 const ShardedTensor& dy, const nn::Conv2DOptions& options) {
  const tpu::Sharding& s = x.sharding();
  std::optional<Plan> plan =
      plan_for(x, Windowed::Conv, filters, {}, options.strides, options.dilations, options.padding);
  const TensorShape out_shape =
      plan ? TensorShape({x.shape()[0], plan->gh.out, plan->gw.out, filters.shape()[3]})
           : TensorShape();
  if (!plan || !(dy.sharding() == s) || !(dy.shape() == out_shape)) {
    count_fallback("conv2d_gradients");
    const Device* device = x.devices().front();
    const Tensor full_x = unshard(x, device), full_dy = unshard(dy, device);
    DeviceScope scope(*device);
    Conv2DGradients g;
    g.filters = nn::conv2d_backprop_filter(full_x, filters.shape(), full_dy, options);
    g.input =
        shard(nn::conv2d_backprop_input(full_x.shape(), filters, full_dy, options), s, x.devices());
    return g;
  }
  const nn::Conv2DOptions valid{
      .strides = plan->strides, .padding = "VALID", .dilations = plan->dilations};
  const std::vector<int> which = holders(s);
  if (tiled_kernels_apply(x, filters) && dy.dtype() == DType::float32) {
    const kernels::ConvGeometry geom = conv_geometry(x, *plan, filters);
    if (kernels::tiled_conv2d_supported(geom) &&
        kernels::tiled_conv2d_backprop_input_supported(geom)) {
      // Per device, in parallel and in place: the filter gradient of its
      // output tile, and its input tile's gradient from its dy tile plus the
      // halo rows/columns of the neighbours' dy (the forward exchange on dy
      // replaces the reverse exchange of window gradients).
      std::vector<Tensor> d_input(x.devices().size());
      std::vector<Tensor> d_filters = run_shards(x.devices(), which, [&](int d) {
        const TensorShape tile = s.shard_shape(x.shape());
        const std::vector<int64_t> at =
            s.is_tiled() ? s.shard_offset(x.shape(), d) : std::vector<int64_t>{0, 0, 0, 0};
        d_input[static_cast<size_t>(d)] = kernels::tiled_conv2d_backprop_input(
            filters, tile_grid(dy, d), geom, {at[1], at[1] + tile[1], at[2], at[2] + tile[2]});
        return kernels::tiled_conv2d_backprop_filter(tile_grid(x, d), dy.shard(d), geom,
                                                     output_tile(s, *plan, d));
      });
      Conv2DGradients g;
      g.input = make(s, x.shape(), std::move(d_input), x.devices());
      g.filters = sum_filter_gradients(d_filters, which, *x.devices().front());
      return g;
    }
  }
  // Per device: the filter gradient of its window and the gradient of its
  // window (own tile plus halo), in parallel.
  std::vector<Tensor> d_patch(x.devices().size());
  std::vector<Tensor> d_filters = run_shards(x.devices(), which, [&](int d) {
    const auto [r0, r1, c0, c1] = plan->window_of(s, d);
    Tensor patch = window(x, d, r0, r1, c0, c1, 0.0);
    d_patch[static_cast<size_t>(d)] =
        nn::conv2d_backprop_input(patch.shape(), filters, dy.shard(d), valid);
    return nn::conv2d_backprop_filter(patch, filters.shape(), dy.shard(d), valid);
  });
  // The reverse halo exchange: each device sums the parts of every window
  // that overlap its tile; the filter gradients are all-reduced.
  Conv2DGradients g;
  std::vector<Tensor> dx = run_shards(x.devices(), which, [&](int e) {
    auto window_of = [&](int d) {
      const auto [r0, r1, c0, c1] = plan->window_of(s, d);
      return std::array<int64_t, 4>{r0, r1, c0, c1};
    };
    return x.dtype() == DType::float32
               ? gather_tile_gradient<float>(x, e, which, d_patch, window_of)
               : gather_tile_gradient<double>(x, e, which, d_patch, window_of);
  });
  g.input = make(s, x.shape(), std::move(dx), x.devices());
  g.filters = sum_filter_gradients(d_filters, which, *x.devices().front());
  return g;
}

ShardedTensor max_pool2d(const ShardedTensor& x, const std::vector<int64_t>& ksize,
                         const std::vector<int64_t>& strides, const std::string& padding) {
  std::optional<ShardedTensor> out =
      spatial(x, Windowed::MaxPool, Tensor(), ksize, strides, {1, 1}, padding);
  if (out) return *out;
  return fallback("max_pool2d", {x}, [&](const std::vector<Tensor>& t) {
    return nn::max_pool2d(t[0], ksize, strides, padding);
  });
}

ShardedTensor avg_pool2d(const ShardedTensor& x, const std::vector<int64_t>& ksize,
                         const std::vector<int64_t>& strides, const std::string& padding) {
  std::optional<ShardedTensor> out =
      spatial(x, Windowed::AvgPool, Tensor(), ksize, strides, {1, 1}, padding);
  if (out) return *out;
  return fallback("avg_pool2d", {x}, [&](const std::vector<Tensor>& t) {
    return nn::avg_pool2d(t[0], ksize, strides, padding);
  });
}

int64_t fallback_count(const std::string& op) {
  FallbackCounters& c = fallback_counters();
  MutexLock lock(c.mu);
  auto it = c.counts.find(op);
  return it == c.counts.end() ? 0 : it->second;
}

void reset_fallback_counts() {
  FallbackCounters& c = fallback_counters();
  MutexLock lock(c.mu);
  c.counts.clear();
}

}  // namespace strata::tpu::sharded
