// The outbound side towards one peer (association.hpp): calls and their expiry.

#include "remote/association.hpp"

#include <chrono>
#include <utility>
#include <vector>

#include "actor/cell_extras.hpp"
#include "actor/reply_slot.hpp"
#include "actor/system_core.hpp"
#include "remote/peer_services.hpp"

namespace akt::remote::detail {

namespace {
std::int64_t steady_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

std::uint64_t association::register_call(akt::detail::reply_route* route, std::int64_t deadline_ns,
                                         bool control, bool sent, akt::detail::open_span* span) {
  // One clock read per remote ask, and only while metrics are on.
  const std::int64_t asked = !control && ask_seconds_ ? steady_now_ns() : 0;
  std::lock_guard<std::mutex> lock(calls_mutex_);
  const std::uint64_t id = next_call_++;
  const pending_call call{route, deadline_ns, control, sent, asked, span};
  if (spare_calls_.empty()) {
    calls_.emplace(id, call);
    return id;
  }
  call_map::node_type entry = std::move(spare_calls_.back());
  spare_calls_.pop_back();
  entry.key() = id;
  entry.mapped() = call;
  calls_.insert(std::move(entry));
  return id;
}

akt::detail::reply_route* association::take_call(std::uint64_t id, bool failed,
                                                 std::int64_t* asked_ns) {
  akt::detail::reply_route* r = nullptr;
  akt::detail::open_span* span = nullptr;
  {
    std::lock_guard<std::mutex> lock(calls_mutex_);
    auto it = calls_.find(id);
    if (it == calls_.end()) return nullptr;
    call_map::node_type entry = calls_.extract(it);
    r = entry.mapped().route;
    if (asked_ns != nullptr) *asked_ns = entry.mapped().asked_ns;
    span = std::exchange(entry.mapped().span, nullptr);
    if (spare_calls_.size() < k_spare_calls) spare_calls_.push_back(std::move(entry));
  }
  // The client span of a traced ask ends with its answer (or its refusal before it went out).
  if (AKT_UNLIKELY(span != nullptr)) akt::detail::finish_open_span(span, failed);
  return r;
}

void association::complete_call(std::uint64_t id, result<message> value, bool answered) {
  std::int64_t asked = 0;
  akt::detail::reply_route* route = take_call(id, false, &asked);
  if (route == nullptr) return;  // answered already, expired, or failed: a late answer is dropped
  if (asked != 0 && answered)
    ask_seconds_.observe(static_cast<double>(steady_now_ns() - asked) * 1e-9);
  if (!route->complete(value) && value.has_value()) {
    node_.core()->dead_letter(std::move(*value), pid(), pid(), errc::request_timeout);
  }
}

void association::expire_calls(std::int64_t now_ns) {
  std::vector<akt::detail::reply_route*> expired;
  std::vector<akt::detail::open_span*> spans;
  {
    std::lock_guard<std::mutex> lock(calls_mutex_);
    for (auto it = calls_.begin(); it != calls_.end();) {
      if (it->second.deadline_ns != 0 && it->second.deadline_ns <= now_ns) {
        expired.push_back(it->second.route);
        if (it->second.span != nullptr) spans.push_back(it->second.span);
        it = calls_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (akt::detail::open_span* s : spans) akt::detail::finish_open_span(s, true);
  for (akt::detail::reply_route* r : expired) {
    result<message> v(error(errc::request_timeout, "no answer from " + key_ + " in time"));
    (void)r->complete(v);
  }
}

bool association::forgettable(std::chrono::steady_clock::time_point now,
                              std::chrono::milliseconds after) {
  // The dropped proxies are destroyed after the lock is let go: a proxy's destruction releases
  // its reference to this association and must not run under mutex_.
  std::vector<pid> dropped;
  bool idle = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!lost_ || closing_ || now - lost_at_ < after) return false;
    for (const lane_slot& s : lanes_) {
      if (s.state != lane_state::idle || s.conn || !s.backlog.empty()) return false;
    }
    if (!watches_.empty()) return false;
    auto only_cached = [](const pid& p) { return akt::detail::cell_of(p)->ref_count() == 1; };
    for (auto it = proxies_.begin(); it != proxies_.end();) {
      if (!only_cached(it->second)) return false;  // a user holds a proxy: keep all
      dropped.push_back(std::move(it->second));
      it = proxies_.erase(it);
    }
    for (auto it = grain_proxies_.begin(); it != grain_proxies_.end();) {
      if (!only_cached(it->second)) return false;
      dropped.push_back(std::move(it->second));
      it = grain_proxies_.erase(it);
    }
    idle = true;
  }
  std::lock_guard<std::mutex> lock(calls_mutex_);
  return idle && calls_.empty();
}

}  // namespace akt::remote::detail
