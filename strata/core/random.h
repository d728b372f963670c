#pragma once
// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011), the
// generator family TensorFlow's stateless random ops use.
//
// Element i of a random tensor is a pure function of (key, counter base + i):
// results depend only on the seed, never on how many threads fill the tensor
// or in which order.
//
//   strata::random::Philox gen(/*seed=*/42, /*stream=*/0);
//   auto block = gen(/*counter=*/7);                 // four uint32 words
//   float u = strata::random::uint32_to_unit_float(block[0]);   // [0, 1)
//
// Seeds: an op called with an explicit seed is deterministic. Without one, the
// seed comes from the global seed (set_seed, like tf.random.set_seed) combined
// with a per-call counter, or from std::random_device if no global seed is set.
// That counter is process-wide atomic state; thread-safe.

#include <array>
#include <cstdint>
#include <optional>

namespace strata::random {

class Philox {
 public:
  using Block = std::array<uint32_t, 4>;
  Philox(uint64_t seed, uint64_t stream) noexcept
      : key_{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}, stream_(stream) {}

  // The 128 random bits of block `counter`.
  Block operator()(uint64_t counter) const noexcept {
    Block ctr{static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32),
              static_cast<uint32_t>(stream_), static_cast<uint32_t>(stream_ >> 32)};
    std::array<uint32_t, 2> key = key_;
    for (int round = 0; round < 10; ++round) {
      ctr = single_round(ctr, key);
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    return ctr;
  }

 private:
  static constexpr uint32_t kMul0 = 0xD2511F53;
  static constexpr uint32_t kMul1 = 0xCD9E8D57;
  static constexpr uint32_t kWeyl0 = 0x9E3779B9;
  static constexpr uint32_t kWeyl1 = 0xBB67AE85;

  static Block single_round(const Block& c, const std::array<uint32_t, 2>& k) noexcept {
    const uint64_t p0 = uint64_t{kMul0} * c[0];
    const uint64_t p1 = uint64_t{kMul1} * c[2];
    return {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
            static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
  }

  std::array<uint32_t, 2> key_;
  uint64_t stream_;
};

// Uniform float in [0, 1) from 23 random bits (as TF's Uint32ToFloat).
inline float uint32_to_unit_float(uint32_t x) noexcept {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}
// Uniform double in [0, 1) from 53 random bits.
inline double uint64_to_unit_double(uint32_t hi, uint32_t lo) noexcept {
  const uint64_t x = (uint64_t{hi} << 32 | lo) >> 11;
  return static_cast<double>(x) * (1.0 / 9007199254740992.0);
}

// tf.random.set_seed: makes every later unseeded random op deterministic.
void set_seed(uint64_t seed);
// Clears the global seed (unseeded ops become nondeterministic again).
void clear_seed();
// The (seed, stream) pair an op should use: `op_seed` if given, combined with
// the global seed as TF does; else derived from the global seed and a
// per-call counter; else from std::random_device.
std::array<uint64_t, 2> resolve_seed(std::optional<uint64_t> op_seed);

}  // namespace strata::random
