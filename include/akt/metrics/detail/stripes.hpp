#pragma once
// Striped cells for the metrics registry: each series keeps one cache line per stripe and a
// thread updates only the stripe of its own index, so threads with different indexes never
// write the same cache line; a read sums the stripes.

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace akt::metrics::detail {

inline constexpr std::size_t k_cache_line = 64;
inline constexpr std::size_t k_words_per_line = k_cache_line / sizeof(std::uint64_t);

// One cache line of 64-bit words. Writers: the threads whose stripe index selects the line
// (relaxed read-modify-writes: the line is almost always owned by one thread, so they do not
// contend). Readers: collect(), relaxed loads (a scrape may miss updates made while it reads;
// each word is read whole).
struct alignas(k_cache_line) cache_line {
  std::atomic<std::uint64_t> words[k_words_per_line] = {};
};

// Source of stripe indexes: each thread takes the next one at its first update.
// Writers/readers: any thread, relaxed (only uniqueness of the taken value matters).
inline std::atomic<std::uint32_t> g_next_stripe{0};

// This thread's stripe index (registries mask it with their stripe count). Consecutive threads
// get consecutive indexes, so up to `stripes` threads (the dispatcher's workers among them)
// never share a line.
inline std::uint32_t stripe_index() noexcept {
  static thread_local std::uint32_t index = ~std::uint32_t{0};
  if (index == ~std::uint32_t{0}) index = g_next_stripe.fetch_add(1, std::memory_order_relaxed);
  return index;
}

}  // namespace akt::metrics::detail
