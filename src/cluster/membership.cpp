// membership (membership.hpp): join, the member list, keep-alives and the fence.

#include "cluster/membership.hpp"

#include <time.h>

#include <algorithm>
#include <utility>

#include "akt/core/clock.hpp"
#include "cluster/member_record.hpp"
#include "cluster/store_await.hpp"

namespace akt::cluster::detail {

namespace {

using std::chrono::nanoseconds;

// How often the ticker retries what failed (a rejoin, a lost watch): bounds how soon after the
// store returns the node is a member again, and how hard a node hammers a store that is down.
constexpr std::int64_t k_retry_ns = 200'000'000;
// How often join polls a record held by an earlier process of the same name, waiting for its
// lease to expire.
constexpr std::chrono::milliseconds k_name_poll{100};

std::int64_t to_ns(std::chrono::nanoseconds d) { return d.count(); }

}  // namespace

// The watch's events go to the membership (on the store's completion thread).
class membership::member_watch final : public watch_handler {
 public:
  explicit member_watch(membership& m) : m_(m) {}
  void on_events(const std::vector<watch_event>& events, revision header) override {
    m_.on_watch_events(events, header);
  }
  void on_end(error why, revision) override { m_.on_watch_end(std::move(why)); }

 private:
  membership& m_;
};

membership::membership(membership_settings s, std::unique_ptr<store> st, membership_listener& l)
    : settings_(std::move(s)), store_(std::move(st)), listener_(l) {
  watch_handler_ = std::make_unique<member_watch>(*this);
}

membership::~membership() { stop(); }

result<void> membership::join() {
  const std::int64_t give_up = akt::detail::now_ns() + to_ns(settings_.start_wait);
  if (result<void> r = enter(give_up); !r) return r;
  if (result<void> r = read_and_watch(); !r) {
    return error(errc::cluster_unavailable, "reading the members: " + r.error().message());
  }
  ticker_ = std::thread([this] { run_ticker(); });
  return {};
}

result<void> membership::enter(std::int64_t give_up_ns) {
  auto left = [&] {
    return nanoseconds(std::max<std::int64_t>(give_up_ns - akt::detail::now_ns(), 1'000'000));
  };
  // The lease is valid from the send time of its grant, and then of each keep-alive the store
  // acknowledged while the name is waited for.
  std::int64_t granted_at = akt::detail::now_ns();
  result<lease_grant> g = await_store<lease_grant>(
      [&](store_callback<lease_grant> done) { store_->grant_lease(settings_.ttl, done); }, left());
  if (!g) {
    return error(errc::cluster_unavailable,
                 "no lease from the store within the start wait: " + g.error().message());
  }
  member me;
  me.name = settings_.node;
  me.address = settings_.address;
  me.incarnation = settings_.incarnation;
  me.epoch = g->id;
  me.roles = settings_.roles;
  me.grain_kinds = settings_.kinds;
  me.http = settings_.http;
  const std::string key = member_key(settings_.cluster, settings_.node);
  const std::string record = encode_member(me);
  revision put_revision = 0;
  for (;;) {
    result<op_outcome> put = await_store<op_outcome>(
        [&](store_callback<op_outcome> done) { store_->put_if_absent(key, record, g->id, done); },
        left());
    if (!put) {
      (void)await_store<void>([&](store_callback<void> d) { store_->revoke_lease(g->id, d); },
                              left());
      return error(errc::cluster_unavailable,
                   "writing the member record: " + put.error().message());
    }
    if (put->succeeded) {
      put_revision = put->applied_revision;
      break;
    }
    // The name is held: by an earlier process of this node (its lease runs out within its TTL,
    // or the operator said it is gone), or by a live member, whose lease never runs out.
    const lease_id holder = put->current.lease;
    bool ours = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ours = holder != 0 && holder == retired_lease_;
    }
    if ((settings_.old_process_gone || ours) && holder != 0 && holder != g->id) {
      (void)await_store<void>([&](store_callback<void> d) { store_->revoke_lease(holder, d); },
                              left());
      continue;
    }
    if (akt::detail::now_ns() >= give_up_ns) {
      (void)await_store<void>([&](store_callback<void> d) { store_->revoke_lease(g->id, d); },
                              left());
      member other;
      (void)decode_member(settings_.node, put->current.value, other);
      return error(errc::invalid_cluster_config,
                   "cluster.node_name: '" + settings_.node + "' is held by a live member (" +
                       (other.address.empty() ? std::string("address unknown") : other.address) +
                       "); a restarted node waits for its old lease at most start_wait, or set "
                       "old_process_gone");
    }
    std::this_thread::sleep_for(k_name_poll);
    // Our own lease must outlive the wait: renew it (nobody else does before the ticker runs).
    const std::int64_t sent = akt::detail::now_ns();
    result<keep_alive_ack> renewed = await_store<keep_alive_ack>(
        [&](store_callback<keep_alive_ack> done) { store_->keep_alive(g->id, done); }, left());
    if (renewed) granted_at = sent;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  lease_ = g->id;
  self_ = me;
  record_revision_ = put_revision;
  fence_reported_ = false;
  const std::uint32_t next = epoch_.load(std::memory_order_relaxed) + 1;
  epoch_.store(next == 0 ? 1 : next, std::memory_order_release);
  // Valid from the grant's send time: the lease cannot have started earlier.
  valid_until_ns_.store(granted_at + to_ns(g->ttl) - to_ns(settings_.margin),
                        std::memory_order_release);
  return {};
}

result<void> membership::read_and_watch() {
  result<range_result> all = await_store<range_result>(
      [&](store_callback<range_result> done) {
        store_->get_prefix(members_prefix(settings_.cluster), done);
      },
      nanoseconds(std::chrono::seconds(30)));
  if (!all) return all.error();
  const std::string prefix = members_prefix(settings_.cluster);
  pending_events ev;
  std::unique_ptr<watch_handle> old_watch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::map<std::string, member> found;
    for (const key_value& kv : all->kvs) {
      member m;
      const std::string_view name = std::string_view(kv.key).substr(prefix.size());
      if (!decode_member(name, kv.value, m).empty()) continue;  // not a record we can read
      found.emplace(m.name, std::move(m));
    }
    for (auto it = members_.begin(); it != members_.end();) {
      if (found.count(it->first) == 0 && it->first != settings_.node) {
        ev.left.push_back(it->second);
        it = members_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& [name, m] : found) apply_member_locked(m, ev);
    last_revision_ = all->header_revision;
    watch_lost_ = false;
    read_again_ = false;
    old_watch = std::move(watch_);
    watch_ = store_->watch(prefix, all->header_revision + 1, *watch_handler_);
    ready_ = true;
  }
  // Outside the lock: cancel waits for a batch being delivered, which takes the lock. What that
  // batch brings is older than the read, and on_watch_events skips it.
  if (old_watch) old_watch->cancel();
  changed_.notify_all();
  deliver(ev);
  return {};
}

void membership::apply_member_locked(const member& m, pending_events& ev) {
  if (m.name == settings_.node) {
    // Our own record: the current one is what we wrote; an older epoch's is history.
    if (m.epoch == lease_) members_[m.name] = m;
    return;
  }
  auto it = members_.find(m.name);
  if (it != members_.end() && it->second.epoch == m.epoch) {
    it->second = m;  // the same membership, updated (load)
    return;
  }
  if (it != members_.end()) ev.left.push_back(it->second);  // a new epoch: left, then joined
  members_[m.name] = m;
  ev.joined.push_back(m);
}

void membership::remove_member_locked(const std::string& name, pending_events& ev) {
  if (name == settings_.node) {
    // Our record went: our lease expired or was revoked. Unless we are leaving, we are no
    // longer a member from this moment, whatever our keep-alive arithmetic says.
    members_.erase(name);
    if (!leaving_) fence_now_locked();
    return;
  }
  auto it = members_.find(name);
  if (it == members_.end()) return;
  ev.left.push_back(it->second);
  members_.erase(it);
}

void membership::on_watch_events(const std::vector<watch_event>& events, revision header) {
  const std::string prefix = members_prefix(settings_.cluster);
  pending_events ev;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Events of revisions seen already (a full read covered them, or a replaced watch delivers
    // late) are skipped. One revision's events (a lease's keys deleted together) come in one
    // batch, so the bound is taken once per batch.
    const revision seen = last_revision_;
    for (const watch_event& e : events) {
      if (e.kv.mod_revision <= seen) continue;
      if (e.kv.key.size() <= prefix.size()) continue;
      const std::string name = e.kv.key.substr(prefix.size());
      if (e.what == watch_event::kind::del) {
        remove_member_locked(name, ev);
      } else {
        member m;
        if (!decode_member(name, e.kv.value, m).empty()) continue;
        apply_member_locked(m, ev);
      }
      last_revision_ = std::max(last_revision_, e.kv.mod_revision);
    }
    last_revision_ = std::max(last_revision_, header);
  }
  changed_.notify_all();
  deliver(ev);
}

void membership::on_watch_end(error why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    watch_lost_ = true;
    read_again_ = read_again_ || why == errc::cluster_compacted;
  }
  changed_.notify_all();
}

