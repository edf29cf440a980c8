#pragma once
// Helpers shared by the akt benchmark programs: a heap-allocation counter (in all, and per
// thread), a completion counter that a receiver bumps once per processed message and a timing
// thread waits on, a team of persistent producer threads released in rounds, percentiles, heap and
// resident-set measurements, CPU time of the process, of one of its threads, or of another
// process.
//
// Allocation counting: exactly one translation unit of a program defines
// AKT_BENCH_REPLACE_OPERATOR_NEW before including this header. That unit then replaces every
// form of the global operator new and delete (plain, array, aligned, nothrow, sized) with
// versions that count calls in per-thread counters and are backed by malloc / aligned_alloc /
// free. Every other unit (and a program that defines nothing) sees only the counter's accessor.

#include <dirent.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <akt/actor/actor_system.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace akt_bench {

// Settings from the environment, to measure what they gain or cost a shape on this machine with
// one binary: AKT_BENCH_SPIN_ROUNDS=<n> (n > 0) sets system_config::spin_rounds (the
// dispatcher's idle spin); AKT_BENCH_IO_POLL_US=<us> sets remote_config::io_poll of a node;
// AKT_BENCH_HTTP_HISTORY=<n> sets http_config::history_samples where the endpoint is on (0: no
// sampler thread), to measure what the sampler costs.
// Observability for the A/B overhead variants (issue 21; docs/benchmarks.md, "Observability"):
// a variant sets the mode for the run of its shape, and every system the shape builds goes
// through with_env_overrides, so the shape's code is the same in both variants.
//   metrics_http: the runtime's metrics on and the HTTP endpoint listening (127.0.0.1, a free
//     port); nothing scrapes during the run (a scrape's own cost is MetricsScrape100kActors).
//   tracing_unsampled: tracing on with sampling ratio 0 and a sink: no message is traced, so
//     what is measured is the test every send and turn pays for tracing being possible.
enum class observe_mode { off, metrics_http, tracing_unsampled };
inline observe_mode& current_observe_mode() {
  static observe_mode mode = observe_mode::off;  // set and read by the benchmark thread only
  return mode;
}
struct observed {
  explicit observed(observe_mode m) { current_observe_mode() = m; }
  ~observed() { current_observe_mode() = observe_mode::off; }
  observed(const observed&) = delete;
  observed& operator=(const observed&) = delete;
};

inline akt::system_config with_env_overrides(akt::system_config cfg) {
  switch (current_observe_mode()) {
    case observe_mode::off:
      break;
    case observe_mode::metrics_http:
      cfg.metrics.enabled = true;
      cfg.http = akt::http_config{};
      if (const char* e = std::getenv("AKT_BENCH_HTTP_HISTORY")) {
        cfg.http->history_samples = static_cast<std::size_t>(std::strtoul(e, nullptr, 10));
      }
      break;
    case observe_mode::tracing_unsampled: {
      akt::tracing_config t;
      t.sampling_ratio = 0.0;
      t.sink = [](const akt::span_data&) {};
      cfg.tracing = std::move(t);
      break;
    }
  }
  if (const char* e = std::getenv("AKT_BENCH_SPIN_ROUNDS")) {
    const long v = std::strtol(e, nullptr, 10);
    if (v > 0) cfg.spin_rounds = static_cast<unsigned>(v);
  }
  if (const char* e = std::getenv("AKT_BENCH_IO_POLL_US"); e != nullptr && cfg.remote) {
    const long v = std::strtol(e, nullptr, 10);
    if (v > 0) cfg.remote->io_poll = std::chrono::microseconds(v);
  }
  return cfg;
}

// ---------------------------------------------------------------------------------------------
// Allocation counter

// The kernel's id of the calling thread (what /proc/self/task lists).
inline int current_tid() noexcept { return static_cast<int>(::syscall(SYS_gettid)); }

