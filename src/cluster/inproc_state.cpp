// The data of an in-process store (inproc_state.hpp): etcd 3.4's semantics for keys, leases,
// conditional rounds, history and watches.

#include "cluster/inproc_state.hpp"

#include <algorithm>
#include <string_view>

#include "akt/core/assert.hpp"

namespace akt::cluster::detail {

namespace {
// etcd's MaxLeaseTTL (it refuses a longer one): also keeps now + TTL within the clock's range.
constexpr std::chrono::seconds k_max_lease_ttl{9'000'000'000};

bool has_prefix(std::string_view key, std::string_view prefix) {
  return key.substr(0, prefix.size()) == prefix;
}
}  // namespace

inproc_state::inproc_state(inproc_store_options options)
    : clock_(options.clock ? std::move(options.clock) : std::make_shared<steady_store_clock>()),
      history_revisions_(std::max<revision>(options.history_revisions, 0)) {
  expiry_ = std::thread([this] { expiry_loop(); });
  clock_->subscribe(*this);
}

inproc_state::~inproc_state() {
  clock_->unsubscribe(*this);  // after this, no advance() calls time_moved()
  {
    std::lock_guard lk(mutex_);
    stop_ = true;
    cv_.notify_all();
  }
  expiry_.join();
}

void inproc_state::time_moved() {
  std::lock_guard lk(mutex_);
  expire_due_locked(clock_->now());
}

void inproc_state::expiry_loop() {
  std::unique_lock lk(mutex_);
  while (!stop_) {
    expire_due_locked(clock_->now());
    if (clock_->tells_moves()) {
      cv_.wait(lk);  // time_moved() expires leases on the thread that moves the clock
    } else if (!clock_->follows_real_time()) {
      cv_.wait_for(lk, inproc_store_defaults::clock_poll);
    } else if (expiries_.empty()) {
      cv_.wait(lk);
    } else {
      cv_.wait_until(lk, expiries_.begin()->first);
    }
  }
}

void inproc_state::expire_due_locked(store_clock::time_point now) {
  while (!expiries_.empty() && expiries_.begin()->first <= now) {
    end_lease_locked(leases_.find(expiries_.begin()->second));
  }
}

void inproc_state::end_lease_locked(std::map<lease_id, lease_entry>::iterator it) {
  AKT_ASSERT(it != leases_.end());
  lease_entry& l = it->second;
  expiries_.erase({l.expires, it->first});
  if (!l.keys.empty()) {
    const revision rev = current_ + 1;
    std::vector<watch_event> events;
    events.reserve(l.keys.size());
    for (const std::string& k : l.keys) {
      keys_.erase(k);
      watch_event e;
      e.what = watch_event::kind::del;
      e.kv.key = k;
      e.kv.mod_revision = rev;
      events.push_back(std::move(e));
    }
    current_ = rev;
    publish_locked(rev, std::move(events));
  }
  leases_.erase(it);
}

result<lease_grant> inproc_state::grant(std::chrono::seconds ttl) {
  std::lock_guard lk(mutex_);
  const auto now = clock_->now();
  expire_due_locked(now);
  if (ttl > k_max_lease_ttl) {
    return error(errc::invalid_argument,
                 "lease TTL above " + std::to_string(k_max_lease_ttl.count()) + " s");
  }
  ttl = std::max(ttl, std::chrono::seconds(store_limits::min_lease_ttl));
  const lease_id id = next_lease_++;
  lease_entry& l = leases_[id];
  l.ttl = ttl;
  l.expires = now + ttl;
  expiries_.emplace(l.expires, id);
  cv_.notify_all();  // the expiry thread may sleep past this lease's end
  return lease_grant{id, ttl};
}

result<keep_alive_ack> inproc_state::keep_alive(lease_id id) {
  std::lock_guard lk(mutex_);
  const auto now = clock_->now();
  expire_due_locked(now);
  auto it = leases_.find(id);
  if (it == leases_.end()) return error(errc::lease_not_found);
  lease_entry& l = it->second;
  expiries_.erase({l.expires, id});
  l.expires = now + l.ttl;
  expiries_.emplace(l.expires, id);
  return keep_alive_ack{l.ttl};
}

result<void> inproc_state::revoke(lease_id id) {
  std::lock_guard lk(mutex_);
  expire_due_locked(clock_->now());
  auto it = leases_.find(id);
  if (it == leases_.end()) return error(errc::lease_not_found);
  end_lease_locked(it);
  return {};
}

range_result inproc_state::read(const std::string& key, bool prefix) {
  std::lock_guard lk(mutex_);
  expire_due_locked(clock_->now());
  range_result r;
  r.header_revision = current_;
  if (!prefix) {
    if (auto it = keys_.find(key); it != keys_.end()) r.kvs.push_back(it->second);
    return r;
  }
  for (auto it = keys_.lower_bound(key); it != keys_.end() && has_prefix(it->first, key); ++it) {
    r.kvs.push_back(it->second);
  }
  return r;
}

result<std::vector<op_outcome>> inproc_state::commit(std::span<const store_op> ops) {
  std::lock_guard lk(mutex_);
  expire_due_locked(clock_->now());
  std::vector<op_outcome> out;
  out.reserve(ops.size());
  for (std::size_t begin = 0; begin < ops.size(); begin += store_limits::max_ops_per_round) {
    const std::size_t n = std::min(store_limits::max_ops_per_round, ops.size() - begin);
    error failed;
    commit_round_locked(ops.subspan(begin, n), out, failed);
    if (failed) return failed;
  }
  return out;
}

void inproc_state::commit_round_locked(std::span<const store_op> ops, std::vector<op_outcome>& out,
                                       error& failed) {
  // etcd 3.4 refuses ("duplicate key given in txn request") a txn in which an op that puts a
  // key follows another put or a delete of that key; a delete after a put, and two deletes,
  // pass (its checkIntervals, in the ops' order).
  {
    std::set<std::string_view> puts, dels;
    for (const store_op& op : ops) {
      if (op.what == store_op::kind::delete_if_created_at) {
        dels.insert(op.key);
      } else if (puts.contains(op.key) || dels.contains(op.key)) {
        failed = error(errc::invalid_argument, "one round writes key " + op.key + " twice");
        return;
      } else {
        puts.insert(op.key);
      }
    }
  }
  // Every condition against the state before the round (etcd evaluates all the compares of a
  // txn first), and the leases of the writes they allow.
  std::vector<bool> holds(ops.size());
  bool any = false;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const store_op& op = ops[i];
    auto it = keys_.find(op.key);
    if (op.what == store_op::kind::put_if_absent) {
      holds[i] = it == keys_.end();
    } else {
      holds[i] = it != keys_.end() && it->second.create_revision == op.expected_create_revision;
    }
    if (holds[i] && op.what != store_op::kind::delete_if_created_at && op.lease != 0 &&
        !leases_.contains(op.lease)) {
      failed = error(errc::lease_not_found, "lease " + std::to_string(op.lease));
      return;
    }
    any = any || holds[i];
  }
  // Then the ops in order, as etcd runs a txn's branches: a failed op reports the key as found
  // at its turn (after the writes of the ops before it in the round).
  const revision rev = any ? current_ + 1 : 0;
  std::vector<watch_event> events;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const store_op& op = ops[i];
    op_outcome o;
    auto it = keys_.find(op.key);
    if (!holds[i]) {
      if (it != keys_.end()) {
        o.current = it->second;
      } else {
        o.current.key = op.key;
      }
      out.push_back(std::move(o));
      continue;
    }
    o.succeeded = true;
    o.applied_revision = rev;
    out.push_back(std::move(o));
    watch_event e;
    if (op.what == store_op::kind::put_if_absent) {
      key_value& kv = keys_[op.key];
      kv = key_value{op.key, op.value, rev, rev, 1, op.lease};
      attach_locked(op.key, op.lease);
      e.kv = kv;
    } else if (op.what == store_op::kind::update_if_created_at) {
      key_value& kv = it->second;
      detach_locked(op.key, kv.lease);
      kv.value = op.value;
      kv.mod_revision = rev;
      kv.version += 1;
      kv.lease = op.lease;
      attach_locked(op.key, op.lease);
      e.kv = kv;
    } else {
      if (it == keys_.end()) continue;  // a second delete of the key in this round: no-op
      detach_locked(op.key, it->second.lease);
      keys_.erase(it);
      e.what = watch_event::kind::del;
      e.kv.key = op.key;
      e.kv.mod_revision = rev;
    }
    events.push_back(std::move(e));
  }
  if (any) {
    current_ = rev;
    publish_locked(rev, std::move(events));
  }
}

