// The grain registry of a cluster node (grain_registry.hpp).

#include "cluster/grain_registry.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <utility>

#include "actor/system_core.hpp"
#include "akt/core/thread.hpp"
#include "akt/remote/serialization.hpp"
#include "cluster/membership.hpp"
#include "cluster/store_await.hpp"
#include "remote/node_lost.hpp"

namespace akt::cluster::detail {

namespace {

using akt::detail::grain_place;

error registry_timeout(const std::string& what) {
  return error(errc::cluster_registry_timeout, what + ": the registry did not answer in time");
}

// The most ops per claim commit: store_limits::max_ops_per_round, unless the environment variable
// AKT_CLAIM_BATCH_MAX holds an integer in 1..max_ops_per_round (read once per process). A
// benchmarking knob, not a user setting: AKT_CLAIM_BATCH_MAX=1 sends every claim and release as a
// commit of its own, so akt_cluster_grain_bench can measure activations without batching
// (docs/benchmarks.md, "Grains in a cluster"). Anything else is ignored.
std::size_t claim_batch_max() {
  static const std::size_t v = [] {
    const char* e = std::getenv("AKT_CLAIM_BATCH_MAX");
    if (e == nullptr) return store_limits::max_ops_per_round;
    char* end = nullptr;
    const long n = std::strtol(e, &end, 10);
    if (end == e || *end != '\0' || n < 1 || n > static_cast<long>(store_limits::max_ops_per_round))
      return store_limits::max_ops_per_round;
    return static_cast<std::size_t>(n);
  }();
  return v;
}

akt::detail::kept_message keep_for_resend(const message& m);

// The seams the grain layer owns: each holds the registry.
class registry_placement final : public akt::detail::grain_placement {
 public:
  explicit registry_placement(std::shared_ptr<grain_registry> r) : r_(std::move(r)) {}
  grain_place place(const grain_identity& id) override { return r_->place(id); }
  akt::detail::kept_message keep(const message& m) override { return keep_for_resend(m); }
  std::optional<grain_place> resend_place(const grain_identity& id, const grain_place& at,
                                          const error& failure) override {
    return r_->resend_place(id, at, failure);
  }

 private:
  std::shared_ptr<grain_registry> r_;
};

class registry_gate final : public akt::detail::grain_activation_gate {
 public:
  explicit registry_gate(std::shared_ptr<grain_registry> r) : r_(std::move(r)) {}
  result<std::int64_t> admit(const grain_identity& id) override { return r_->admit(id); }
  void released(const grain_identity& id) noexcept override { r_->released(id); }

 private:
  std::shared_ptr<grain_registry> r_;
};

// The encoded bytes of a message kept for a second send, decoded again (kept_message).
result<message> decode_kept(std::uint64_t type, const std::vector<unsigned char>& bytes) {
  return akt::remote::decode_message(type, akt::remote::byte_span(bytes.data(), bytes.size()));
}

// What a second send needs: a copy of a copyable value, else the encoded bytes.
akt::detail::kept_message keep_for_resend(const message& m) {
  if (std::optional<message> copy = m.try_clone())
    return akt::detail::kept_message(std::move(*copy));
  result<std::vector<unsigned char>> bytes = akt::remote::encode_message(m);
  const akt::remote::serializer* s = akt::remote::find_serializer(m);
  if (!bytes || s == nullptr) return {};  // the send itself will refuse it
  return akt::detail::kept_message(s->id, std::move(*bytes), &decode_kept);
}

}  // namespace

// The watch of the grains prefix: forwards to the registry on the store's thread.
namespace {
// One store round trip's time into h (no clock read when h is empty: metrics off).
class round_timer {
 public:
  explicit round_timer(const akt::metrics::histogram& h)
      : h_(h),
        start_(h ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{}) {}
  void done() const {
    if (h_)
      h_.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }

