// The manual clock of the in-process store (akt/cluster/store_clock.hpp).

#include "akt/cluster/store_clock.hpp"

#include <algorithm>

#include "akt/core/assert.hpp"

namespace akt::cluster {

manual_clock::manual_clock(time_point start) : now_ns_(start.time_since_epoch().count()) {}

store_clock::time_point manual_clock::now() const {
  return time_point(time_point::duration(now_ns_.load(std::memory_order_acquire)));
}

void manual_clock::advance(std::chrono::nanoseconds d) {
  AKT_ASSERT(d.count() >= 0);
  now_ns_.fetch_add(std::chrono::duration_cast<time_point::duration>(d).count(),
                    std::memory_order_release);
  std::lock_guard lk(listeners_mutex_);
  for (store_clock_listener* l : listeners_) l->time_moved();
}

void manual_clock::subscribe(store_clock_listener& l) {
  std::lock_guard lk(listeners_mutex_);
  listeners_.push_back(&l);
}

void manual_clock::unsubscribe(store_clock_listener& l) {
  std::lock_guard lk(listeners_mutex_);
  std::erase(listeners_, &l);
}

}  // namespace akt::cluster
