#pragma once
// runtime_metrics: the actor runtime's own metrics (system_config::metrics.enabled), pulled at
// scrape time from state the runtime keeps anyway, plus the few figures that have no other home:
// per-kind totals of stopped actors, failures and restarts per kind, dead letters per reason,
// and the sampled handler times.
//
// Contract
// - Callers: install() once, from start(). The on_* hooks from the turn owner of the cell they
//   name (a stop, a failure, a restart: rare paths) and only when enabled(); count_dead_letter
//   from any thread. record_handler only from the thread that ran the handler (each thread
//   writes its own table). collect (the registered collector) runs on a scraping thread.
// - Progress: the per-kind hooks take kinds_mutex_ (a short section; never taken on the
//   message path). record_handler is lock-free after a thread's first sample for this system
//   (the first takes tables_mutex_ and allocates that thread's table; a kind's first sample on a
//   thread allocates its slot). count_dead_letter is one relaxed fetch_add.
// - Ordering: every figure is a relaxed atomic read whole by the scrape; handler slots are
//   published with release and found with acquire. akt_actor_messages_total never goes down
//   and never counts an actor twice: a stopping actor leaves the name registry before its count
//   is folded into its kind's total, and the scrape reads the totals before the registry, so an
//   actor stopping in between is missed (never seen in both); the collector reports the larger
//   of this scrape's sum and the last one's, and keeps a kind it once reported.
// - Memory: per thread that ran a sampled handler, a table of k_max_kinds slot pointers (8 KiB)
//   and one slot (200 bytes) per kind it timed; per kind, a few words of totals. Kinds are
//   process-wide ids (intern_actor_kind); beyond k_max_kinds a kind is counted but not timed.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <typeinfo>
#include <unordered_map>
#include <vector>

#include "akt/core/error.hpp"
#include "akt/metrics/registry.hpp"

namespace akt::detail {

class system_core;
class actor_cell;

// The demangled name of a kind id from intern_actor_kind (actor_cell.hpp).
std::string actor_kind_name(std::uint32_t kind);

class runtime_metrics {
 public:
  // Upper bounds of akt_actor_handler_seconds, in ns: 1, 2.5, 5 per decade from 1 us to 10 s.
  static constexpr std::array<std::uint64_t, 22> k_handler_bounds_ns = {
      1'000,         2'500,         5'000,         10'000,        25'000,      50'000,
      100'000,       250'000,       500'000,       1'000'000,     2'500'000,   5'000'000,
      10'000'000,    25'000'000,    50'000'000,    100'000'000,   250'000'000, 500'000'000,
      1'000'000'000, 2'500'000'000, 5'000'000'000, 10'000'000'000};
  static constexpr std::uint32_t k_max_kinds = 1024;  // bounds the per-thread table (8 KiB)
  static constexpr std::size_t k_reasons = 64;        // > every errc value

  explicit runtime_metrics(system_core& core);
  ~runtime_metrics();
  runtime_metrics(const runtime_metrics&) = delete;
  runtime_metrics& operator=(const runtime_metrics&) = delete;

  bool enabled() const noexcept { return enabled_; }
  // The handler-time countdown to restart a thread's sampling with: config's
  // handler_sample_every, or "never" (UINT32_MAX) when off.
  std::uint32_t sample_every() const noexcept { return sample_every_; }

  // Registers the collectors (start(), when enabled).
  void install();
  void on_actor_stopped(std::uint32_t kind, std::uint64_t processed) noexcept;
  void on_failure(std::uint32_t kind) noexcept;
  void on_restart(std::uint32_t kind) noexcept;
  void count_dead_letter(errc reason) noexcept {
    const auto i = static_cast<std::size_t>(reason);
    dead_letters_[i < k_reasons ? i : 0].fetch_add(1, std::memory_order_relaxed);
  }
  void record_handler(std::uint32_t kind, std::uint64_t ns) noexcept;

 private:
  // Handler times of one kind on one thread. Writer: that thread (relaxed load + store: one
  // writer, no read-modify-write). Reader: the scrape (relaxed).
  struct handler_slot {
    std::atomic<std::uint64_t> buckets[k_handler_bounds_ns.size() + 1] = {};  // +Inf last
    std::atomic<std::uint64_t> sum_ns{0};
  };
  // One thread's slots. slots[k]: writer the owning thread (release, once, when it first times
  // kind k); reader the scrape (acquire). Freed with the system.
  struct handler_table {
    std::atomic<handler_slot*> slots[k_max_kinds] = {};
    ~handler_table();
  };
  struct kind_totals {
    std::uint64_t processed_by_stopped = 0;
    std::uint64_t failures = 0;
    std::uint64_t restarts = 0;
  };

  handler_table* table_for_this_thread() noexcept;
  kind_totals& totals(std::uint32_t kind);  // kinds_mutex_ held
  void collect(metrics::snapshot& snap);

  system_core& core_;
  const bool enabled_;
  const std::uint32_t sample_every_;
  // Distinguishes this system's tables in the threads' caches (a new system may reuse a freed
  // one's address). Written once in the constructor.
  const std::uint64_t generation_;

  std::mutex kinds_mutex_;
  std::vector<kind_totals> totals_;  // by kind id; guarded by kinds_mutex_

  std::mutex tables_mutex_;
  // Guarded by tables_mutex_; a table is never removed before the system goes.
  std::unordered_map<std::thread::id, std::unique_ptr<handler_table>> tables_;

  // Writers: any thread that publishes a dead letter (relaxed). Reader: the scrape.
  std::array<std::atomic<std::uint64_t>, k_reasons> dead_letters_{};

  // The collector's own state (touched only inside collect, which the registry serialises):
  // the last akt_actor_messages_total per kind, reported again when a scrape sees less.
  std::vector<std::uint64_t> last_messages_;

  // Last: removed first, so the collector never runs on a half-destroyed system.
  metrics::collector_handle collector_;
};

}  // namespace akt::detail