void membership::fence_now_locked() {
  valid_until_ns_.store(0, std::memory_order_release);
  changed_.notify_all();
}

void membership::deliver(pending_events& ev) {
  for (const member& m : ev.left) listener_.left(m);
  for (const member& m : ev.joined) listener_.joined(m);
}

void membership::send_keep_alive(std::int64_t now) {
  lease_id lease = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (keep_alive_pending_ || lease_ == 0 || leaving_) return;
    keep_alive_pending_ = true;
    lease = lease_;
  }
  store_->keep_alive(lease, [this, lease, now](result<keep_alive_ack> r) {
    std::lock_guard<std::mutex> lock(mutex_);
    keep_alive_pending_ = false;
    if (lease != lease_) return;  // an answer for a lease we no longer hold
    if (r) {
      // Valid until TTL after the send: the store renewed the lease no earlier than that.
      const std::int64_t until = now + to_ns(r->ttl) - to_ns(settings_.margin);
      std::int64_t cur = valid_until_ns_.load(std::memory_order_relaxed);
      if (cur != 0 && until > cur) valid_until_ns_.store(until, std::memory_order_release);
    } else if (r.error() == errc::lease_not_found) {
      fence_now_locked();  // the store says the lease is gone: not a member any more
    }
    // A timeout proves nothing: the validity runs out by itself if no later one succeeds.
  });
}

