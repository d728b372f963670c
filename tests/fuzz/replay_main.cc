// A libFuzzer-compatible driver for the main (GCC) build, so CI runs every fuzz
// target as a ctest: it feeds LLVMFuzzerTestOneInput the checked-in seeds, then a
// fixed number of mutants from a deterministic generator (same inputs on every
// run), stopping early at a time limit. A target fails by crashing: a trap, an
// uncaught exception (any error other than the ones it allows), or a sanitizer
// report under the asan/tsan presets.
//
//   fuzz_replay_<target> <seeds.hex> [mutants=20000] [seconds=5] [rng seed=1]
//
// Seed file: one input per line in hex; '#' starts a comment line; "-" is the
// empty input. scripts/fuzz.sh runs the same targets under libFuzzer.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;
constexpr size_t kMaxLen = 4096;  // as scripts/fuzz.sh's -max_len

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::vector<Bytes> read_seeds(const char* path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "fuzz_replay: cannot open seed file %s\n", path);
    std::exit(2);
  }
  std::vector<Bytes> seeds;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    Bytes b;
    if (line != "-") {
      for (size_t i = 0; i < line.size(); i += 2) {
        const int hi = hex_digit(line[i]), lo = i + 1 < line.size() ? hex_digit(line[i + 1]) : -1;
        if (hi < 0 || lo < 0) {
          std::fprintf(stderr, "fuzz_replay: %s:%d: expected hex digit pairs\n", path, lineno);
          std::exit(2);
        }
        b.push_back(static_cast<uint8_t>(hi << 4 | lo));
      }
    }
    seeds.push_back(std::move(b));
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "fuzz_replay: %s holds no seeds\n", path);
    std::exit(2);
  }
  return seeds;
}

// libFuzzer-style mutations: bit flips, byte sets/inserts/erases, "interesting"
// values (length fields love 0, 0xff.., 0x80..), chunk copies, truncation and
// splicing with another input.
class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}
  size_t below(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
  }

  Bytes mutate(Bytes b, const std::vector<Bytes>& pool) {
    const size_t rounds = 1 + below(4);
    for (size_t r = 0; r < rounds; ++r) step(b, pool);
    if (b.size() > kMaxLen) b.resize(kMaxLen);
    return b;
  }

 private:
  void step(Bytes& b, const std::vector<Bytes>& pool) {
    static const uint8_t kInteresting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x10, 0x40, 0xfe};
    switch (below(b.empty() ? 2 : 9)) {
      case 0: b.insert(b.begin() + static_cast<long>(below(b.size() + 1)), byte()); break;
      case 1: {  // splice: a prefix of b then a suffix of another input
        const Bytes& o = pool[below(pool.size())];
        const size_t cut = below(b.size() + 1), from = below(o.size() + 1);
        b.resize(cut);
        b.insert(b.end(), o.begin() + static_cast<long>(from), o.end());
        break;
      }
      case 2: b[below(b.size())] ^= static_cast<uint8_t>(1u << below(8)); break;
      case 3: b[below(b.size())] = byte(); break;
      case 4: b[below(b.size())] = kInteresting[below(sizeof kInteresting)]; break;
      case 5: {  // erase a run
        const size_t at = below(b.size()), n = 1 + below(std::min<size_t>(16, b.size() - at));
        b.erase(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
        break;
      }
      case 6: b.resize(below(b.size())); break;  // truncate
      case 7: {  // overwrite 4 or 8 bytes (a length or CRC field) with an extreme value
        const size_t w = below(2) ? 4 : 8, at = below(b.size());
        const uint8_t v = below(2) ? 0xff : 0x00;
        for (size_t i = at; i < std::min(b.size(), at + w); ++i) b[i] = v;
        if (at + w <= b.size() && below(2)) b[at + w - 1] = 0x7f;
        break;
      }
      case 8: {  // duplicate a chunk elsewhere
        const size_t at = below(b.size()), n = 1 + below(std::min<size_t>(32, b.size() - at));
        const Bytes chunk(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
        b.insert(b.begin() + static_cast<long>(below(b.size() + 1)), chunk.begin(), chunk.end());
        break;
      }
    }
  }
  uint8_t byte() { return static_cast<uint8_t>(below(256)); }
  std::mt19937_64 rng_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 5) {
    std::fprintf(stderr, "usage: %s <seeds.hex> [mutants] [seconds] [rng seed]\n", argv[0]);
    return 2;
  }
  const std::vector<Bytes> seeds = read_seeds(argv[1]);
  const long mutants = argc > 2 ? std::atol(argv[2]) : 20000;
  const double seconds = argc > 3 ? std::atof(argv[3]) : 5.0;
  const uint64_t rng_seed = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 1;

  for (const Bytes& s : seeds) LLVMFuzzerTestOneInput(s.data(), s.size());

  // Mutants of the seeds and of earlier mutants (a bounded pool), so mutations
  // stack; the sequence depends only on the rng seed.
  std::vector<Bytes> pool = seeds;
  Mutator m(rng_seed);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  long run = 0;
  for (; run < mutants; ++run) {
    if ((run & 63) == 0 && std::chrono::steady_clock::now() > deadline) break;
    Bytes b = m.mutate(pool[m.below(pool.size())], pool);
    LLVMFuzzerTestOneInput(b.data(), b.size());
    if (pool.size() < 256) {
      pool.push_back(std::move(b));
    } else if (m.below(8) == 0) {
      pool[seeds.size() + m.below(pool.size() - seeds.size())] = std::move(b);
    }
  }
  std::printf("fuzz_replay: %zu seeds and %ld of %ld mutants ran cleanly (rng seed %llu)\n",
              seeds.size(), run, mutants, static_cast<unsigned long long>(rng_seed));
  return 0;
}
