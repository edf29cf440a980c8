// The cluster module's extension of a system (actor/cluster_hooks.hpp): it checks the cluster
// section of the config, joins through membership, turns membership's news into events and
// into remoting's view of its peers, and fences the grain layer.

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <utility>

#include "actor/cluster_hooks.hpp"
#include "actor/http_hooks.hpp"
#include "actor/system_core.hpp"
#include "akt/actor/actor.hpp"
#include "akt/cluster/cluster.hpp"
#include "akt/core/clock.hpp"
#include "akt/core/thread.hpp"
#include "akt/metrics/registry.hpp"
#include "akt/metrics/snapshot.hpp"
#include "cluster/actor_names.hpp"
#include "cluster/grain_claim_record.hpp"
#include "cluster/grain_registry.hpp"
#include "cluster/member_record.hpp"
#include "cluster/membership.hpp"
#include "grain/grain_seams.hpp"
#include "remote/node_lost.hpp"

namespace akt::cluster::detail {

namespace {

struct probe_ping {};

// The dispatcher probe: an actor whose only work is to note when it last ran. Its ping comes
// from membership's thread; a node whose workers are all stuck never runs it, and stops renewing
// its lease.
class dispatcher_probe final : public akt::actor {
 public:
  explicit dispatcher_probe(std::shared_ptr<std::atomic<std::int64_t>> last)
      : last_(std::move(last)) {}
  void receive(receive_context& ctx) override {
    if (ctx.is<probe_ping>()) last_->store(akt::detail::now_ns(), std::memory_order_release);
  }

 private:
  std::shared_ptr<std::atomic<std::int64_t>> last_;
};

error invalid(std::string what) { return error(errc::invalid_cluster_config, std::move(what)); }

// The config's own checks, naming the field.
error check(const cluster_config& c, const std::string& node) {
  if (!valid_name(c.cluster_name))
    return invalid("cluster.cluster_name: '" + c.cluster_name + "' is empty or not a name");
  if (!valid_name(node)) return invalid("cluster.node_name: '" + node + "' is not a name");
  if (!c.store) return invalid("cluster.store: no store (an inproc_store or akt::etcd::provider)");
  if (c.lease_ttl < store_limits::min_lease_ttl)
    return invalid("cluster.lease_ttl: " + std::to_string(c.lease_ttl.count()) +
                   " s is below the store's minimum of 2 s");
  if (c.fence_margin.count() < 0 || c.fence_margin * 2 >= c.lease_ttl)
    return invalid("cluster.fence_margin: must be at least 0 and below lease_ttl / 2");
  if (c.start_wait.count() <= 0) return invalid("cluster.start_wait: must be positive");
  if (c.min_peers > 0 && c.barrier_timeout.count() <= 0)
    return invalid("cluster.barrier_timeout: must be positive when min_peers is set");
  for (const auto& r : c.roles)
    if (!valid_name(r)) return invalid("cluster.roles: '" + r + "' is not a name");
  for (const auto& k : c.grain_kinds)
    if (!valid_name(k)) return invalid("cluster.grain_kinds: '" + k + "' is not a name");
  return {};
}

class cluster_node final : public akt::detail::cluster_extension, public membership_listener {
 public:
  // host:port where this node's HTTP endpoint answers, for its member record; "" without one.
  // An endpoint bound to every interface is named by the host the node's remoting address
  // names, which the other members reach already.
  std::string http_address(const std::string& remote_address) const {
    akt::detail::http_extension* h = core_->http();
    if (h == nullptr || !core_->config_.http || h->port() == 0) return {};
    std::string host = core_->config_.http->bind_address;
    if (host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]") {
      const auto at = remote_address.find('@');
      const auto colon = remote_address.rfind(':');
      if (at == std::string::npos || colon == std::string::npos || colon <= at) return {};
      host = remote_address.substr(at + 1, colon - at - 1);
    }
    if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
    std::string out = host + ":" + std::to_string(h->port());
    std::string checked_host;
    std::uint16_t checked_port = 0;
    return parse_http_address(out, checked_host, checked_port) ? out : std::string();
  }

  cluster_node(akt::detail::system_core* core, actor_system& sys) : core_(core), sys_(sys) {}
  ~cluster_node() override {
    collector_.reset();  // first: no scrape reads membership from here on
    if (names_) names_->close(std::chrono::steady_clock::now());
    if (registry_) registry_->close(std::chrono::steady_clock::now());
    if (membership_) membership_->stop();
  }

