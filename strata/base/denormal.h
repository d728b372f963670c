#pragma once
// Denormal (subnormal) floating-point handling of the calling thread.
//
// Arithmetic that produces or consumes denormal floats (|x| < 1.18e-38 for
// float32) runs tens of times slower on x86 unless the thread's MXCSR register
// flushes them: FTZ turns denormal results into zero, DAZ reads denormal
// inputs as zero. Training produces such values (tiny gradients, Adam's second
// moments decaying towards zero), so, as TensorFlow does in its CPU thread
// pools and around every kernel it runs, Strata flushes denormals on every
// runtime thread (intra-op pool threads, replica threads, input-pipeline
// threads) for their whole life, and on the calling thread while its kernels,
// `Strategy::run` and Keras's fit / evaluate / predict run, restoring the
// caller's mode afterwards. The mode is per thread: a thread Strata does not
// own keeps its own setting outside those calls.
//
//   {
//     strata::ScopedFlushDenormal flush;   // FTZ + DAZ on this thread
//     ... float arithmetic: denormal results become 0 ...
//   }                                      // the previous mode is back
//
// On x86-64 the mode is MXCSR's FTZ and DAZ bits; on AArch64 FPCR's FZ bit
// (one bit for both); elsewhere the state reads as unsupported and setting it
// does nothing.

namespace strata {

struct DenormalState {
  bool flush_to_zero = false;       // denormal results are written as zero (FTZ)
  bool denormals_are_zero = false;  // denormal inputs are read as zero (DAZ)
  bool operator==(const DenormalState&) const = default;
};

// This thread's current mode (both false where unsupported).
DenormalState get_denormal_state() noexcept;

// Sets this thread's mode; returns false (and changes nothing) where the
// processor has no such control. On AArch64 both fields must be equal.
bool set_denormal_state(const DenormalState& state) noexcept;

// Whether this processor lets Strata flush denormals.
bool denormal_flushing_supported() noexcept;

// RAII: flushes denormals to zero (FTZ and DAZ) on this thread until it is
// destroyed, then restores the mode it found. Cheap when the mode is already
// set (one register read, no write). Neither copyable nor movable: it restores
// the thread it was made on.
class ScopedFlushDenormal {
 public:
  ScopedFlushDenormal() noexcept;
  ~ScopedFlushDenormal();
  ScopedFlushDenormal(const ScopedFlushDenormal&) = delete;
  ScopedFlushDenormal& operator=(const ScopedFlushDenormal&) = delete;

 private:
  DenormalState previous_;
  bool changed_ = false;
};

}  // namespace strata