void membership::announce_leaving() {
  std::vector<store_op> ops;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (lease_ == 0 || leaving_ || self_.leaving) return;
    self_.leaving = true;  // every later write of the record says so too (update_load, leave)
    ops.push_back(store_op::update_if_created_at(member_key(settings_.cluster, settings_.node),
                                                 encode_member(self_), lease_, record_revision_));
  }
  // Not waited for, and nothing to do with the answer: a load update in flight may land after
  // it without the mark, but the next one (grains deactivate) and leave() write it again.
  store_->commit(std::move(ops), [](result<std::vector<op_outcome>>) {});
}

void membership::update_load() {
  const std::uint64_t load = listener_.load();
  std::vector<store_op> ops;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (record_update_pending_ || lease_ == 0 || leaving_ || load == self_.load) return;
    member next = self_;
    next.load = load;
    ops.push_back(store_op::update_if_created_at(member_key(settings_.cluster, settings_.node),
                                                 encode_member(next), lease_, record_revision_));
    record_update_pending_ = true;
  }
  const lease_id lease = ops.front().lease;
  store_->commit(std::move(ops), [this, lease, load](result<std::vector<op_outcome>> r) {
    std::lock_guard<std::mutex> lock(mutex_);
    record_update_pending_ = false;
    // Not written (a lost lease, our record gone): the next period tries again, or the node
    // is fenced by then.
    if (r && r->size() == 1 && r->front().succeeded && lease == lease_) self_.load = load;
  });
}