  result<void> start() {
    const cluster_config& c = *core_->config_.cluster;
    const std::string address = core_->remote()->address();  // akt://system@host:port
    const std::string node =
        c.node_name.empty() ? address.substr(address.find('@') + 1) : c.node_name;
    if (error e = check(c, node)) return e;
    result<std::unique_ptr<store>> st = c.store->open_store(node);
    if (!st) return st.error();
    membership_settings s;
    s.cluster = c.cluster_name;
    s.node = node;
    s.address = address;
    s.incarnation = akt::remote::detail::local_incarnation(sys_);
    s.ttl = c.lease_ttl;
    s.margin = c.fence_margin;
    s.start_wait = c.start_wait;
    s.old_process_gone = c.old_process_gone;
    s.roles = c.roles;
    s.kinds = c.grain_kinds;
    s.http = http_address(address);
    auto probe = sys_.spawn<dispatcher_probe>("akt.cluster.probe", last_probe_);
    if (!probe) return probe.error();
    probe_ = *probe;
    membership_ = std::make_unique<membership>(std::move(s), std::move(*st), *this);
    // Before the join: membership's threads may report a fence from then on.
    if (core_->config_.metrics.enabled) register_metrics(core_->metrics_);
    // Before the join: membership's news (left) may reach it from then on.
    grain_registry_settings rs;
    rs.cluster = c.cluster_name;
    rs.node = node;
    rs.address = address;
    rs.roles = c.roles;
    rs.min_peers = c.min_peers;
    rs.barrier_timeout = c.barrier_timeout;
    registry_ = std::make_shared<grain_registry>(sys_, *membership_, std::move(rs));
    names_ = std::make_shared<actor_names>(sys_, *membership_, c.cluster_name, node, address);
    // The join first, then the fence and the registry's gate. Remoting listens already, and a
    // node started again under its name and address (the join waits for the old process's
    // lease) is reached by peers that still route there: until the fence is installed the grain
    // layer refuses every activation of a cluster node (grain_layer::fence_expected), so no
    // grain runs outside the registry. The fence is installed only once the join succeeded: a
    // fence installed before a join that fails would be destroyed with this node while an
    // activation on another thread still reads it (TSan saw it: the fence was the membership).
    if (result<void> r = membership_->join(); !r) {
      names_->close(std::chrono::steady_clock::now());
      registry_->close(std::chrono::steady_clock::now());
      membership_->stop();
      return r;
    }
    if (!akt::detail::install_grain_fence(core_, membership_.get())) {
      return invalid("cluster: the grain layer has a fence already");
    }
    if (result<void> r = registry_->start(); !r) {
      names_->close(std::chrono::steady_clock::now());
      registry_->close(std::chrono::steady_clock::now());
      membership_->stop();
      return r;
    }
    return {};
  }

  membership& members() { return *membership_; }
  actor_names& names() { return *names_; }
  // spawn_on's round-robin turn (any thread).
  std::uint64_t next_turn() noexcept { return turn_.fetch_add(1, std::memory_order_relaxed); }

  // cluster_extension
  void begin_leave() noexcept override {
    registry_->begin_shutdown();
    membership_->announce_leaving();
  }
  void leave(std::chrono::steady_clock::time_point deadline,
             std::vector<std::string>& problems) noexcept override {
    try {
      if (core_->crashing()) {
        names_->close(std::chrono::steady_clock::now());
        registry_->close(std::chrono::steady_clock::now());
        membership_->stop();  // keep-alives stop; the lease runs out by itself
        return;
      }
      // The deactivated grains' releases commit first (others may claim them at once); the
      // revoke then deletes whatever is left on the lease, the actors' names included (the
      // actors stop after this: their releases then have nothing left to do).
      names_->close(deadline);
      registry_->close(deadline);
      membership_->leave(deadline, problems);
    } catch (const std::exception& e) {
      problems.push_back(std::string("cluster: leaving: ") + e.what());
    }
  }
  void shut_down(std::chrono::steady_clock::time_point,
                 std::vector<std::string>&) noexcept override {
    collector_.reset();  // membership stops: nothing left to read
    names_->close(std::chrono::steady_clock::now());
    registry_->close(std::chrono::steady_clock::now());
    membership_->stop();
    probe_ = pid();  // its cell holds the system's core, which owns this extension
  }

