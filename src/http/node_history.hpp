#pragma once
// A node's recent totals, sampled at a fixed interval by a thread of the HTTP endpoint and served
// at /api/history: what a dashboard opened now plots for the last minutes, instead of starting
// its plots empty.
//
// Contract:
// - Threads: the endpoint's sampler thread calls add(); any serving thread calls samples() and
//   json(). One mutex orders them; it is held to store one sample or to copy at most `capacity`
//   of them, never on a message's path (nothing the runtime does waits for it).
// - Order: samples() returns them oldest first, in the order add() stored them.
// - Memory: `capacity` samples (40 bytes each), allocated once at construction; 0 keeps none.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace akt::http::detail {

struct history_sample {
  std::uint64_t time_ms = 0;  // the node's wall clock, ms since the Unix epoch (as /api/node)
  std::uint64_t processed = 0;
  std::uint64_t dead_letters = 0;
  std::uint64_t grains = 0;  // active grains on this node
  std::uint64_t actors = 0;  // live actors
};

class node_history {
 public:
  node_history(std::size_t capacity, std::chrono::milliseconds interval);

  // Stores s, dropping the oldest sample when `capacity` are kept.
  void add(const history_sample& s);
  std::vector<history_sample> samples() const;
  // {"interval_ms":..,"capacity":..,"fields":["t","processed","dead","grains","actors"],
  //  "samples":[[t,processed,dead,grains,actors],...]}: one array per sample keeps 300 of them
  // near 15 KB, well within what /api/member relays.
  std::string json() const;

 private:
  const std::chrono::milliseconds interval_;
  mutable std::mutex mutex_;
  std::vector<history_sample> ring_;  // guarded by mutex_; size() == capacity
  std::size_t next_ = 0;              // guarded by mutex_: where add() writes
  std::size_t size_ = 0;              // guarded by mutex_: samples kept
};

}  // namespace akt::http::detail