 private:
  akt::metrics::histogram h_;
  std::chrono::steady_clock::time_point start_;
};
}  // namespace

grain_registry::metric_handles grain_registry::make_metrics(actor_system& sys) {
  metric_handles m;
  akt::detail::system_core* core = akt::detail::core_of(sys);
  if (!core->config_.metrics.enabled) return m;
  akt::metrics::registry& reg = core->metrics_;
  // A name the user took already with another shape leaves that family out.
  if (auto f = reg.add_counter("akt_cluster_claims_made_total",
                               "Grain claims this node wrote to the registry (put-if-absent "
                               "that succeeded, for this node or another)."))
    m.claims_made = f->with();
  if (auto f = reg.add_counter("akt_cluster_claims_released_total",
                               "Grain claims this node deleted from the registry "
                               "(compare-and-delete that succeeded)."))
    m.claims_released = f->with();
  if (auto f = reg.add_histogram(
          "akt_cluster_registry_seconds",
          "Store round trips of the grain registry, per operation (claim, release, read).",
          akt::metrics::exponential_bounds(0.0001, 2, 18), {"op"})) {
    m.claim_seconds = f->with({"claim"});
    m.release_seconds = f->with({"release"});
    m.read_seconds = f->with({"read"});
  }
  return m;
}

class grain_registry::watcher final : public watch_handler {
 public:
  explicit watcher(grain_registry& r) : r_(r) {}
  void on_events(const std::vector<watch_event>& events, revision header) override {
    r_.on_events(events, header);
  }
  void on_end(error why, revision) override { r_.on_watch_end(std::move(why)); }

 private:
  grain_registry& r_;
};

grain_registry::grain_registry(actor_system& sys, membership& m, grain_registry_settings s)
    : sys_(sys),
      membership_(m),
      settings_(std::move(s)),
      batcher_(std::make_unique<claim_batcher>(m.coordination_store(), claim_batch_max())),
      watcher_(std::make_unique<watcher>(*this)),
      metrics_(make_metrics(sys)) {}

grain_registry::~grain_registry() { close(std::chrono::steady_clock::now()); }

result<void> grain_registry::start() {
  // The prefix's revision now; the watch goes on from the next one. Nothing is read in full: the
  // cache fills with the identities this node routes to.
  result<range_result> r = await_store<range_result>(
      [&](store_callback<range_result> done) {
        membership_.coordination_store().get(grains_prefix(cluster_), std::move(done));
      },
      k_wait * 2);
  if (!r) {
    return error(errc::cluster_unavailable, "the grain registry: " + r.error().message());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    last_revision_ = r->header_revision;
    watch_ = membership_.coordination_store().watch(grains_prefix(cluster_), last_revision_ + 1,
                                                    *watcher_);
  }
  akt::detail::system_core* core = akt::detail::core_of(sys_);
  if (!akt::detail::install_grain_placement(
          core, std::make_unique<registry_placement>(shared_from_this())) ||
      !akt::detail::install_grain_gate(core, std::make_unique<registry_gate>(shared_from_this()))) {
    return error(errc::invalid_cluster_config,
                 "cluster: the grain layer has a placement or a gate already "
                 "(akt::remote::set_grain_placement cannot be combined with a cluster)");
  }
  return {};
}

void grain_registry::close(std::chrono::steady_clock::time_point deadline) noexcept {
  std::unique_ptr<watch_handle> w;
  std::vector<std::unique_ptr<watch_handle>> retired;
  std::unique_ptr<claim_batcher> b;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (closed_) return;
    begin_shutdown();
    // The releases of the grains the shutdown deactivated: let them commit (the lease's revoke
    // would delete them anyway; an explicit release lets callers elsewhere re-claim at once).
    drained_.wait_until(lock, deadline, [&] { return releases_in_flight_ == 0; });
    closed_ = true;
    w = std::move(watch_);
    retired = std::move(retired_);
    b = std::move(batcher_);
  }
  if (w) w->cancel();
  retired.clear();
  b.reset();  // completes what is queued; waits for the commit in flight
}