  // membership_listener (the store's thread or membership's)
  void joined(const member& m) override { publish(node_joined{m}); }
  void left(const member& m) override {
    // Remoting fails what waits for that node now, instead of after its own loss detection:
    // unless it left cleanly, when its connections still answer what they carry (its grains'
    // marked refusals, sent again by their callers) and then close, failing the rest.
    if (!m.leaving) {
      (void)akt::remote::detail::declare_node_lost(sys_, m.address,
                                                   "node " + m.name + " left the cluster");
    }
    registry_->node_left(m.name);
    publish(node_left{m});
  }
  void fenced(lease_id epoch) override {
    if (fencing_events_) fencing_events_.inc();
    akt::detail::nudge_grains(core_);  // dropped now, not at their next message
    publish(node_fenced{membership_->self().name, epoch});
  }
  error claim_name(std::string_view name, const void* owner) override {
    return names_->claim(name, owner);
  }
  void release_name(std::string_view name, const void* owner) noexcept override {
    names_->release(name, owner);
  }

  void rejoined(lease_id epoch) override {
    names_->reclaim();  // the names' keys went with the old lease
    publish(node_rejoined{membership_->self().name, epoch});
  }
  void ping_dispatcher() override { (void)probe_.tell(probe_ping{}); }
  std::uint64_t load() override { return akt::detail::active_grain_count(core_); }
  bool dispatcher_healthy(std::int64_t now_ns, std::int64_t within_ns) override {
    return now_ns - last_probe_->load(std::memory_order_acquire) <= within_ns;
  }

 private:
  // The metrics (system_config::metrics): akt_cluster_fencing_events_total (each time
  // membership fenced this node), and a collector for akt_cluster_members{state} and
  // akt_cluster_lease_seconds_left, read from membership at the scrape. The grain registry
  // keeps its own (claims, store round trips).
  void register_metrics(akt::metrics::registry& reg) {
    using akt::metrics::metric_type;
    if (auto f = reg.add_counter("akt_cluster_fencing_events_total",
                                 "Times this node was fenced: its lease could no longer be "
                                 "proven, so no grain handler ran here until it rejoined."))
      fencing_events_ = f->with();
    collector_ = reg.add_collector([this](akt::metrics::snapshot& out) {
      std::size_t up = 0, leaving = 0;
      for (const member& m : membership_->members()) ++(m.leaving ? leaving : up);
      auto& members = out.add_family(
          "akt_cluster_members",
          "Members of the cluster as this node's view holds them, per state (up, leaving).",
          metric_type::gauge);
      members.add({{"state", "up"}}, static_cast<double>(up));
      members.add({{"state", "leaving"}}, static_cast<double>(leaving));
      const std::int64_t until = membership_->valid_until_ns();
      const std::int64_t left = until == 0 ? 0 : until - akt::detail::now_ns();
      out.add_family("akt_cluster_lease_seconds_left",
                     "Time until this node's lease can no longer be proven (from its last "
                     "acknowledged keep-alive, TTL less the fence margin); 0 while fenced.",
                     metric_type::gauge)
          .add({}, static_cast<double>(std::max<std::int64_t>(left, 0)) * 1e-9);
    });
  }

  template <class E>
  void publish(const E& e) {
    auto& events = sys_.events();
    if (events.has_subscribers<E>()) events.publish(e);
  }

  akt::detail::system_core* const core_;
  actor_system& sys_;
  // Written by the probe actor's turns (release), read by membership's thread (acquire).
  std::shared_ptr<std::atomic<std::int64_t>> last_probe_ =
      std::make_shared<std::atomic<std::int64_t>>(0);
  pid probe_;
  std::unique_ptr<membership> membership_;
  // The grain registry (placement and gate of the grain layer); shared with the layer's seams,
  // closed before membership stops the store.
  std::shared_ptr<grain_registry> registry_;
  // The cluster-wide actor names (claims of this node's top-level actors); closed with the
  // registry.
  std::shared_ptr<actor_names> names_;
  std::atomic<std::uint64_t> turn_{0};  // spawn_on's round robin (relaxed: a counter only)
  // Set by start() while metrics are on, before the node is shared; incremented by membership's
  // threads (lock-free).
  akt::metrics::counter fencing_events_;
  // Reset first by shut_down and the destructor: waits out a scrape in progress.
  akt::metrics::collector_handle collector_;
};

result<std::unique_ptr<akt::detail::cluster_extension>> make(akt::detail::system_core* core,
                                                             actor_system& sys) {
  auto node = std::make_unique<cluster_node>(core, sys);
  if (result<void> r = node->start(); !r) return r.error();
  return std::unique_ptr<akt::detail::cluster_extension>(std::move(node));
}

cluster_node* node_of(actor_system& sys) {
  return static_cast<cluster_node*>(akt::detail::core_of(sys)->cluster());
}

const bool factory_installed = (akt::detail::install_cluster_factory(&make), true);

}  // namespace

}  // namespace akt::cluster::detail

