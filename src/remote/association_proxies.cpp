// The outbound side towards one peer (association.hpp): proxies and watches.

#include "remote/association.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "actor/cell_extras.hpp"
#include "actor/system_core.hpp"
#include "remote/peer_services.hpp"
#include "remote/remote_cell.hpp"

namespace akt::remote::detail {

namespace {
// Proxies kept per peer before the ones nobody else holds are dropped (a proxy is only a cache
// entry then: the next message from that uid makes a new one).
constexpr std::size_t k_proxy_cache = 4096;
}  // namespace

pid association::proxy(std::uint64_t uid, std::string_view path) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = proxies_.find(uid); it != proxies_.end()) return it->second;
  if (proxies_.size() >= k_proxy_cache) {
    std::erase_if(proxies_, [](const auto& entry) {
      return akt::detail::cell_of(entry.second)->ref_count() == 1;  // only this map holds it
    });
  }
  std::string address = "akt://" + system_ + "@" + key_ + "/";
  if (!path.empty())
    address += path;
  else
    address += "~" + std::to_string(uid);  // a sender known by uid alone
  auto* cell = new remote_cell(node_.core(), address, shared_from_this(), uid,
                               incarnation_.load(std::memory_order_relaxed));
  pid p = akt::detail::share_pid(cell);  // a new cell holds no reference yet
  // Not cached once shut_down cleared the cache: a cached proxy holds this association, which
  // holds the cache, so an entry made after the clear would keep both (and the system's core
  // they reach) alive past the node's end.
  if (!closing_) proxies_.emplace(uid, p);
  return p;
}

pid association::grain_proxy(std::string_view identity, std::int64_t claim_token) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = grain_proxies_.find(std::string(identity)); it != grain_proxies_.end()) {
    const auto* cached = static_cast<const remote_cell*>(akt::detail::cell_of(it->second));
    if (cached->claim_token() == claim_token) return it->second;
    grain_proxies_.erase(it);  // routed by another claim now: a proxy for this one
  }
  if (grain_proxies_.size() >= k_proxy_cache) {
    std::erase_if(grain_proxies_, [](const auto& entry) {
      return akt::detail::cell_of(entry.second)->ref_count() == 1;  // only this map holds it
    });
  }
  std::string address = "akt://" + system_ + "@" + key_ + "/grain/" + std::string(identity);
  auto* cell = new remote_cell(node_.core(), address, shared_from_this(), identity, claim_token);
  pid p = akt::detail::share_pid(cell);  // a new cell holds no reference yet
  if (!closing_) grain_proxies_.emplace(std::string(identity), p);  // as in proxy()
  return p;
}

void association::observe_incarnation(std::uint64_t incarnation) {
  const std::uint64_t known = incarnation_.load(std::memory_order_acquire);
  if (known != 0 && known != incarnation) {
    lose_peer(error(errc::dead, "the node at " + key_ + " restarted"));
    // The outbound lanes still talk to... the restarted node's new process, or not: reconnect.
    std::lock_guard<std::mutex> lock(mutex_);
    for (lane_slot& s : lanes_) {
      if (s.conn) s.conn->close(error(errc::dead, "the peer restarted"));
    }
  }
}

void association::add_watch(const pid& watcher, const pid& target) {
  std::lock_guard<std::mutex> lock(mutex_);
  watches_.push_back({watcher, target});
}

void association::remove_watch(const pid& watcher, const pid& target) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(watches_.begin(), watches_.end(), [&](const watch& w) {
    return w.watcher == watcher && w.target == target;
  });
  if (it != watches_.end()) watches_.erase(it);
}

void association::on_terminated(std::uint64_t uid, std::uint64_t watcher_uid, const error& reason) {
  pid watcher = node_.exports().resolve(watcher_uid);
  pid target;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto pit = proxies_.find(uid);
    if (pit == proxies_.end()) return;
    target = pit->second;
    auto it = std::find_if(watches_.begin(), watches_.end(), [&](const watch& w) {
      return w.target == target && (watcher_uid == 0 || w.watcher == watcher);
    });
    if (it == watches_.end()) return;
    if (!watcher) watcher = it->watcher;
    watches_.erase(it);
  }
  static_cast<remote_cell*>(akt::detail::cell_of(target))->mark_terminated();
  if (watcher) {
    akt::detail::cell_of(watcher)->post_system(akt::detail::terminated_notice{target, reason});
  }
}

}  // namespace akt::remote::detail
