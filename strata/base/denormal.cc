#include "strata/base/denormal.h"

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define STRATA_DENORMAL_X86 1
#elif defined(__aarch64__)
#define STRATA_DENORMAL_AARCH64 1
#endif

namespace strata {

namespace {
#if defined(STRATA_DENORMAL_X86)
constexpr unsigned kFtz = 0x8000;  // MXCSR bit 15: flush to zero
constexpr unsigned kDaz = 0x0040;  // MXCSR bit 6: denormals are zero
#elif defined(STRATA_DENORMAL_AARCH64)
constexpr uint64_t kFz = uint64_t{1} << 24;  // FPCR.FZ

uint64_t read_fpcr() noexcept {
  uint64_t v = 0;
  asm volatile("mrs %0, fpcr" : "=r"(v));
  return v;
}
void write_fpcr(uint64_t v) noexcept { asm volatile("msr fpcr, %0" : : "r"(v)); }
#endif
}  // namespace

bool denormal_flushing_supported() noexcept {
#if defined(STRATA_DENORMAL_X86) || defined(STRATA_DENORMAL_AARCH64)
  return true;
#else
  return false;
#endif
}

DenormalState get_denormal_state() noexcept {
#if defined(STRATA_DENORMAL_X86)
  const unsigned csr = _mm_getcsr();
  return {.flush_to_zero = (csr & kFtz) != 0, .denormals_are_zero = (csr & kDaz) != 0};
#elif defined(STRATA_DENORMAL_AARCH64)
  const bool fz = (read_fpcr() & kFz) != 0;
  return {.flush_to_zero = fz, .denormals_are_zero = fz};
#else
  return {};
#endif
}

bool set_denormal_state(const DenormalState& state) noexcept {
#if defined(STRATA_DENORMAL_X86)
  unsigned csr = _mm_getcsr() & ~(kFtz | kDaz);
  if (state.flush_to_zero) csr |= kFtz;
  if (state.denormals_are_zero) csr |= kDaz;
  _mm_setcsr(csr);
  return true;
#elif defined(STRATA_DENORMAL_AARCH64)
  if (state.flush_to_zero != state.denormals_are_zero) return false;
  const uint64_t fpcr = read_fpcr();
  write_fpcr(state.flush_to_zero ? (fpcr | kFz) : (fpcr & ~kFz));
  return true;
#else
  (void)state;
  return false;
#endif
}

ScopedFlushDenormal::ScopedFlushDenormal() noexcept : previous_(get_denormal_state()) {
  constexpr DenormalState kFlush{.flush_to_zero = true, .denormals_are_zero = true};
  if (previous_ != kFlush && denormal_flushing_supported()) changed_ = set_denormal_state(kFlush);
}

ScopedFlushDenormal::~ScopedFlushDenormal() {
  if (changed_) set_denormal_state(previous_);
}

}  // namespace strata
