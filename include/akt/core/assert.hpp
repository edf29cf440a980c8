#pragma once
// Debug-build precondition checks. AKT_ASSERT costs nothing in release builds (NDEBUG) unless
// AKT_ENABLE_ASSERTS is defined, which the dev preset does.

#include <cstdio>
#include <cstdlib>

#if !defined(NDEBUG) || defined(AKT_ENABLE_ASSERTS)
#define AKT_ASSERT(cond)                                                                      \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "akt: assertion failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)
#else
#define AKT_ASSERT(cond) ((void)0)
#endif

#if defined(__GNUC__)
#define AKT_LIKELY(x) __builtin_expect(!!(x), 1)
#define AKT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define AKT_LIKELY(x) (x)
#define AKT_UNLIKELY(x) (x)
#endif
