#pragma once
// timer_service: one thread that runs short callbacks at deadlines (ask timeouts, passivation,
// schedules, cron). The runtime's callbacks only enqueue messages; they run no user code.
//
// Contract
// - schedule_at / schedule_after / cancel / pending: any thread, also from inside a callback;
//   before start() too (timers wait until the thread starts). Lock-free: a node comes from a
//   Treiber free list (a mutex only when the slab grows, once per k_chunk_nodes timers) and goes
//   to the timer thread through an MPSC intake stack (one CAS). No global lock per insert.
// - cancel is O(1): one CAS on the node's state word (generation | phase). True exactly when
//   the timer was pending and now never runs. The cancelled node is reclaimed lazily by the
//   timer thread: at its wheel slot (within k_wheel_slots ticks), or when the far-deadline heap
//   is compacted (once cancels since the last compaction reach half of it; the cancel that
//   crosses that mark wakes a sleeping timer thread).
// - Ordering: a callback never runs before its deadline. Callbacks run one at a time on the
//   timer thread in deadline order (ties in any order); a timer scheduled from a callback with a
//   past deadline runs after the current batch. Resolution: 1 ms ticks; a callback normally runs
//   within 1-2 ms after its deadline (tick rounding plus the wake-up latency).
// - Progress: the thread sleeps on a futex until the next deadline (an idle service burns no
//   CPU); a schedule earlier than that deadline wakes it (one waker per sleep).
// - stop(): idempotent and terminal; not from a callback (it joins the timer thread, after the
//   batch of callbacks in progress). Pending timers are dropped (their callbacks are destroyed,
//   never run). After stop, schedule returns an empty handle and cancel false.
//   A schedule racing with stop never runs; its callback is destroyed by stop or the destructor.
// - Memory: sizeof(node) = 56 bytes per timer in the slab, plus 16 bytes in the heap for a
//   deadline more than k_wheel_slots ms away. A cancelled timer keeps its node until reclaimed
//   (see above): the heap holds at most 2 x its live timers + 1024 (k_min_compaction) nodes,
//   the wheel its live timers plus those cancelled within the last 4.1 s. Slab chunks are kept
//   (reused) until destruction. Fixed: wheel heads and bitmap, 16.5 KiB; chunk directory, 32 KiB.
//   A callback that std::function cannot hold inline (libstdc++: over 16 bytes or not trivially
//   copyable) costs one allocation, freed on the timer thread after it runs or is reclaimed.
// - Capacity: k_max_chunks * k_chunk_nodes timers (33.5 million) pending or unreclaimed at once;
//   beyond that schedule returns an empty handle and drops the callback.
// - Handles: generation (32 bits) and node index (32 bits); a stale handle is refused unless its
//   node was reused exactly 2^32 times since.
//
// Manual time (constructed with manual_time = true; system_config::manual_time, the testkit's
// advance). Time is virtual: now() starts on a tick boundary (the steady clock's at
// construction, rounded down) and moves only in advance_time(). There is no timer thread;
// start() starts nothing. advance_time(d) runs the due callbacks on the calling thread, so that
// when it returns every callback due by now() + d has run, with no hand-off to wait for and no
// second thread to race with the test; the timer-thread-only state below is owned by the
// advancing thread under advance_mutex_ (one advancer at a time; stop() takes it too).
// - Order: virtual time steps from one due tick to the next; at each, now() is that tick and its
//   callbacks run in deadline order, so a callback sees the time it was due at and a timer it
//   schedules (a periodic schedule's next fire) lands at the right virtual moment, also within
//   the same advance. After each batch advance_time calls `settle` (the testkit waits there
//   until the system has handled what the batch enqueued, so that the timers those turns arm
//   are armed at that virtual moment too), then re-reads the intake: timers scheduled at or
//   before now() run next, before time moves on.
// - Resolution: a timer is due at the first 1 ms tick at or after its deadline, as in real
//   time; an advance by whole milliseconds is therefore exact.
// - advance_time: any thread but never from a callback or from code that a callback waits for
//   (settle), which would deadlock on advance_mutex_. schedule / cancel / now: any thread, as
//   above. In real-time mode advance_time does nothing.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace akt::detail {

