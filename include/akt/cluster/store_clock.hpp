#pragma once
// The clock an in-process store (akt/cluster/inproc_store.hpp) measures lease lifetimes on:
// injectable, so a test moves lease time instead of sleeping. Call timeouts never use it (a
// call that gets no answer completes after call_timeout of real time).
//
//   auto clock = std::make_shared<akt::cluster::manual_clock>();
//   akt::cluster::inproc_store store({.clock = clock});
//   ...                                  // grant a 2 s lease, put a key on it
//   clock->advance(std::chrono::seconds(3));  // the lease expired before advance returned
//
// Three clocks:
// - steady_store_clock: std::chrono::steady_clock (the default).
// - manual_clock: moves only when advance() is called. advance() tells the stores that use the
//   clock, which expire the leases then due before advance() returns (their delete events are
//   queued for the watchers by then; the completions run later, on the clients' threads).
// - function_clock: reads time from a function, e.g. a test system's virtual time:
//     function_clock([&sys] { return akt::testkit::now(sys); })
//   The store cannot be told when such a clock moves: it looks every
//   inproc_store_defaults::clock_poll of real time.
//
// Contract
// - now(): any thread, concurrently; never blocks (manual_clock: one atomic load). It must
//   never go backwards.
// - advance(): any thread except a store's own threads; it takes the stores' locks, so never
//   from inside a callback that holds a lock a store completion waits for.
// - subscribe()/unsubscribe(): called by the stores (not by users), any thread; unsubscribe()
//   returns after any advance() that is telling that listener has finished with it.
// - Memory: one pointer per subscribed store.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace akt::cluster {

// Told when a clock moves by itself (manual_clock::advance). Implemented by the stores.
class store_clock_listener {
 public:
  virtual ~store_clock_listener() = default;
  // Called on the thread that moved the clock, after now() reads the new time.
  virtual void time_moved() = 0;
};

class store_clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~store_clock() = default;
  virtual time_point now() const = 0;
  // True when now() is steady_clock::now(): a store then sleeps until its next lease is due
  // instead of looking every clock_poll.
  virtual bool follows_real_time() const noexcept { return false; }
  // True when every move is told to the subscribed listeners (manual_clock): a store then
  // never polls it.
  virtual bool tells_moves() const noexcept { return false; }
  virtual void subscribe(store_clock_listener& l) { (void)l; }
  virtual void unsubscribe(store_clock_listener& l) { (void)l; }
};

class steady_store_clock final : public store_clock {
 public:
  time_point now() const override { return std::chrono::steady_clock::now(); }
  bool follows_real_time() const noexcept override { return true; }
};

class manual_clock final : public store_clock {
 public:
  // Starts at `start` (by default the steady clock's reading at construction, so lease times
  // printed next to real ones stay readable).
  explicit manual_clock(time_point start = std::chrono::steady_clock::now());
  time_point now() const override;
  // Moves the time forward by d (d >= 0) and tells every subscribed store.
  void advance(std::chrono::nanoseconds d);
  bool tells_moves() const noexcept override { return true; }
  void subscribe(store_clock_listener& l) override;
  void unsubscribe(store_clock_listener& l) override;

 private:
  // Nanoseconds since the steady clock's epoch. Writer: advance() (fetch_add, release);
  // readers: now() on any thread (acquire), so a listener told of a move reads the new time.
  std::atomic<std::int64_t> now_ns_;
  // Held while listeners are told, so unsubscribe() waits for a running advance().
  std::mutex listeners_mutex_;
  std::vector<store_clock_listener*> listeners_;  // guarded by listeners_mutex_
};

class function_clock final : public store_clock {
 public:
  // f is called from any thread (the stores' threads and their callers), concurrently, under a
  // store's mutex: it must not block or call a store (testkit::now(sys) reads an atomic).
  explicit function_clock(std::function<time_point()> f) : f_(std::move(f)) {}
  time_point now() const override { return f_(); }

 private:
  std::function<time_point()> f_;
};

}  // namespace akt::cluster