namespace detail {
// One pair of counters per live thread: a single pair shared by every thread turned each
// allocation into a cache-line transfer between cores, which slowed the multi-threaded shapes
// in proportion to how often they allocate and so measured the counter rather than akt. A thread
// claims a free slot on its first allocation and frees it when it exits, so that the remote
// shapes (two actor systems per run, a dozen threads each, created afresh for every run) can
// attribute allocations to threads; only more than k_count_slots live threads share slots.
// Counters: writers are the replaced operator new / delete of the slot's threads (relaxed
// fetch_add); readers the timing thread, before and after a timed region (relaxed: the region's
// own synchronisation orders them).
// owner: the kernel thread id holding the slot, 0 when free. Written by a claiming thread (CAS
// from 0) and by its exit (store 0); read by claimers and by per-thread snapshots (relaxed: a
// snapshot is taken while no thread starts or exits).
struct alignas(64) count_slot {
  std::atomic<std::uint64_t> allocations{0};
  std::atomic<std::uint64_t> deallocations{0};
  std::atomic<int> owner{0};
  std::atomic<bool> shared{false};  // a second live thread was given this slot
};
// Bounds the sum's cost (and the live threads told apart); more live threads share slots.
constexpr std::size_t k_count_slots = 128;
inline count_slot count_slots[k_count_slots];
inline std::atomic<std::size_t> next_count_slot{0};

inline count_slot* claim_count_slot() noexcept {
  const int tid = current_tid();
  const std::size_t start = next_count_slot.fetch_add(1, std::memory_order_relaxed);
  for (std::size_t k = 0; k < k_count_slots; ++k) {
    count_slot& s = count_slots[(start + k) % k_count_slots];
    int expected = 0;
    if (s.owner.load(std::memory_order_relaxed) == 0 &&
        s.owner.compare_exchange_strong(expected, tid, std::memory_order_relaxed)) {
      s.shared.store(false, std::memory_order_relaxed);
      return &s;
    }
  }
  count_slot& s = count_slots[start % k_count_slots];
  s.shared.store(true, std::memory_order_relaxed);
  return &s;
}

// Frees its thread's slot when the thread exits. Allocations the exiting thread still makes
// after this (later thread_local destructors) land in the slot it held: at most a handful, at
// thread exit, never inside a timed region.
struct count_slot_release {
  count_slot* slot;
  ~count_slot_release() {
    if (!slot->shared.load(std::memory_order_relaxed))
      slot->owner.store(0, std::memory_order_relaxed);
  }
};

// The calling thread's slot, claimed on its first allocation. Allocates nothing through operator
// new (registering the thread_local destructor uses the C library's calloc).
inline count_slot& my_count_slot() noexcept {
  thread_local count_slot* slot = claim_count_slot();
  thread_local count_slot_release release{slot};
  return *slot;
}
}  // namespace detail

// Heap allocations through operator new since program start (0 unless the program replaced
// operator new, see above).
inline std::uint64_t allocation_count() noexcept {
  std::uint64_t n = 0;
  for (const auto& s : detail::count_slots) n += s.allocations.load(std::memory_order_relaxed);
  return n;
}
inline std::uint64_t deallocation_count() noexcept {
  std::uint64_t n = 0;
  for (const auto& s : detail::count_slots) n += s.deallocations.load(std::memory_order_relaxed);
  return n;
}

// Allocations per thread: a snapshot of every slot's owner and count (allocates nothing). Take
// one before and one after a timed region, with no thread starting or exiting in between, and
// the difference per owner is what that thread allocated. A shared slot (more live threads than
// slots) reports owner -1.
struct thread_allocations {
  int owner[detail::k_count_slots];
  std::uint64_t allocations[detail::k_count_slots];

