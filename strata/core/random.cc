#include "strata/core/random.h"

#include <atomic>
#include <random>

namespace strata::random {

namespace {
// Process-wide state behind tf.random.set_seed (documented in random.h).
std::atomic<bool> g_has_seed{false};
std::atomic<uint64_t> g_seed{0};
std::atomic<uint64_t> g_op_counter{0};

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

void set_seed(uint64_t seed) {
  g_seed.store(seed);
  g_op_counter.store(0);
  g_has_seed.store(true);
}

void clear_seed() { g_has_seed.store(false); }

std::array<uint64_t, 2> resolve_seed(std::optional<uint64_t> op_seed) {
  if (op_seed) {
    // An explicit op seed is deterministic on its own; a global seed, when set,
    // selects a different stream (as TF combines the two).
    const uint64_t stream = g_has_seed.load() ? splitmix64(g_seed.load()) : 0;
    return {*op_seed, stream};
  }
  if (g_has_seed.load()) {
    return {splitmix64(g_seed.load()), splitmix64(g_op_counter.fetch_add(1) + 1)};
  }
  std::random_device rd;
  return {(uint64_t{rd()} << 32) | rd(), (uint64_t{rd()} << 32) | rd()};
}

}  // namespace strata::random
