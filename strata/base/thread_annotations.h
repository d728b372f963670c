#pragma once
// Clang thread-safety annotations (no-ops on other compilers), as in abseil.
// Members guarded by a mutex are declared `T x_ STRATA_GUARDED_BY(mu_);`.

#if defined(__clang__)
#define STRATA_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define STRATA_THREAD_ANNOTATION(x)
#endif

#define STRATA_GUARDED_BY(x) STRATA_THREAD_ANNOTATION(guarded_by(x))
#define STRATA_PT_GUARDED_BY(x) STRATA_THREAD_ANNOTATION(pt_guarded_by(x))
#define STRATA_REQUIRES(...) STRATA_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define STRATA_EXCLUDES(...) STRATA_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