void membership::run_ticker() {
  const std::int64_t ttl = to_ns(settings_.ttl);
  const std::int64_t keep_alive_every = ttl / 3;
  const std::int64_t ping_every = ttl / 6;
  std::int64_t next_keep_alive = akt::detail::now_ns() + keep_alive_every;
  std::int64_t next_ping = akt::detail::now_ns();
  std::int64_t next_retry = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    const std::int64_t now = akt::detail::now_ns();
    const std::int64_t until = valid_until_ns_.load(std::memory_order_relaxed);
    if (!leaving_ && now > until && lease_ != 0 && !fence_reported_) {
      // Fenced: the grains of this epoch are dropped as their next message reaches them; the
      // node tells its listener and gives the lease up (it may still be alive in the store:
      // revoked, its claims vanish before this node makes new ones).
      fence_reported_ = true;
      const lease_id old = lease_;
      retired_lease_ = old;
      lease_ = 0;
      lock.unlock();
      listener_.fenced(old);
      store_->revoke_lease(old, [](result<void>) {});
      lock.lock();
      continue;
    }
    if (!leaving_ && lease_ == 0 && now >= next_retry) {
      lock.unlock();
      // Not while the dispatcher is stuck: a node whose workers are all blocked would take a new
      // lease and record only to let it expire again (no keep-alive without the probe), and the
      // others would place grains on it meanwhile that it cannot run. It stays out, like a
      // partitioned node, until the probe is handled again (the pings go on while fenced).
      const bool ok = listener_.dispatcher_healthy(now, ttl / 2) &&
                      enter(now + to_ns(std::chrono::seconds(5))).has_value();
      lock.lock();
      if (ok) {
        const lease_id epoch = lease_;
        read_again_ = true;  // what changed while fenced: read it in full
        watch_lost_ = true;
        next_keep_alive = akt::detail::now_ns() + keep_alive_every;
        next_ping = 0;  // the probe first: the keep-alives need it fresh
        lock.unlock();
        listener_.rejoined(epoch);
        lock.lock();
      } else {
        next_retry = akt::detail::now_ns() + k_retry_ns;
      }
      continue;
    }
    if (watch_lost_ && now >= next_retry) {
      const bool full = read_again_;
      const revision from = last_revision_ + 1;
      lock.unlock();
      bool ok = true;
      if (full) {
        ok = read_and_watch().has_value();
      } else {
        auto w = store_->watch(members_prefix(settings_.cluster), from, *watch_handler_);
        {
          std::lock_guard<std::mutex> again(mutex_);
          std::swap(watch_, w);
          watch_lost_ = false;
        }
        if (w) w->cancel();  // the lost one, outside the lock (see read_and_watch)
      }
      lock.lock();
      if (!ok) next_retry = akt::detail::now_ns() + k_retry_ns;
      continue;
    }
    if (now >= next_ping) {
      next_ping = now + ping_every;
      lock.unlock();
      listener_.ping_dispatcher();
      lock.lock();
      continue;
    }
    if (now >= next_keep_alive && lease_ != 0 && !leaving_) {
      next_keep_alive = now + keep_alive_every;
      lock.unlock();
      // Only while the dispatcher keeps handling the probe: a node whose workers are all stuck
      // is a failed node, and must let its lease run out.
      if (listener_.dispatcher_healthy(now, ttl / 2)) {
        send_keep_alive(now);
        update_load();
      }
      lock.lock();
      continue;
    }
    std::int64_t wake = std::min(next_keep_alive, next_ping);
    if (lease_ != 0 && !fence_reported_ && until > now) wake = std::min(wake, until + 1);
    if (lease_ == 0 || watch_lost_) wake = std::min(wake, std::max(next_retry, now + 1'000'000));
    changed_.wait_for(lock, nanoseconds(std::max<std::int64_t>(wake - now, 100'000)));
  }
}

void membership::leave(std::chrono::steady_clock::time_point deadline,
                       std::vector<std::string>& problems) {
  lease_id lease = 0;
  std::vector<store_op> mark;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    leaving_ = true;
    lease = lease_;
    lease_ = 0;
    if (lease != 0) {
      member next = self_;
      next.leaving = true;
      mark.push_back(store_op::update_if_created_at(member_key(settings_.cluster, settings_.node),
                                                    encode_member(next), lease, record_revision_));
    }
  }
  changed_.notify_all();
  if (lease == 0) return;  // fenced: nothing of ours is left to revoke
  // First the record says the node is leaving: the others then see its departure as a clean one
  // and let its connections answer what they carry (its grains' marked refusals) instead of
  // failing those calls at the revoke. Best effort, bounded: the revoke follows either way.
  {
    const auto mark_limit = std::clamp(
        std::chrono::duration_cast<nanoseconds>(deadline - std::chrono::steady_clock::now()),
        nanoseconds(std::chrono::milliseconds(50)), nanoseconds(std::chrono::seconds(1)));
    (void)await_store<std::vector<op_outcome>>(
        [&](store_callback<std::vector<op_outcome>> done) {
          store_->commit(std::move(mark), std::move(done));
        },
        mark_limit);
  }
  // Tried again until it is answered or the time is up (bounded by the stop's deadline and by
  // 5 s): a store in the middle of a leader election answers a second later.
  auto limit = std::chrono::duration_cast<nanoseconds>(deadline - std::chrono::steady_clock::now());
  limit = std::clamp(limit, nanoseconds(std::chrono::milliseconds(100)),
                     nanoseconds(std::chrono::seconds(5)));
  const auto give_up = std::chrono::steady_clock::now() + limit;
  result<void> r = errc::cluster_registry_timeout;
  while (std::chrono::steady_clock::now() < give_up) {
    const auto left =
        std::chrono::duration_cast<nanoseconds>(give_up - std::chrono::steady_clock::now());
    r = await_store<void>([&](store_callback<void> done) { store_->revoke_lease(lease, done); },
                          left);
    if (r || r.error() != errc::cluster_registry_timeout) break;
  }
  valid_until_ns_.store(0, std::memory_order_release);  // no grain handler after leaving
  if (!r && r.error() != errc::lease_not_found) {
    problems.push_back("cluster: the lease could not be revoked (" + r.error().message() +
                       "); the others see this node leave when it expires");
  }
}

void membership::stop() noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && !ticker_.joinable() && !store_) return;
    stopping_ = true;
  }
  changed_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  std::unique_ptr<watch_handle> w;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    w = std::move(watch_);
  }
  if (w) w->cancel();
  w.reset();
  store_.reset();  // completes what is pending; no callback runs after this
}

lease_id membership::lease() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lease_;
}

bool membership::wait_members(std::size_t n, std::chrono::nanoseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  auto enough = [&] {
    return stopping_ || members_.size() + (members_.count(settings_.node) == 0 ? 1 : 0) >= n;
  };
  return changed_.wait_for(lock, timeout, enough) && !stopping_;
}

bool membership::is_member(const std::string& name, lease_id epoch) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = members_.find(name);
  return it != members_.end() && (epoch == 0 || it->second.epoch == epoch);
}

std::vector<member> membership::members() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<member> out;
  out.reserve(members_.size() + 1);
  for (const auto& [name, m] : members_) out.push_back(m);
  if (members_.count(settings_.node) == 0 && lease_ != 0) {
    out.push_back(self_);  // written, not yet seen back through the read
    std::sort(out.begin(), out.end(),
              [](const member& a, const member& b) { return a.name < b.name; });
  }
  return out;
}

member membership::self() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return self_;
}

bool membership::wait_ready(std::chrono::nanoseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return ready_ || stopping_; }) && ready_;
}

}  // namespace akt::cluster::detail
