#pragma once
// Clang thread-safety annotations (no-ops on other compilers), as in abseil.
// Members guarded by a mutex are declared `T x_ STRATA_GUARDED_BY(mu_);`, where
// `mu_` is a strata::Mutex (strata/base/mutex.h): std::mutex carries no
// capability, so clang cannot check a GUARDED_BY that names one. The clang-tsa
// preset and the ThreadSafety.* tests build with -Wthread-safety -Werror.

#if defined(__clang__)
#define STRATA_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define STRATA_THREAD_ANNOTATION(x)
#endif

// On a class: its objects are capabilities (locks) of the named kind.
#define STRATA_CAPABILITY(x) STRATA_THREAD_ANNOTATION(capability(x))
// On an RAII class: it holds a capability from construction to destruction.
#define STRATA_SCOPED_CAPABILITY STRATA_THREAD_ANNOTATION(scoped_lockable)

// On data: reading or writing it requires holding the capability.
#define STRATA_GUARDED_BY(x) STRATA_THREAD_ANNOTATION(guarded_by(x))
// On a pointer: dereferencing it requires holding the capability.
#define STRATA_PT_GUARDED_BY(x) STRATA_THREAD_ANNOTATION(pt_guarded_by(x))

// On functions: the caller must hold / must not hold the capabilities.
#define STRATA_REQUIRES(...) STRATA_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define STRATA_EXCLUDES(...) STRATA_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On functions: they acquire / release the capabilities (`this` when empty).
#define STRATA_ACQUIRE(...) STRATA_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define STRATA_RELEASE(...) STRATA_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// On functions: they acquire the capability when they return `result`.
#define STRATA_TRY_ACQUIRE(...) STRATA_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// On functions: they check at run time that the capability is held; the
// analysis assumes it is afterwards.
#define STRATA_ASSERT_CAPABILITY(x) STRATA_THREAD_ANNOTATION(assert_capability(x))
// On functions: they return a reference to the capability.
#define STRATA_RETURN_CAPABILITY(x) STRATA_THREAD_ANNOTATION(lock_returned(x))
// On a function the analysis cannot follow; say why beside each use.
#define STRATA_NO_THREAD_SAFETY_ANALYSIS STRATA_THREAD_ANNOTATION(no_thread_safety_analysis)