class timer_service {
 public:
  using clock = std::chrono::steady_clock;
  using callback = std::function<void()>;  // runs on the timer thread: short, never blocks
  struct handle {
    std::uint64_t id = 0;
    explicit operator bool() const { return id != 0; }
  };

  // Tick length: the resolution of deadlines.
  static constexpr std::int64_t k_tick_ns = 1'000'000;
  // Wheel size in ticks: deadlines closer than this go to the wheel (O(1)), farther ones to the
  // heap (O(log n)) until they come within range. Bounds how long a cancelled near timer holds
  // its node (4.1 s).
  static constexpr std::uint32_t k_wheel_slots = 4096;
  // Nodes per slab chunk: the growth step (one mutex acquisition per chunk).
  static constexpr std::uint32_t k_chunk_nodes = 8192;
  // Chunk directory size: bounds the number of timers held at once.
  static constexpr std::uint32_t k_max_chunks = 4096;

  // manual_time: virtual time, moved by advance_time (see the contract); no timer thread.
  explicit timer_service(bool manual_time = false);  // does not start a thread
  ~timer_service();                                  // stops
  timer_service(const timer_service&) = delete;
  timer_service& operator=(const timer_service&) = delete;

  void start();  // idempotent; no-op after stop()
  void stop();   // idempotent; pending timers are dropped (not run); joins the thread

  handle schedule_at(clock::time_point when, callback fn);
  handle schedule_after(clock::duration d, callback fn);
  bool cancel(handle h);