std::size_t grain_registry::held() const {
  std::size_t n = 0;
  for (const shard& sh : shards_) {
    std::lock_guard<std::mutex> lock(sh.m);
    n += sh.held.size();
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// placement

grain_place grain_registry::remote_place(const grain_identity& id, const owner_entry& e) {
  grain_place at;
  result<pid> target = akt::remote::detail::grain_proxy_on(sys_, e.address, id, e.token);
  if (!target) {  // a record naming an address remoting cannot parse: claim (and lose) instead
    at.at = grain_place::where::claim;
    return at;
  }
  at.at = grain_place::where::remote;
  at.target = std::move(*target);
  at.token = e.token;
  return at;
}

grain_place grain_registry::place_locked(shard& sh, const grain_identity& id, const id_view& v,
                                         owner_entry* make) {
  grain_place at;
  if (auto h = sh.held.find(v); h != sh.held.end()) {
    at.token = h->second;
    return at;  // local: this node holds the claim
  }
  if (auto c = sh.cache.find(v); c != sh.cache.end() && c->second.node != node_) {
    if (c->second.proxy || make == nullptr) {
      if (!c->second.proxy) c->second.proxy = remote_place(id, c->second).target;
      at.at = c->second.proxy ? grain_place::where::remote : grain_place::where::claim;
      at.target = c->second.proxy;
      at.token = c->second.token;
      return at;
    }
    *make = c->second;  // place() makes the proxy without the lock
    at.at = grain_place::where::remote;
    return at;
  }
  at.at = grain_place::where::claim;
  return at;
}

grain_place grain_registry::place(const grain_identity& id) {
  owner_entry make;
  const id_view v = view(id);  // hashed once: the shard, then the bucket
  shard& sh = shard_of(v);
  {
    std::lock_guard<std::mutex> lock(sh.m);
    grain_place at = place_locked(sh, id, v, &make);
    if (at.at != grain_place::where::remote || at.target) return at;
  }
  // The first send to this claim: its proxy (remoting's locks, not the registry's), kept in the
  // entry while it still names that claim.
  grain_place at = remote_place(id, make);
  if (at.at == grain_place::where::remote) {
    std::lock_guard<std::mutex> lock(sh.m);
    if (auto c = sh.cache.find(v); c != sh.cache.end() && c->second.token == make.token)
      c->second.proxy = at.target;
  }
  return at;
}

// ---------------------------------------------------------------------------------------------
// claims

grain_claim_record grain_registry::record_for(const member& owner, const grain_settings* s) {
  grain_claim_record r;
  r.owner = owner.name;
  r.address = owner.address;
  r.epoch = owner.epoch;
  if (s != nullptr) {
    r.role = s->role;
    r.mailbox_capacity = s->mailbox_capacity;
    r.deactivate_after_ns = s->deactivate_after.count();
    r.activation_timeout_ns = s->activation_timeout.count();
    r.activation_attempts = s->activation_attempts;
    r.reentrancy_mode = static_cast<std::uint8_t>(s->reentrancy.mode);
    r.reentrancy_max_in_flight = static_cast<std::uint32_t>(s->reentrancy.max_in_flight);
    if (s->dependencies) r.dependencies = s->dependencies->names();
  }
  return r;
}

bool grain_registry::decode_owner(const key_value& kv, owner_entry& out) const {
  grain_claim_record r;
  if (std::string why = decode_claim(kv.value, r); !why.empty()) {
    // Another version's record, or one changed by hand: a claim all the same (never ours to
    // take over), but not one this node can route to.
    akt::detail::core_of(sys_)->log(
        log_level::warning, "akt.cluster",
        "grain claim " + kv.key + " does not decode (" + why + "): treated as foreign");
    return false;
  }
  out.node = std::move(r.owner);
  out.address = std::move(r.address);
  out.token = kv.create_revision;
  out.lease = kv.lease;
  return true;
}

void grain_registry::cache_locked(shard& sh, const std::string& key, owner_entry e) {
  if (sh.cache.size() >= k_cache_max / k_shards) sh.cache.clear();  // hints only
  sh.cache[key] = std::move(e);
}

result<op_outcome> grain_registry::write(store_op op) {
  return await_batched(std::move(op), mutex_, closed_, batcher_, "the registry is closed", k_wait);
}

error grain_registry::pass_barrier() {
  if (settings_.min_peers == 0 || barrier_open_.load(std::memory_order_acquire)) return {};
  if (akt::detail::on_worker_thread()) {
    return error(errc::cluster_quorum_timeout, "grain activations wait for " +
                                                   std::to_string(settings_.min_peers) +
                                                   " members, and a dispatcher worker cannot wait");
  }
  if (!membership_.wait_members(settings_.min_peers, settings_.barrier_timeout)) {
    return error(errc::cluster_quorum_timeout,
                 "fewer than " + std::to_string(settings_.min_peers) + " members after " +
                     std::to_string(settings_.barrier_timeout.count()) + " ms");
  }
  barrier_open_.store(true, std::memory_order_release);
  return {};
}

std::optional<member> grain_registry::choose_node(const grain_identity& id,
                                                  const grain_settings* settings) {
  const grain_placement_strategy strategy =
      settings != nullptr ? settings->placement : grain_placement_strategy::round_robin;
  const std::string role = settings != nullptr ? settings->role : std::string();
  auto has = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  member self = membership_.self();
  const bool self_fits = settings != nullptr && (role.empty() || has(settings_.roles, role));
  if (strategy == grain_placement_strategy::local && self_fits) return self;
  std::vector<member> candidates;
  for (member& m : membership_.members()) {
    // A member whose record says it is leaving takes no new grains (it would refuse them).
    const bool fits = m.name == node_ ? self_fits
                                      : !m.leaving && has(m.grain_kinds, id.kind) &&
                                            (role.empty() || has(m.roles, role));
    if (!fits) continue;
    if (m.name != node_) {
      candidates.push_back(std::move(m));
      continue;
    }
    // This node as itself (its current lease), but with the load the list holds for it: every
    // candidate's load then comes from the same watch, equally fresh. (self()'s load is set
    // when its record's write completes, which can come before or after the watch shows it: a
    // least-load choice mixing the two could pick this node on a figure older than the rest.)
    member me = self;
    me.load = m.load;
    candidates.push_back(std::move(me));
  }
  if (candidates.empty()) return std::nullopt;
  switch (strategy) {
    case grain_placement_strategy::random: {
      thread_local std::minstd_rand rng(std::random_device{}());
      return candidates[rng() % candidates.size()];
    }
    case grain_placement_strategy::least_load:
      return *std::min_element(candidates.begin(), candidates.end(),
                               [](const member& a, const member& b) { return a.load < b.load; });
    case grain_placement_strategy::local:  // this node cannot host it: in turn among the others
    case grain_placement_strategy::round_robin:
      break;
  }
  return candidates[next_node_.fetch_add(1, std::memory_order_relaxed) % candidates.size()];
}

result<op_outcome> grain_registry::claim_for(const grain_identity& id, const member& owner,
                                             const grain_settings* settings) {
  const std::string key = claim_key(cluster_, id);
  const std::string value = encode_claim(record_for(owner, settings));
  error last = registry_timeout("the claim of " + id.str());
  for (int round = 0; round < k_rounds; ++round) {
    const round_timer timer(metrics_.claim_seconds);
    result<op_outcome> r = write(store_op::put_if_absent(key, value, owner.epoch));
    timer.done();
    if (r) {
      if (r->succeeded && metrics_.claims_made) metrics_.claims_made.inc();
      return r;
    }
    last = r.error();
    // Timed out ("possibly written": the next round finds it), or the lease ended under it.
    if (r.code() != errc::cluster_registry_timeout && r.code() != errc::lease_not_found) break;
    if (r.code() == errc::lease_not_found && owner.name != node_) break;  // that node is gone
  }
  return last;
}

result<std::int64_t> grain_registry::adopt(const grain_identity& id, std::int64_t token) {
  result<std::optional<owner_entry>> found = read_owner(id);
  if (!found) return found.error();
  const lease_id lease = membership_.lease();
  if (!found->has_value() || (*found)->node != node_ || (*found)->token != token ||
      (*found)->lease != lease || lease == 0) {
    return error(errc::not_owner,
                 id.str() + ": this node does not hold the claim " + std::to_string(token));
  }
  shard& sh = shard_of(id);
  std::lock_guard<std::mutex> lock(sh.m);
  sh.held[id.str()] = token;
  sh.cache.erase(id.str());
  return token;
}

result<std::int64_t> grain_registry::admit(const grain_identity& id) {
  if (shutting_down_.load(std::memory_order_acquire))
    return error(errc::system_shutting_down, "the node is shutting down: it takes no new grains");
  const std::string key = id.str();
  if (akt::detail::on_worker_thread()) {
    // The layer never asks here for a claim (see the contract); a worker cannot wait for one.
    shard& sh = shard_of(id);
    std::lock_guard<std::mutex> lock(sh.m);
    if (auto h = sh.held.find(key); h != sh.held.end()) return h->second;
    return error(errc::not_owner, id.str() + ": a claim cannot be made on a dispatcher worker");
  }
  auto settings = akt::detail::grain_kind_settings(akt::detail::core_of(sys_), id.kind);
  if (!settings)
    // Marked: nothing ran and nothing left this node (a caller counts it as not delivered).
    return akt::detail::error_access::mark_refused(
        error(errc::grain_kind_unknown, "this node does not host grain kind " + id.kind));
  if (error e = pass_barrier()) return e;
  // A message routed by a claim another node made for this one: adopt that claim, never make
  // a new one for it.
  if (const std::int64_t token = akt::detail::routed_claim_token(); token != 0)
    return adopt(id, token);
  const lease_id lease = membership_.lease();
  if (lease == 0) return error(errc::not_owner, "this node is fenced: it holds no lease");
  // Where it goes (the kind's placement): here, or claimed for another node, which activates
  // it on the first message routed to it with that claim.
  std::optional<member> owner = choose_node(id, settings.get());
  if (!owner) {
    return error(errc::not_owner, "no member can host " + id.str() + " (kind " + id.kind +
                                      (settings->role.empty() ? "" : ", role " + settings->role) +
                                      ")");
  }
  if (owner->name == node_) owner->epoch = lease;  // the current one, whatever the record says
  result<op_outcome> r = claim_for(id, *owner, settings.get());
  if (!r) return r.error();
  shard& sh = shard_of(id);
  std::lock_guard<std::mutex> lock(sh.m);
  if (r->succeeded && owner->name == node_) {
    sh.held[key] = r->applied_revision;
    sh.cache.erase(key);
    return r->applied_revision;
  }
  owner_entry found;
  if (r->succeeded) {  // claimed for another node: the message goes there
    found = {owner->name, owner->address, r->applied_revision, owner->epoch, pid()};
  } else if (!decode_owner(r->current, found)) {
    return error(errc::not_owner, id.str() + " is claimed by a record this node cannot read");
  } else if (found.node == node_ && r->current.lease == lease) {
    // Ours: an earlier round's write that did commit, or a claim made for this node.
    sh.held[key] = found.token;
    sh.cache.erase(key);
    return found.token;
  }
  std::string who = found.node;
  if (found.node != node_) cache_locked(sh, key, std::move(found));
  return error(errc::not_owner, id.str() + " is owned by node " + who);
}

void grain_registry::released(const grain_identity& id) noexcept {
  try {
    std::int64_t token = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      shard& sh = shard_of(id);
      std::lock_guard<std::mutex> shard_lock(sh.m);
      auto h = sh.held.find(view(id));
      if (h == sh.held.end()) return;
      token = h->second;
      sh.held.erase(h);
      if (closed_) return;  // the lease's revoke deletes it
      ++releases_in_flight_;
    }
    release_async(id, token, 0);
  } catch (...) {  // an allocation: the claim stays until the lease ends
  }
}

// One release counted in releases_in_flight_ (by released()) until its last round completes.
void grain_registry::release_async(const grain_identity& id, std::int64_t token, int round) {
  auto self = shared_from_this();
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_ || !batcher_) {
    if (--releases_in_flight_ == 0) drained_.notify_all();
    return;
  }
  batcher_->submit(store_op::delete_if_created_at(claim_key(cluster_, id), token),
                   [self, id, token, round,
                    timer = round_timer(metrics_.release_seconds)](result<op_outcome> r) {
                     timer.done();
                     if (r && r->succeeded && self->metrics_.claims_released)
                       self->metrics_.claims_released.inc();
                     // A transient failure is tried again (a few rounds); a failed condition
                     // means the claim is gone already or is another's: nothing to do.
                     if (!r && round + 1 < k_rounds && r.code() != errc::system_shutting_down) {
                       self->release_async(id, token, round + 1);
                       return;
                     }
                     std::lock_guard<std::mutex> l(self->mutex_);
                     if (--self->releases_in_flight_ == 0) self->drained_.notify_all();
                   });
}

