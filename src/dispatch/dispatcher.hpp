#pragma once
// dispatcher: a fixed pool of worker threads that run schedulables in turns.
//
// Contract
// - schedule(s): any thread, for an object the caller just moved Idle -> Scheduled (its
//   reference passes to the dispatcher). Lock-free unless the global ring overflows (then a
//   mutex). From a worker of this dispatcher the object goes to that worker's local queue (it is
//   likely hot in that core's cache); from any other thread it is handed straight to a parked
//   worker when there is one, else put on the global queue.
// - Each worker takes work in this order: every 61st take the global queue first (so busy local
//   queues cannot starve newly ready actors), then its local queue, the global queue, half of a
//   sibling's local queue; then it spins a bounded number of rounds (at most half the workers
//   spin at once) and parks. Parked workers burn no CPU.
// - No lost wake-up: a worker announces itself parked (seq_cst) and re-checks the queues; a
//   producer publishes to the global queue (seq_cst count) or its local queue (a seq_cst
//   exchange of the tail, local_run_queue::push_announced) and then reads the parked count and
//   the spinner count. A hand-off claims a parked worker and gives it the object in one CAS. A
//   producer that sees a spinner wakes nobody, so the last spinner to leave with work wakes a
//   parked worker when more is visible: one spinner takes one object.
// - stop(): workers finish what is queued and exit; after the join the dispatcher is closed and
//   schedule() runs turns inline on the caller, so work that arrives late is still processed
//   (for a stopped actor: dead-lettered), never stranded.
// - Quiescence (dispatcher_config::work, set under manual time): the counter it points to
//   holds the objects that are Scheduled or Processing: +1 in schedule(), -1 when a turn ends
//   with the object Idle. A turn schedules what it sends to before its own -1, so with other
//   runtime work counted in the same word (the blocking pool's tasks), zero means that nothing
//   is ready, running or queued anywhere. Unset, it costs one predictable branch.
// - Memory: workers x (local queue + stack), a 4096-slot global ring; the overflow deque only
//   grows when more than 4096 objects are ready at once.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "akt/dispatch/schedulable.hpp"
#include "akt/pool/mpmc_ring.hpp"
#include "dispatch/local_run_queue.hpp"
#include "dispatch/parker.hpp"

namespace akt::detail {

struct dispatcher_config {
  unsigned workers = 0;      // 0: std::thread::hardware_concurrency()
  unsigned throughput = 32;  // messages per turn before an actor yields its worker
  unsigned spin_rounds = 0;  // idle polls before parking; 0: default
  // No worker threads: turns run only when run_one / run_until_idle is called, on the calling
  // thread, in the order actors became ready (the testkit's deterministic mode).
  bool manual = false;
  // Where to count ready and running objects (the system's work counter under manual time, so
  // that the testkit can wait until all is handled); null: not counted.
  std::atomic<std::int64_t>* work = nullptr;
};

struct dispatcher_stats {
  std::uint64_t turns = 0;
  std::uint64_t parks = 0;
  std::uint64_t steals = 0;
  std::uint64_t handoffs = 0;
};

class dispatcher {
 public:
  explicit dispatcher(dispatcher_config cfg);
  ~dispatcher();
  dispatcher(const dispatcher&) = delete;
  dispatcher& operator=(const dispatcher&) = delete;

  // Starts the workers. Each worker keeps a copy of `keep_alive` until its thread ends, so that
  // whatever owns the dispatcher outlives a worker that stop() had to leave behind.
  void start(std::shared_ptr<void> keep_alive = nullptr);
  // Stops the workers and waits for them until `deadline`; workers still inside a turn then
  // (a handler that does not return) are detached and finish on their own. Returns how many
  // were left behind. After this, schedule() runs turns inline on the caller.
  unsigned stop(std::chrono::steady_clock::time_point deadline =
                    std::chrono::steady_clock::time_point::max());
  void schedule(schedulable* s) noexcept;

  // Manual mode: runs one turn of the oldest ready actor on the calling thread (an actor that
  // still has work goes back to the end of the queue). False when nothing is ready.
  bool run_one() noexcept;
  // Manual mode: runs turns until nothing is ready or max_turns ran; returns the turns run.
  std::size_t run_until_idle(std::size_t max_turns = static_cast<std::size_t>(-1)) noexcept;
  bool manual() const noexcept { return manual_; }

  unsigned worker_count() const noexcept { return static_cast<unsigned>(workers_.size()); }
  unsigned throughput() const noexcept { return throughput_; }
  bool on_own_worker() const noexcept;
  // Workers parked right now.
  int parked() const noexcept { return parked_.load(std::memory_order_relaxed); }
  dispatcher_stats stats() const noexcept;

 private:
  struct worker;
  void worker_loop(worker& w);
  schedulable* find_work(worker& w) noexcept;
  schedulable* spin_for_work(worker& w) noexcept;
  schedulable* park_for_work(worker& w) noexcept;
  schedulable* steal(worker& w) noexcept;
  schedulable* pop_global() noexcept;
  void push_global(schedulable* s) noexcept;
  bool has_global_work() const noexcept;
  bool has_visible_work() const noexcept;
  bool try_handoff(schedulable* s) noexcept;
  void notify_work() noexcept;
  // Claims a parked worker (the most recently parked first: its cache is the warmest) by
  // moving its slot from parked to `value`; returns it, or null when none is parked.
  worker* claim_parked(std::uintptr_t value) noexcept;
  void turn_ended() noexcept {  // an object went Idle after its turn
    if (work_ != nullptr) work_->fetch_sub(1, std::memory_order_seq_cst);
  }
  void run(schedulable* s, worker* w) noexcept;
  void run_inline(schedulable* s) noexcept;
  void drain_inline() noexcept;
  worker* this_worker() const noexcept;

  const unsigned throughput_;
  const unsigned spin_rounds_;
  const bool manual_;
  // Counts objects Scheduled or Processing, or null. Writers: schedule (+1) and the end of a
  // turn that left its object Idle (-1), seq_cst so that a +1 made inside a turn precedes that
  // turn's -1 in the one modification order. Reader: its owner (the testkit).
  std::atomic<std::int64_t>* const work_;
  std::vector<std::unique_ptr<worker>> workers_;
  mpmc_ring<schedulable*, 4096> global_;
  std::mutex overflow_mutex_;
  std::deque<schedulable*> overflow_;  // guarded by overflow_mutex_
  // Objects on the global ring or overflow. Writers: producers (+1 after the push, seq_cst),
  // consumers (-1 after the pop). Read by parking workers (seq_cst) and to skip empty polls.
  alignas(cache_line) std::atomic<std::int64_t> global_count_{0};
  // Workers spinning / parked. Writers: workers (and wakers for parked_). seq_cst: see above.
  alignas(cache_line) std::atomic<int> spinning_{0};
  std::atomic<int> parked_{0};
  // Index of the worker that parked last (a hint, relaxed). Writer: parking workers.
  std::atomic<unsigned> last_parked_{0};
  std::atomic<bool> stopping_{false};  // writer: stop (seq_cst); readers: parking workers
  std::atomic<bool> closed_{false};    // writer: stop after the join; readers: producers
  bool started_ = false;
  // Workers that have left their loop; guarded by exit_mutex_, signalled through exited_cv_.
  std::mutex exit_mutex_;
  std::condition_variable exited_cv_;
  unsigned exited_ = 0;
};

}  // namespace akt::detail