void inproc_state::attach_locked(const std::string& key, lease_id lease) {
  if (lease == 0) return;
  auto it = leases_.find(lease);
  AKT_ASSERT(it != leases_.end());
  it->second.keys.insert(key);
}

void inproc_state::detach_locked(const std::string& key, lease_id lease) {
  if (lease == 0) return;
  if (auto it = leases_.find(lease); it != leases_.end()) it->second.keys.erase(key);
}

void inproc_state::publish_locked(revision rev, std::vector<watch_event> events) {
  for (const auto& w : watchers_) {
    if (w->pump_queued || rev < w->next) continue;
    const bool wanted = std::any_of(events.begin(), events.end(), [&](const watch_event& e) {
      return has_prefix(e.kv.key, w->prefix);
    });
    if (wanted) pump_locked(w);
  }
  for (watch_event& e : events) history_.push_back(change{rev, std::move(e)});
  if (history_revisions_ > 0 && current_ - compacted_ > history_revisions_) {
    compact_locked(current_ - history_revisions_);
  }
}

void inproc_state::pump_locked(const std::shared_ptr<watcher>& w) {
  w->pump_queued = true;
  w->core->post_pump(w, [this, w] { return fetch(*w); });
}

void inproc_state::add_watcher(const std::shared_ptr<watcher>& w) {
  std::lock_guard lk(mutex_);
  expire_due_locked(clock_->now());
  if (w->core->cut_off.load(std::memory_order_relaxed)) {
    w->core->post_end(w, error(errc::cluster_registry_timeout), 0, w->core->call_timeout());
    return;
  }
  if (w->from < compacted_) {
    w->core->post_end(w, error(errc::cluster_compacted), compacted_);
    return;
  }
  w->next = w->from;
  watchers_.push_back(w);
  if (w->from <= current_) pump_locked(w);  // history to replay (perhaps none under the prefix)
}