bool grain_registry::release_claim(const grain_identity& id, std::int64_t token) {
  for (int round = 0; round < k_rounds; ++round) {
    const round_timer timer(metrics_.release_seconds);
    result<op_outcome> r = write(store_op::delete_if_created_at(claim_key(cluster_, id), token));
    timer.done();
    if (r) {
      if (r->succeeded && metrics_.claims_released) metrics_.claims_released.inc();
      shard& sh = shard_of(id);
      std::lock_guard<std::mutex> lock(sh.m);
      if (auto c = sh.cache.find(view(id)); c != sh.cache.end() && c->second.token == token)
        sh.cache.erase(c);
      // Gone either way: deleted now, or not that claim any more (deleted or re-claimed).
      return true;
    }
    if (r.code() == errc::system_shutting_down) return false;
  }
  return false;
}

result<std::optional<grain_registry::owner_entry>> grain_registry::read_owner(
    const grain_identity& id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return error(errc::system_shutting_down, "the registry is closed");
  }
  const round_timer timer(metrics_.read_seconds);
  result<range_result> r = await_store<range_result>(
      [&](store_callback<range_result> done) {
        membership_.coordination_store().get(claim_key(cluster_, id), std::move(done));
      },
      k_wait);
  timer.done();
  if (!r) return r.error();
  shard& sh = shard_of(id);
  std::lock_guard<std::mutex> lock(sh.m);
  const std::string key = id.str();
  if (r->kvs.empty()) {
    sh.cache.erase(key);
    return std::optional<owner_entry>();
  }
  owner_entry e;
  if (!decode_owner(r->kvs.front(), e))
    return error(errc::not_owner, id.str() + " is claimed by a record this node cannot read");
  if (e.node != node_) cache_locked(sh, key, e);
  return std::optional<owner_entry>(std::move(e));
}