  // The service's time: the steady clock, or the virtual time in manual mode. Any thread.
  bool manual_time() const noexcept { return manual_; }
  std::int64_t now_ns() const noexcept {
    if (manual_) return virtual_ns_.load(std::memory_order_acquire);
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch())
        .count();
  }
  clock::time_point now() const noexcept {
    return clock::time_point(
        std::chrono::duration_cast<clock::duration>(std::chrono::nanoseconds(now_ns())));
  }
  // The wall clock matching now() (cron): in manual mode the system clock at construction plus
  // the virtual time elapsed since.
  std::chrono::system_clock::time_point wall_now() const noexcept;
  // Manual time: moves now() forward by d, running every callback due on the way on this thread
  // (see the contract), calling settle() after each batch. Returns the callbacks run.
  std::size_t advance_time(clock::duration d, const std::function<void()>& settle = {});

  // Timers scheduled and not yet fired, cancelled or dropped (approximate under concurrency).
  std::size_t pending() const noexcept;
  // Nodes in use: pending timers plus cancelled ones not yet reclaimed (approximate).
  std::size_t retained() const noexcept;
  // Bytes of slab allocated so far (chunks are kept until destruction).
  std::size_t slab_bytes() const noexcept;
  // Bytes of the slab per timer node.
  static std::size_t node_bytes() noexcept;

 private:
  struct node;
  struct heap_entry {
    std::int64_t deadline_ns;
    std::uint32_t id;
  };

  node& at(std::uint32_t id) const noexcept;
  std::uint32_t allocate();
  void release(std::uint32_t id) noexcept;  // timer thread (and stop): back to the free list
  void push_free_chain(std::uint32_t first, std::uint32_t last) noexcept;
  void wake() noexcept;

  // Timer thread only.
  void run();
  void drain_intake(std::vector<std::uint32_t>& due);
  void insert(std::uint32_t id, std::vector<std::uint32_t>& due);
  void advance(std::int64_t now_tick, std::vector<std::uint32_t>& due);
  void migrate_from_heap(std::vector<std::uint32_t>& due);
  void fire(std::vector<std::uint32_t>& due);
  void maybe_compact_heap();
  std::uint64_t compaction_threshold() const noexcept;
  std::int64_t next_deadline_tick() const noexcept;
  void drop_all() noexcept;

  // ---- shared ----
  // Chunk pointers. Writer: allocate() under grow_mutex_ (release); readers: at() (acquire),
  // ordered before any use of a node id by the free-list push that follows publication.
  std::unique_ptr<std::atomic<node*>[]> chunks_;
  std::mutex grow_mutex_;                      // guards chunk_count_ writes and chunk allocation
  std::atomic<std::uint32_t> chunk_count_{0};  // writer: allocate() under grow_mutex_
  // Free list head: tag (high 32, against ABA) | node id (low 32; 0 empty). Writers: any thread
  // pops (acquire CAS), the timer thread and growth push (release CAS).
  std::atomic<std::uint64_t> free_head_{0};
  // Intake stack head (node id; 0 empty). Writers: schedulers push (seq_cst CAS: it releases the
  // node's fields and is one half of the Dekker pair with sleep_target_); the timer thread takes
  // the whole stack (acq_rel exchange).
  std::atomic<std::uint32_t> intake_{0};
  // The steady-clock nanosecond the timer thread sleeps until; k_awake while it runs.
  // Writers: timer thread (seq_cst store before re-checking intake_), a scheduler that wakes it
  // (CAS to k_awake). Readers: schedulers after pushing (seq_cst): the Dekker pair with intake_.
  std::atomic<std::int64_t> sleep_target_;
  // Futex word bumped by every wake (release); the timer thread waits on the value it read
  // before publishing sleep_target_ (acquire), so a wake in between is never lost.
  std::atomic<std::uint32_t> wake_seq_{0};
  std::atomic<bool> stopping_{
      false};  // writer: stop() (release); reader: the timer thread (acquire)
  std::atomic<bool> stopped_{false};       // writer: stop() (release); readers: schedule (acquire)
  std::atomic<std::int64_t> pending_{0};   // +1 schedule, -1 fire/cancel/drop (relaxed)
  std::atomic<std::int64_t> retained_{0};  // +1 allocate, -1 release (relaxed)
  // Successful cancels. Writer: cancel() (seq_cst RMW), then it reads compact_at_; the timer
  // thread stores compact_at_ and sleep_target_, then reads cancels_ (seq_cst): the Dekker pair
  // that wakes a sleeping thread once a compaction is due.
  std::atomic<std::uint64_t> cancels_{0};
  // The cancels_ value at which the heap is worth compacting (max: empty heap). Writer: the timer
  // thread before sleeping; reader: cancel().
  std::atomic<std::uint64_t> compact_at_{~std::uint64_t{0}};
  std::mutex lifecycle_mutex_;  // start/stop
  std::thread thread_;
  const bool manual_;
  // Manual time: the virtual steady-clock nanosecond. Writer: advance_time under advance_mutex_
  // (release); readers: now_ns on any thread (acquire), so a reader that saw a time also sees
  // what the callbacks due by then did.
  std::atomic<std::int64_t> virtual_ns_{0};
  const std::int64_t virtual_start_ns_;                     // manual time: now() at construction
  const std::chrono::system_clock::time_point wall_start_;  // manual time: the wall clock then
  // Manual time: the owner of the timer-thread-only state (advance_time, stop).
  std::mutex advance_mutex_;

  // ---- timer thread only ----
  std::int64_t processed_tick_ = 0;       // every wheel slot up to this tick has fired
  std::uint64_t wheel_count_ = 0;         // nodes in wheel slots (cancelled ones included)
  std::vector<std::uint32_t> slot_head_;  // k_wheel_slots singly linked lists (node ids)
  std::vector<std::uint64_t> slot_bits_;  // occupied-slot bitmap
  std::vector<heap_entry> heap_;          // min-heap on deadline_ns
  std::uint64_t cancels_at_compaction_ = 0;
  std::uint64_t fired_ = 0;           // callbacks run (advance_time's count)
  std::vector<std::uint32_t> batch_;  // scratch: one slot's nodes, sorted by deadline
};

}  // namespace akt::detail