watch_batch inproc_state::fetch(watcher& w) {
  std::lock_guard lk(mutex_);
  w.pump_queued = false;
  watch_batch b;
  if (w.next < compacted_) {
    // The watch fell behind a compaction: what it still had to deliver is gone.
    std::erase_if(watchers_, [&](const auto& p) { return p.get() == &w; });
    b.end = error(errc::cluster_compacted);
    b.compact_revision = compacted_;
    return b;
  }
  auto it = std::lower_bound(history_.begin(), history_.end(), w.next,
                             [](const change& c, revision r) { return c.rev < r; });
  for (; it != history_.end(); ++it) {
    if (b.events.size() >= inproc_store_defaults::max_watch_batch && it->rev > b.header) break;
    if (!has_prefix(it->event.kv.key, w.prefix)) continue;
    b.events.push_back(it->event);
    b.header = it->rev;
  }
  if (it == history_.end()) {
    b.header = current_;
    w.next = current_ + 1;
  } else {
    w.next = b.header + 1;
    for (const auto& p : watchers_) {
      if (p.get() == &w) pump_locked(p);  // the rest in the next batch
    }
  }
  return b;
}

void inproc_state::remove_watcher(const watcher& w) {
  std::lock_guard lk(mutex_);
  std::erase_if(watchers_, [&](const auto& p) { return p.get() == &w; });
}

std::vector<std::shared_ptr<watcher>> inproc_state::remove_watchers_of(const client_core& core) {
  std::lock_guard lk(mutex_);
  std::vector<std::shared_ptr<watcher>> removed;
  std::erase_if(watchers_, [&](const auto& p) {
    if (p->core.get() != &core) return false;
    removed.push_back(p);
    return true;
  });
  return removed;
}

result<void> inproc_state::compact(revision r) {
  std::lock_guard lk(mutex_);
  if (r <= compacted_) {
    return error(errc::cluster_compacted, "already compacted at " + std::to_string(compacted_));
  }
  if (r > current_) {
    return error(errc::invalid_argument, "revision " + std::to_string(r) +
                                             " is above the current " + std::to_string(current_));
  }
  compact_locked(r);
  return {};
}

void inproc_state::compact_locked(revision r) {
  compacted_ = r;
  while (!history_.empty() && history_.front().rev < r) history_.pop_front();
}

revision inproc_state::current_revision() const {
  std::lock_guard lk(mutex_);
  return current_;
}

revision inproc_state::compact_revision() const {
  std::lock_guard lk(mutex_);
  return compacted_;
}

std::size_t inproc_state::lease_count() const {
  std::lock_guard lk(mutex_);
  return leases_.size();
}

}  // namespace akt::cluster::detail