// ---------------------------------------------------------------------------------------------
// resending

std::optional<grain_place> grain_registry::resend_place(const grain_identity& id,
                                                        const grain_place& at,
                                                        const error& failure) {
  const bool refused = akt::detail::error_access::refused(failure);
  const errc code = failure.code();
  if (at.at == grain_place::where::remote) {
    if (refused && (code == errc::not_owner || code == errc::system_shutting_down ||
                    code == errc::grain_kind_unknown)) {
      // (a) The owner refused before any handler ran (it stops, it no longer holds that claim,
      // or it cannot host a grain claimed for it): the claim at that token goes, unless a
      // newer one replaced it meanwhile (compare-and-delete).
      if (at.token != 0 && !release_claim(id, at.token)) return std::nullopt;
    } else if (code == errc::unreachable && !refused) {
      // (b) Never written, and membership confirms the owner's node left. While it is still a
      // member under the lease the claim is on (it may only be unreachable from here) its
      // entry stays; a process of the same name under another lease is another node, which
      // never holds this claim (it joined after the old lease, and the claim with it, ended).
      std::string owner;
      lease_id owner_lease = 0;
      {
        shard& sh = shard_of(id);
        std::lock_guard<std::mutex> lock(sh.m);
        if (auto c = sh.cache.find(view(id)); c != sh.cache.end() && c->second.token == at.token) {
          owner = c->second.node;
          owner_lease = c->second.lease;
        }
      }
      if (!owner.empty() && membership_.is_member(owner, owner_lease)) return std::nullopt;
      if (at.token != 0 && !release_claim(id, at.token)) return std::nullopt;
    } else {
      return std::nullopt;  // connection_lost, dead, request_timeout, handler errors: kept
    }
  } else if (refused && code == errc::not_owner) {
    // The claim went to another node (lost, or placed there by the kind's strategy): the owner
    // was just learned, so the cache is fresh.
    shard& sh = shard_of(id);
    std::lock_guard<std::mutex> lock(sh.m);
    if (auto c = sh.cache.find(view(id)); c != sh.cache.end()) return remote_place(id, c->second);
  } else if (code != errc::grain_kind_unknown) {
    // A local failure other than those, or a kind this node does not host (its owner, if any,
    // is found below: such a node routes, it never hosts).
    return std::nullopt;
  }
  // Where now: the registry read again, not the cache.
  result<std::optional<owner_entry>> owner = read_owner(id);
  if (!owner) return std::nullopt;
  grain_place next;
  if (!owner->has_value()) {
    if (akt::detail::grain_kind_settings(akt::detail::core_of(sys_), id.kind)) {
      next.at = grain_place::where::claim;  // free: the claim path places it by its kind
      return next;
    }
    // This node cannot host it: claim it for a member that lists the kind, and send there.
    std::optional<member> host = choose_node(id, nullptr);
    if (!host) return std::nullopt;  // nobody can: the refusal is the answer
    result<op_outcome> r = claim_for(id, *host, nullptr);
    if (!r) return std::nullopt;
    owner_entry e;
    if (r->succeeded) {
      e = {host->name, host->address, r->applied_revision, host->epoch, pid()};
    } else if (!decode_owner(r->current, e)) {
      return std::nullopt;
    }
    shard& sh = shard_of(id);
    std::lock_guard<std::mutex> lock(sh.m);
    if (e.node != node_) cache_locked(sh, id.str(), e);
    return remote_place(id, e);
  }
  if ((*owner)->node == node_) {
    const id_view v = view(id);
    shard& sh = shard_of(v);
    std::lock_guard<std::mutex> lock(sh.m);
    return place_locked(sh, id, v);
  }
  if ((*owner)->token == at.token && at.at == grain_place::where::remote)
    return std::nullopt;  // the same claim that just failed: nothing new to try
  return remote_place(id, **owner);
}

