#include "http/api.hpp"

#include <algorithm>
#include <map>
#include <vector>

#include "actor/system_core.hpp"
#include "akt/actor/actor_system.hpp"
#include "akt/cluster/cluster.hpp"
#include "akt/grain/grains.hpp"
#include "cluster/member_record.hpp"
#include "http/json_writer.hpp"

namespace akt::http::detail {

namespace {

// Milliseconds since the Unix epoch: the page plots against the node's clock.
std::uint64_t wall_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

// The active grains per kind, without creating the grain layer of a system that never used it.
std::map<std::string, std::uint64_t> grains_per_kind(const api_context& c) {
  std::map<std::string, std::uint64_t> kinds;
  if (c.core->grains_.load(std::memory_order_acquire) == nullptr) return kinds;
  for (const grain_identity& id : active_grains(c.sys)) ++kinds[id.kind];
  return kinds;
}

// The active grains on this node, in all: what /api/node and each /api/history sample report.
std::uint64_t active_grain_count(const api_context& c) {
  if (c.core->grains_.load(std::memory_order_acquire) == nullptr) return 0;
  return active_grains(c.sys).size();
}

void write_node(json_writer& w, const api_context& c) {
  const system_stats s = c.sys.stats();
  const readiness r = ready_state(c);
  const double uptime =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - c.started).count();
  const std::uint64_t grains = active_grain_count(c);
  w.begin_object()
      .field("name", c.sys.name())
      .field("address", c.sys.address())
      .field("http_port", static_cast<unsigned>(c.http_port))
      .field("uptime_seconds", uptime)
      .field("time_ms", wall_ms())
      .field("ready", r.ready)
      .field("ready_reason", r.reason)
      .field("fenced", cluster::fenced(c.sys))
      .field("workers", c.sys.worker_count())
      .key("stats")
      .begin_object()
      .field("actors", s.actors)
      .field("processed", s.processed)
      .field("spawned", s.spawned)
      .field("dead_letters", s.dead_letters)
      .field("turns", s.turns)
      .field("parks", s.parks)
      .field("steals", s.steals)
      .field("handoffs", s.handoffs)
      .end_object()
      .field("grains_active", grains)
      .end_object();
}

void write_cluster(json_writer& w, const api_context& c) {
  const auto& cfg = c.core->config_.cluster;
  w.begin_object().field("enabled", cfg.has_value());
  w.field("cluster", cfg ? cfg->cluster_name : std::string());
  const bool joined = c.core->cluster() != nullptr;
  w.field("joined", joined);
  std::string self;
  if (joined) {
    if (result<cluster::member> me = cluster::self(c.sys)) self = me->name;
  }
  w.field("self", self);
  const bool fenced = joined && cluster::fenced(c.sys);
  w.key("members").begin_array();
  for (const cluster::member& m : cluster::members(c.sys)) {
    // The view of this node: a member is up, or leaving (stopping cleanly); this node itself may
    // know it is fenced, which the others only see when its record vanishes.
    const char* state = m.name == self && fenced ? "fenced" : m.leaving ? "leaving" : "up";
    w.begin_object()
        .field("name", m.name)
        .field("address", m.address)
        .field("self", m.name == self)
        .field("state", state)
        // Strings: 64-bit lease ids and incarnations do not fit a JavaScript number.
        .field("epoch", std::to_string(m.epoch))
        .field("incarnation", std::to_string(m.incarnation))
        .field("load", m.load)
        .field("http", m.http);
    w.key("roles").begin_array();
    for (const auto& r : m.roles) w.value(r);
    w.end_array();
    w.key("grain_kinds").begin_array();
    for (const auto& k : m.grain_kinds) w.value(k);
    w.end_array();
    w.end_object();
  }
  w.end_array().end_object();
}

void write_peers(json_writer& w, const api_context& c) {
  w.begin_object().key("peers").begin_array();
  for (const peer_stats& p : c.sys.peers()) {
    w.begin_object()
        .field("address", p.address)
        .field("incarnation", std::to_string(p.incarnation))
        .field("connected", p.connected)
        .field("messages_out", p.messages_out)
        .field("bytes_out", p.bytes_out)
        .field("frames_out", p.frames_out)
        .field("writes", p.writes)
        .field("messages_in", p.messages_in)
        .field("bytes_in", p.bytes_in)
        .field("frames_in", p.frames_in)
        .field("reconnects", p.reconnects)
        .field("refused", p.refused)
        .end_object();
  }
  w.end_array().end_object();
}

void write_grains(json_writer& w, const api_context& c) {
  const auto kinds = grains_per_kind(c);
  std::uint64_t total = 0;
  for (const auto& [kind, n] : kinds) total += n;
  w.begin_object().field("active", total).key("kinds").begin_array();
  for (const auto& [kind, n] : kinds) {
    w.begin_object().field("kind", kind).field("active", n).end_object();
  }
  w.end_array().end_object();
}

}  // namespace

readiness ready_state(const api_context& c) {
  if (c.stopping) return {false, "shutting down"};
  switch (c.core->state()) {
    case akt::detail::run_state::created:
      return {false, "starting"};
    case akt::detail::run_state::stopping:
    case akt::detail::run_state::stopped:
      return {false, "shutting down"};
    case akt::detail::run_state::running:
      break;
  }
  if (c.core->config_.cluster) {
    // The extension is published once the join succeeded (actor_system::start).
    if (c.core->cluster() == nullptr) return {false, "joining"};
    if (cluster::fenced(c.sys)) return {false, "fenced"};
  } else if (c.core->config_.remote && c.core->remote() == nullptr) {
    return {false, "starting"};  // remoting is not listening yet
  }
  return {true, "ready"};
}

namespace {
// One route's document: what `write` puts into a fresh writer.
std::string json_of(void (*write)(json_writer&, const api_context&), const api_context& c) {
  json_writer w;
  write(w, c);
  return w.take();
}
}  // namespace

std::string node_json(const api_context& c) { return json_of(write_node, c); }
std::string cluster_json(const api_context& c) { return json_of(write_cluster, c); }
std::string peers_json(const api_context& c) { return json_of(write_peers, c); }
std::string grains_json(const api_context& c) { return json_of(write_grains, c); }

member_target member_endpoint(const api_context& c, std::string_view name) {
  auto refused = [](std::string why) {
    member_target r;
    r.status = 404;
    r.why = std::move(why);
    return r;
  };
  member_target t;
  if (c.core->cluster() == nullptr) return refused("this node is not in a cluster");
  result<cluster::member> me = cluster::self(c.sys);
  if (me && me->name == name) {
    t.self = true;
    return t;
  }
  for (const cluster::member& m : cluster::members(c.sys)) {
    if (m.name != name) continue;
    if (m.http.empty()) return refused("member " + m.name + " runs no HTTP endpoint");
    if (!cluster::detail::parse_http_address(m.http, t.host, t.port))
      return refused("member " + m.name + " has no usable HTTP address");
    return t;
  }
  return refused("no member named " + std::string(name));
}

history_sample sample_of(const api_context& c) {
  const system_stats s = c.sys.stats();
  history_sample h;
  h.time_ms = wall_ms();
  h.processed = s.processed;
  h.dead_letters = s.dead_letters;
  h.actors = s.actors;
  h.grains = active_grain_count(c);
  return h;
}

std::string overview_json(const api_context& c) {
  json_writer w;
  w.begin_object().key("node");
  write_node(w, c);
  w.key("cluster");
  write_cluster(w, c);
  w.key("peers");
  write_peers(w, c);
  w.key("grains");
  write_grains(w, c);
  w.end_object();
  return w.take();
}

}  // namespace akt::http::detail