  void take() noexcept {
    for (std::size_t i = 0; i < detail::k_count_slots; ++i) {
      const detail::count_slot& s = detail::count_slots[i];
      owner[i] =
          s.shared.load(std::memory_order_relaxed) ? -1 : s.owner.load(std::memory_order_relaxed);
      allocations[i] = s.allocations.load(std::memory_order_relaxed);
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Small helpers

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

inline unsigned hardware_threads() noexcept {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

// Producer threads / pairs of the multi-threaded shapes: hardware_concurrency, or the positive
// integer in the environment variable AKT_BENCH_PAIRS (to try more pairs than cores, or fewer).
// The actor system's worker count is not affected.
inline unsigned pair_count() noexcept {
  if (const char* e = std::getenv("AKT_BENCH_PAIRS")) {
    const long v = std::strtol(e, nullptr, 10);
    if (v > 0 && v <= 4096) return static_cast<unsigned>(v);
  }
  return hardware_threads();
}

// Bytes the process holds on the glibc heap: chunks in use in every arena plus mmap-ed chunks
// (large blocks, such as a big hash table or vector, bypass the arenas).
inline std::size_t heap_in_use() noexcept {
  const struct mallinfo2 mi = ::mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

// Bytes of the process resident in memory (the resident set, /proc/self/statm), or 0 when it
// cannot be read. Unlike heap_in_use it includes what malloc keeps but does not use.
inline std::size_t resident_bytes() noexcept {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0;
  unsigned long resident = 0;
  const int got = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  if (got != 2) return 0;
  return static_cast<std::size_t>(resident) * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// ---------------------------------------------------------------------------------------------
// CPU time (nanoseconds): none of these allocate through operator new.

// CPU time of the whole process, every thread (user + system).
inline std::uint64_t process_cpu_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// CPU time of thread `tid` of process `pid` (0: this process), from
// /proc/<pid>/task/<tid>/schedstat (its first field: nanoseconds on a CPU); 0 when unreadable
// (the thread exited).
inline std::uint64_t thread_cpu_ns(int tid, int pid = 0) noexcept {
  char path[96];
  if (pid == 0)
    std::snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
  else
    std::snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", pid, tid);
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return 0;
  unsigned long long ns = 0;
  const int got = std::fscanf(f, "%llu", &ns);
  std::fclose(f);
  return got == 1 ? static_cast<std::uint64_t>(ns) : 0;
}

// Context switches of thread `tid` of this process so far, voluntary (it blocked: a sleep, a
// futex or socket wait) plus involuntary (preempted), from /proc/self/task/<tid>/status; 0 when
// unreadable. A thread that sleeps and is woken again counts one switch.
inline std::uint64_t thread_context_switches(int tid) noexcept {
  char path[96];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return 0;
  char line[256];
  std::uint64_t n = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long v = 0;
    if (std::sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1 ||
        std::sscanf(line, "nonvoluntary_ctxt_switches: %llu", &v) == 1)
      n += v;
  }
  std::fclose(f);
  return n;
}

// Context switches of every thread of this process so far (getrusage: threads that exited too).
inline std::uint64_t process_context_switches() noexcept {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<std::uint64_t>(u.ru_nvcsw) + static_cast<std::uint64_t>(u.ru_nivcsw);
}

// The kernel ids of the threads of process `pid` (0: this process), at most `cap` of them;
// returns how many were written.
inline std::size_t list_threads(int* out, std::size_t cap, int pid = 0) noexcept {
  char path[64];
  if (pid == 0)
    std::snprintf(path, sizeof path, "/proc/self/task");
  else
    std::snprintf(path, sizeof path, "/proc/%d/task", pid);
  DIR* d = ::opendir(path);
  if (d == nullptr) return 0;
  std::size_t n = 0;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    if (n < cap) out[n++] = std::atoi(e->d_name);
  }
  ::closedir(d);
  return n;
}

// CPU time of another process, every live thread (threads that exited are not counted: measure
// a steady state, not a process that starts and ends threads).
inline std::uint64_t other_process_cpu_ns(int pid) noexcept {
  constexpr std::size_t k_max_threads = 1024;  // bounds the stack array below
  int tids[k_max_threads];
  const std::size_t n = list_threads(tids, k_max_threads, pid);
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += thread_cpu_ns(tids[i], pid);
  return sum;
}

// The q-quantile (0..1) of v (sorted in place), nearest-rank.
inline std::uint64_t percentile(std::vector<std::uint64_t>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(q * static_cast<double>(v.size()));
  if (rank >= v.size()) rank = v.size() - 1;
  return v[rank];
}

// ---------------------------------------------------------------------------------------------
// completion: counts the messages one receiver (or a set of receivers) has processed and lets
// one waiting thread sleep until a cumulative target is reached.
//
// Contract
// - note(): from the receivers' handlers, any thread, any number concurrently (one fetch_add);
//   wakes the waiter (a futex call) only on the message that reaches the current target.
// - wait_for(t): one waiting thread at a time. Returns once processed() >= t. Targets are
//   cumulative (processed only grows), so a batch of n is waited for with
//   wait_for(processed_before + n).
// - Ordering: note's fetch_add and target load, and wait_for's target store and processed load,
//   are seq_cst, so either the receiver that reaches t sees the new target (and bumps `hits`), or
//   the waiter sees processed >= t without sleeping. A stale hit from an earlier target only
//   causes a spurious wake-up; the waiter re-checks processed.
struct alignas(64) completion {
  // Writers: receivers (fetch_add). Readers: the waiter, window-limited producers.
  std::atomic<std::uint64_t> processed{0};
  // Writer: the waiter. Reader: receivers, after each fetch_add.
  alignas(64) std::atomic<std::uint64_t> target{~std::uint64_t{0}};
  // Writers: the receiver that reached the target (fetch_add + notify). Reader: the waiter.
  std::atomic<std::uint32_t> hits{0};

  void note() noexcept {
    const std::uint64_t n = processed.fetch_add(1, std::memory_order_seq_cst) + 1;
    if (n == target.load(std::memory_order_seq_cst)) {
      hits.fetch_add(1, std::memory_order_release);
      hits.notify_all();
    }
  }

  std::uint64_t count() const noexcept { return processed.load(std::memory_order_acquire); }

  void wait_for(std::uint64_t t) noexcept {
    std::uint32_t seen = hits.load(std::memory_order_acquire);
    target.store(t, std::memory_order_seq_cst);
    // A short spin first: a waiter that went to sleep for every batch would measure the futex.
    for (int i = 0; i < 2000; ++i) {
      if (processed.load(std::memory_order_seq_cst) >= t) return;
      cpu_relax();
    }
    while (processed.load(std::memory_order_seq_cst) < t) {
      hits.wait(seen, std::memory_order_acquire);
      seen = hits.load(std::memory_order_acquire);
    }
  }
};

// ---------------------------------------------------------------------------------------------
// thread_team: n persistent threads that run body(index) once per round. The threads are created
// once (outside any timed region) and sleep on a futex between rounds.
//
// Contract: start_round / wait_round / stop from one controlling thread only; a round must be
// waited for before the next starts. body runs on the team's threads.
class thread_team {
 public:
  thread_team(unsigned n, std::function<void(unsigned)> body) : body_(std::move(body)) {
    threads_.reserve(n);
    for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this, i] { loop(i); });
  }
  ~thread_team() { stop(); }
  thread_team(const thread_team&) = delete;
  thread_team& operator=(const thread_team&) = delete;

  unsigned size() const noexcept { return static_cast<unsigned>(threads_.size()); }

  void start_round() noexcept {
    done_.store(0, std::memory_order_relaxed);
    round_.fetch_add(1, std::memory_order_release);
    round_.notify_all();
  }
  // Waits until every thread has finished this round's body.
  void wait_round() noexcept {
    const auto n = static_cast<std::uint32_t>(threads_.size());
    for (;;) {
      const std::uint32_t d = done_.load(std::memory_order_acquire);
      if (d >= n) return;
      done_.wait(d, std::memory_order_acquire);
    }
  }
  void run_round() noexcept {
    start_round();
    wait_round();
  }
  void stop() {
    if (threads_.empty()) return;
    quit_.store(true, std::memory_order_relaxed);
    round_.fetch_add(1, std::memory_order_release);
    round_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void loop(unsigned index) {
    std::uint32_t seen = 0;
    for (;;) {
      std::uint32_t r = round_.load(std::memory_order_acquire);
      while (r == seen) {
        round_.wait(r, std::memory_order_acquire);
        r = round_.load(std::memory_order_acquire);
      }
      seen = r;
      if (quit_.load(std::memory_order_relaxed)) return;
      body_(index);
      done_.fetch_add(1, std::memory_order_acq_rel);
      done_.notify_all();
    }
  }

  std::function<void(unsigned)> body_;
  std::vector<std::thread> threads_;
  // Writer: the controller (fetch_add, release). Readers: team threads (acquire): a new round.
  alignas(64) std::atomic<std::uint32_t> round_{0};
  // Writers: team threads (fetch_add). Reader: the controller. Reset by start_round.
  alignas(64) std::atomic<std::uint32_t> done_{0};
  std::atomic<bool> quit_{false};
};

}  // namespace akt_bench

// ---------------------------------------------------------------------------------------------
// Replacement operator new / delete (one translation unit only).

#if defined(AKT_BENCH_REPLACE_OPERATOR_NEW)

namespace akt_bench::detail {
inline void* counted_malloc(std::size_t n) noexcept {
  my_count_slot().allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
inline void* counted_aligned(std::size_t n, std::align_val_t al) noexcept {
  my_count_slot().allocations.fetch_add(1, std::memory_order_relaxed);
  auto a = static_cast<std::size_t>(al);
  if (a < sizeof(void*)) a = sizeof(void*);
  // aligned_alloc wants a size that is a multiple of the alignment.
  const std::size_t size = n == 0 ? a : (n + a - 1) / a * a;
  return std::aligned_alloc(a, size);
}
inline void counted_free(void* p) noexcept {
  if (p == nullptr) return;
  my_count_slot().deallocations.fetch_add(1, std::memory_order_relaxed);
  std::free(p);
}
}  // namespace akt_bench::detail

void* operator new(std::size_t n) {
  if (void* p = akt_bench::detail::counted_malloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = akt_bench::detail::counted_malloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t al) {
  if (void* p = akt_bench::detail::counted_aligned(n, al)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t al) {
  if (void* p = akt_bench::detail::counted_aligned(n, al)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return akt_bench::detail::counted_malloc(n);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return akt_bench::detail::counted_malloc(n);
}
void* operator new(std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  return akt_bench::detail::counted_aligned(n, al);
}
void* operator new[](std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  return akt_bench::detail::counted_aligned(n, al);
}

void operator delete(void* p) noexcept { akt_bench::detail::counted_free(p); }
void operator delete[](void* p) noexcept { akt_bench::detail::counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { akt_bench::detail::counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { akt_bench::detail::counted_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { akt_bench::detail::counted_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { akt_bench::detail::counted_free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  akt_bench::detail::counted_free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  akt_bench::detail::counted_free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  akt_bench::detail::counted_free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  akt_bench::detail::counted_free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  akt_bench::detail::counted_free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  akt_bench::detail::counted_free(p);
}

#endif  // AKT_BENCH_REPLACE_OPERATOR_NEW