// ---------------------------------------------------------------------------------------------
// the watch

void grain_registry::on_events(const std::vector<watch_event>& events, revision header) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const watch_event& ev : events) {
    grain_identity id;
    if (!identity_of_claim_key(cluster_, ev.kv.key, id)) continue;
    shard& sh = shard_of(id);
    std::lock_guard<std::mutex> shard_lock(sh.m);
    auto c = sh.cache.find(view(id));
    if (c == sh.cache.end()) continue;  // only what this node routes to is kept
    if (ev.what == watch_event::kind::del) {
      if (c->second.token < ev.kv.mod_revision) sh.cache.erase(c);
    } else if (ev.kv.create_revision > c->second.token) {
      owner_entry e;
      if (decode_owner(ev.kv, e) && e.node != node_)
        c->second = std::move(e);
      else
        sh.cache.erase(c);
    }
  }
  last_revision_ = std::max(last_revision_, header);
}

void grain_registry::on_watch_end(error why) {
  // The handles retired before this end are of watches whose on_end returned (a store delivers
  // one at a time): freed here, after the lock, so a store that ends watch after watch (one
  // that is down) does not grow the list until close().
  std::vector<std::unique_ptr<watch_handle>> done;
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return;
  done.swap(retired_);
  // Whatever changed while no watch ran is unknown: start the cache afresh (entries are hints).
  // After a compaction the revision to resume from is gone: resume from the latest instead,
  // which with an empty cache misses nothing this node still holds.
  for (shard& sh : shards_) {
    std::lock_guard<std::mutex> shard_lock(sh.m);
    sh.cache.clear();
  }
  // The ended handle is cancelled at close(), not here: this runs inside its own callback.
  if (watch_) retired_.push_back(std::move(watch_));
  if (why.code() == errc::cluster_compacted) {
    membership_.coordination_store().get(
        grains_prefix(cluster_), [self = shared_from_this()](result<range_result> r) {
          std::lock_guard<std::mutex> l(self->mutex_);
          if (self->closed_) return;
          if (r) self->last_revision_ = r->header_revision;
          self->watch_ = self->membership_.coordination_store().watch(
              grains_prefix(self->cluster_), self->last_revision_ + 1, *self->watcher_);
        });
    return;
  }
  watch_ = membership_.coordination_store().watch(grains_prefix(cluster_), last_revision_ + 1,
                                                  *watcher_);
}

void grain_registry::node_left(const std::string& name) {
  for (shard& sh : shards_) {
    std::lock_guard<std::mutex> lock(sh.m);
    std::erase_if(sh.cache, [&](const auto& entry) { return entry.second.node == name; });
  }
}

}  // namespace akt::cluster::detail