namespace akt::cluster {

std::vector<member> members(actor_system& sys) {
  detail::cluster_node* n = detail::node_of(sys);
  return n == nullptr ? std::vector<member>() : n->members().members();
}

result<void> wait_ready(actor_system& sys, std::chrono::nanoseconds timeout) {
  detail::cluster_node* n = detail::node_of(sys);
  if (n == nullptr) return error(errc::invalid_argument, "the system has no cluster section");
  if (!n->members().wait_ready(timeout)) return errc::request_timeout;
  return {};
}

result<member> self(actor_system& sys) {
  detail::cluster_node* n = detail::node_of(sys);
  if (n == nullptr) return error(errc::invalid_argument, "the system has no cluster section");
  return n->members().self();
}

bool fenced(actor_system& sys) {
  detail::cluster_node* n = detail::node_of(sys);
  return n != nullptr && n->members().fenced();
}

result<pid> find_actor(actor_system& sys, std::string_view name, std::chrono::nanoseconds timeout) {
  if (timeout <= std::chrono::nanoseconds::zero()) return errc::invalid_timeout;
  result<pid> local = sys.find(name);
  detail::cluster_node* n = detail::node_of(sys);
  if (local || n == nullptr) return local;
  // A path "name/child/...": the cluster knows the top-level name; the rest is the owner's.
  const std::string_view top = name.substr(0, name.find('/'));
  if (!detail::valid_grain_name(top))
    return error(errc::invalid_actor_name, "'" + std::string(name) + "' is not an actor name");
  if (akt::detail::on_worker_thread()) return errc::blocking_on_worker;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  result<std::optional<detail::actor_name_record>> rec = n->names().read(top, timeout);
  if (!rec) return rec.error();
  if (!rec->has_value())
    return error(errc::actor_not_found, "no actor named '" + std::string(top) + "' in the cluster");
  const auto left = deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::nanoseconds::zero()) return errc::request_timeout;
  // This node's own record with no such actor here (it is starting or just stopped) ends in
  // lookup's local find: actor_not_found.
  return sys.lookup((*rec)->address + "/user/" + std::string(name), left);
}

result<pid> spawn_on(actor_system& sys, std::string_view kind, std::string_view name,
                     const spawn_on_options& options) {
  detail::cluster_node* n = detail::node_of(sys);
  if (n == nullptr) return error(errc::invalid_argument, "the system has no cluster section");
  if (akt::detail::on_worker_thread()) return errc::blocking_on_worker;
  std::vector<member> candidates = n->members().members();  // sorted by name
  // A member whose record says it is leaving is stopping: an actor placed there would stop with
  // it at once (or be refused), as a grain would (grain_registry::choose_node skips it too).
  std::erase_if(candidates, [](const member& m) { return m.leaving; });
  if (!options.role.empty()) {
    std::erase_if(candidates, [&](const member& m) {
      return std::find(m.roles.begin(), m.roles.end(), options.role) == m.roles.end();
    });
  }
  if (candidates.empty()) {
    return error(errc::invalid_argument,
                 "spawn_on: no member" +
                     (options.role.empty() ? std::string() : " with role '" + options.role + "'"));
  }
  const std::uint64_t turn = n->next_turn();
  std::size_t pick = 0;
  switch (options.placement) {
    case spawn_placement::round_robin:
      pick = turn % candidates.size();
      break;
    case spawn_placement::random: {
      thread_local std::minstd_rand rng{std::random_device{}()};
      pick = std::uniform_int_distribution<std::size_t>(0, candidates.size() - 1)(rng);
      break;
    }
    case spawn_placement::least_load: {
      const auto least =
          std::min_element(candidates.begin(), candidates.end(),
                           [](const member& a, const member& b) { return a.load < b.load; })
              ->load;
      std::erase_if(candidates, [least](const member& m) { return m.load != least; });
      pick = turn % candidates.size();
      break;
    }
  }
  const member& target = candidates[pick];
  if (target.name == n->members().self().name) {
    akt::detail::system_core::actor_factory make =
        akt::detail::core_of(sys)->find_actor_kind(std::string(kind));
    if (!make) {
      return error(errc::invalid_argument,
                   "no actor kind '" + std::string(kind) + "' on " + target.name);
    }
    return make(sys, name);
  }
  return sys.spawn_on(target.address, kind, name, options.timeout);
}

namespace detail {
bool module_linked() noexcept { return factory_installed; }
}  // namespace detail

}  // namespace akt::cluster
