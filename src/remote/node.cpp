// The remote module's extension of an actor system (node.hpp): start, the hooks the actor
// layer calls, lookups, spawns and stops on other nodes, and shutdown.

#include "remote/node.hpp"
#include "remote/node_lost.hpp"

#include <asio.hpp>
#include <charconv>
#include <future>
#include <random>
#include <string>
#include <utility>

#include "actor/cell_extras.hpp"
#include "actor/reply_slot.hpp"
#include "akt/core/clock.hpp"
#include "akt/core/thread.hpp"
#include "akt/remote/remote.hpp"
#include "grain/grain_seams.hpp"
#include "remote/association.hpp"
#include "remote/inbound.hpp"
#include "remote/payload.hpp"
#include "remote/remote_cell.hpp"
#include "remote/wire.hpp"
#include "remote/wire.pb.h"

namespace akt::remote {

namespace detail {

using akt::detail::actor_cell;
using akt::detail::context_access;

// ---------------------------------------------------------------------------------------------
// addresses

result<node_address> parse_node(std::string_view text) {
  constexpr std::string_view scheme = "akt://";
  std::string_view system;
  const std::string_view whole = text;
  if (text.substr(0, scheme.size()) == scheme) {
    text.remove_prefix(scheme.size());
    const auto at = text.find('@');
    if (at == std::string_view::npos || at == 0 || text.find('/') != std::string_view::npos) {
      return error(
          errc::invalid_address,
          "expected akt://system@host:port (a node, no path), got '" + std::string(whole) + "'");
    }
    system = text.substr(0, at);
    text.remove_prefix(at + 1);
  }
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return error(errc::invalid_address,
                 "expected host:port or akt://system@host:port, got '" + std::string(whole) + "'");
  }
  std::string_view host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
      port > 65535) {
    return error(errc::invalid_address, "bad port in '" + std::string(whole) + "'");
  }
  return node_address{std::string(host), static_cast<std::uint16_t>(port), std::string(system)};
}

result<actor_address> parse_address(std::string_view text) {
  constexpr std::string_view scheme = "akt://";
  auto bad = [&](std::string_view why) {
    return error(errc::invalid_address, std::string(why) + " in '" + std::string(text) +
                                            "' (expected akt://system@host:port/path)");
  };
  if (text.substr(0, scheme.size()) != scheme) return bad("no akt:// scheme");
  std::string_view rest = text.substr(scheme.size());
  const auto at = rest.find('@');
  if (at == std::string_view::npos || at == 0) return bad("no system@");
  const auto slash = rest.find('/', at);
  if (slash == std::string_view::npos || slash + 1 == rest.size()) return bad("no path");
  result<node_address> node = parse_node(rest.substr(at + 1, slash - at - 1));
  if (!node) return bad(node.error().detail());
  return actor_address{std::string(rest.substr(0, at)), std::move(*node),
                       std::string(rest.substr(slash + 1))};
}

// ---------------------------------------------------------------------------------------------
// construction

namespace {

// Sweeps calls past their deadline this often: a reply later than its ask's deadline by up to
// this much still lands (the asker's own wait has already given up; this only frees the call).
constexpr std::chrono::milliseconds k_sweep_interval{100};

std::uint64_t draw_incarnation() {
  std::random_device rd;
  std::uint64_t v = 0;
  while (v == 0) v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  return v;
}

tls_settings tls_of(const tls_config& t) {
  tls_settings s;
  s.enabled = t.enabled;
  s.certificate_file = t.certificate_file;
  s.private_key_file = t.private_key_file;
  s.ca_file = t.ca_file;
  s.require_peer_certificate = t.mutual;
  return s;
}

// The serializer of poison_pill, so that pid.stop() works on a remote pid.
error encode_nothing(const poison_pill&, byte_writer&) { return {}; }
result<poison_pill> decode_pill(byte_reader&) { return poison_pill{}; }

thread_local peer_services* t_codec_node = nullptr;  // see codec_scope

// Waits up to `timeout` for the reply a peer sends into `slot` (a new slot this call owns), and
// frees the slot unless the wait gave up (then it is the completer's). A network round trip:
// the asker sleeps at once, without reply_slot::await's spin.
result<message> await_reply(akt::detail::reply_slot* slot, std::chrono::nanoseconds timeout) {
  bool abandoned = false;
  result<message> r = slot->await(akt::detail::now_ns() + timeout.count(), abandoned, false);
  if (!abandoned) delete slot;
  return r;
}

}  // namespace

remote_node::remote_node(akt::detail::system_core* core, actor_system& sys,
                         const remote_config& cfg)
    : peer_services(core, cfg, draw_incarnation()), sys_(sys) {
  tls_ = tls_of(cfg.tls);
  limits_.max_frame_bytes = cfg.max_frame_bytes;
  limits_.max_pending_bytes = std::max<std::size_t>(cfg.window_bytes * 2, 1u << 20);
  limits_.handshake_timeout = cfg.connect_timeout;
  if (core->config_.metrics.enabled) {
    // A name the user took already with another shape leaves that family out.
    if (auto f = core->metrics_.add_histogram(
            "akt_remote_ask_seconds",
            "Round trip of asks to a peer: from the ask's registration to its answer's arrival.",
            akt::metrics::exponential_bounds(0.00005, 2, 20), {"peer"})) {
      ask_seconds_ = *f;
    }
    collector_ =
        core->metrics_.add_collector([this](akt::metrics::snapshot& out) { collect(out); });
  }
}

remote_node::~remote_node() {
  collector_.reset();  // no scrape reads the associations from here on
  std::vector<std::string> ignored;
  shut_down(std::chrono::steady_clock::now(), ignored);
}

result<std::unique_ptr<akt::detail::remote_extension>> remote_node::make(
    akt::detail::system_core* core, actor_system& sys) {
  std::unique_ptr<remote_node> n(new remote_node(core, sys, *core->config_.remote));
  if (error e = n->open()) return e;
  return std::unique_ptr<akt::detail::remote_extension>(std::move(n));
}

error remote_node::open() {
  if (cfg_.io_threads == 0) return error(errc::invalid_argument, "remote_config::io_threads is 0");
  if (cfg_.io_poll.count() < 0)
    return error(errc::invalid_argument, "remote_config::io_poll is negative");
  if (cfg_.tls.enabled && (cfg_.tls.certificate_file.empty() || cfg_.tls.private_key_file.empty() ||
                           cfg_.tls.ca_file.empty())) {
    return error(errc::invalid_argument, "TLS needs a certificate, a private key and a CA file");
  }
  (void)register_message<poison_pill>(&encode_nothing, &decode_pill);
  (void)register_message<pid>(
      [](const pid& p, byte_writer& w) { return akt::remote::encode_pid(w, p); },
      &akt::remote::decode_pid);
  io_ = std::make_unique<io_pool>(cfg_.io_threads, cfg_.io_poll);
  io_->set_log([this](std::string_view text) { log(log_level::warning, text); });
  auto l = listener::open(*io_, cfg_.host, cfg_.port, tls_, limits_,
                          [this](std::shared_ptr<connection> c) {
                            auto link = std::make_shared<inbound_link>(*this, c);
                            {
                              std::lock_guard<std::mutex> lock(mutex_);
                              if (closing()) {
                                c->close(error(errc::system_shutting_down, "stopping"));
                                return;
                              }
                              links_.push_back(link);
                            }
                            c->start(link);
                            // A peer that never says hello holds a socket and a buffer: it
                            // gets connect_timeout to do so (heartbeats start with the hello).
                            std::weak_ptr<inbound_link> weak = link;
                            after(cfg_.connect_timeout, [weak] {
                              auto l = weak.lock();
                              if (l && !l->greeted())
                                l->close(error(errc::protocol_error, "no hello in time"));
                            });
                          });
  if (!l) {
    io_->stop();
    return l.error();
  }
  listener_ = std::move(*l);
  advertised_host_ = cfg_.advertised_host.empty() ? cfg_.host : cfg_.advertised_host;
  advertised_port_ = cfg_.advertised_port != 0 ? cfg_.advertised_port : listener_->port();
  address_ =
      "akt://" + core_->name_ + "@" + advertised_host_ + ":" + std::to_string(advertised_port_);
  after(k_sweep_interval, [this] { sweep(); });
  return {};
}

void remote_node::sweep() {
  if (closing()) return;
  const std::int64_t now = core_->now_ns();
  std::vector<std::shared_ptr<association>> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [key, a] : associations_) all.push_back(a);
  }
  const auto steady_now = std::chrono::steady_clock::now();
  std::vector<std::string> idle;
  for (auto& a : all) {
    a->expire_calls(now);
    if (a->forgettable(steady_now, config().forget_lost_peer_after)) idle.push_back(a->key());
  }
  all.clear();
  if (!idle.empty()) {
    // An association nobody else holds (use_count 1, under mutex_: a new holder can only come
    // from this table, under mutex_) is forgotten; it is destroyed after the lock is let go.
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::string& key : idle) {
      auto it = associations_.find(key);
      if (it == associations_.end() || it->second.use_count() != 1) continue;
      all.push_back(std::move(it->second));
      associations_.erase(it);
      inbound_keys_.erase(key);
    }
  }
  all.clear();
  after(k_sweep_interval, [this] { sweep(); });
}

void remote_node::after(std::chrono::milliseconds delay, std::function<void()> fn) {
  if (closing() || !io_) return;
  auto timer = std::make_shared<asio::steady_timer>(io_->context(), delay);
  timer->async_wait([this, timer, fn = std::move(fn)](const asio::error_code& ec) {
    if (!ec && !closing()) fn();
  });
}

void remote_node::log(log_level level, std::string_view text) const {
  core_->log(level, "remote", text);
}

std::shared_ptr<association> remote_node::association_for(const std::string& host,
                                                          std::uint16_t port) {
  std::string key = host + ":" + std::to_string(port);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = associations_.find(key);
  if (it != associations_.end()) return it->second;
  auto a = std::make_shared<association>(*this, host, port);
  // shut_down sets closing_ before it takes mutex_ to list the associations it closes: one made
  // before that list is in it; one made after sees closing_ here. Kept out of the table and
  // closed from birth, it caches no proxy, whose cell would hold the core that owns this node
  // (a reference cycle that outlives the system: a send racing the stop made one).
  if (closing()) {
    a->close_unused();
    return a;
  }
  associations_.emplace(std::move(key), a);
  return a;
}

std::shared_ptr<association> remote_node::association_for_inbound(const std::string& host,
                                                                  std::uint16_t port) {
  std::string key = host + ":" + std::to_string(port);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = associations_.find(key);
  if (it != associations_.end()) return it->second;
  if (closing()) return nullptr;  // as association_for; an inbound link of a stopping node
  if (inbound_keys_.size() >= k_max_inbound_peers) return nullptr;
  inbound_keys_.insert(key);
  auto a = std::make_shared<association>(*this, host, port);
  associations_.emplace(std::move(key), a);
  return a;
}

bool remote_node::claim_verified(const connection& c, const std::string& claimed) const {
  if (tls_.enabled && tls_.require_peer_certificate) return true;
  result<node_address> from = parse_node(c.remote_endpoint());
  if (!from) return false;
  std::error_code claim_error, from_error;
  const asio::ip::address said = asio::ip::make_address(claimed, claim_error);
  const asio::ip::address seen = asio::ip::make_address(from->host, from_error);
  if (claim_error || from_error) return false;   // a name: nothing here can check it
  auto plain = [](const asio::ip::address& a) {  // an IPv4 client of a dual-stack listener
    if (a.is_v6() && a.to_v6().is_v4_mapped()) {
      return asio::ip::address(asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()));
    }
    return a;
  };
  return plain(said) == plain(seen);
}

void remote_node::forget_link(inbound_link* l) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = links_.begin(); it != links_.end(); ++it) {
    if (it->get() == l) {
      links_.erase(it);
      return;
    }
  }
}

void remote_node::publish_connected(const std::string& address, std::uint64_t incarnation) {
  auto& events = core_->events();
  if (!events.has_subscribers<peer_connected>()) return;
  events.publish(peer_connected{address, incarnation});
}

void remote_node::publish_disconnected(const std::string& address, const error& why) {
  log(log_level::warning, "peer " + address + " lost: " + why.message());
  auto& events = core_->events();
  if (!events.has_subscribers<peer_disconnected>()) return;
  events.publish(peer_disconnected{address, why});
}

// ---------------------------------------------------------------------------------------------
// the actor layer's hooks

error remote_node::deliver(actor_cell* to, receive_context* env) noexcept {
  auto* proxy = static_cast<remote_cell*>(to);
  context_access::receiver(*env) = to;
  error e;
  try {
    e = proxy->peer().send_envelope(*proxy, *env);
  } catch (const std::exception& ex) {
    e = error(errc::unreachable, std::string("sending: ") + ex.what());
  }
  if (e) core_->dead_letter(*env, e);  // answers an ask with the refusal
  recycle(env);
  return e;
}

void remote_node::post_system(actor_cell* to, message& msg, actor_cell* from) noexcept {
  auto* proxy = static_cast<remote_cell*>(to);
  association& a = proxy->peer();
  try {
    if (auto* w = msg.get_if<akt::detail::watch_request>()) {
      const std::uint64_t watcher = exports_.export_cell(akt::detail::cell_of(w->watcher));
      if (watcher == 0) return;  // the watcher is stopping: nobody to tell
      if (proxy->terminated()) {
        akt::detail::cell_of(w->watcher)
            ->post_system(akt::detail::terminated_notice{
                akt::detail::share_pid(to), error(errc::node_lost, "its node was lost")});
        return;
      }
      a.add_watch(w->watcher, akt::detail::share_pid(to));
      akt::remote::control c;
      c.mutable_watch()->set_target_uid(proxy->uid());
      c.mutable_watch()->set_watcher_uid(watcher);
      (void)a.send_frame(lane::control, [&](byte_writer& wr) {
        return encode_proto_frame(wr, frame_type::control, lane::control, 0, c);
      });
    } else if (auto* u = msg.get_if<akt::detail::unwatch_request>()) {
      a.remove_watch(u->watcher, akt::detail::share_pid(to));
      const std::uint64_t watcher = exports_.uid_of(akt::detail::cell_of(u->watcher));
      if (watcher == 0) return;
      akt::remote::control c;
      c.mutable_unwatch()->set_target_uid(proxy->uid());
      c.mutable_unwatch()->set_watcher_uid(watcher);
      (void)a.send_frame(lane::control, [&](byte_writer& wr) {
        return encode_proto_frame(wr, frame_type::control, lane::control, 0, c);
      });
    } else if (auto* t = msg.get_if<akt::detail::terminated_notice>()) {
      // A local actor that a remote actor watched has stopped.
      akt::remote::terminated term;
      term.set_uid(exports_.uid_of(akt::detail::cell_of(t->actor)));
      term.set_watcher_uid(proxy->uid());
      term.set_reason_code(static_cast<std::uint32_t>(t->reason.code()));
      term.set_detail(std::string(t->reason.detail()));
      (void)a.send_frame(lane::control, [&](byte_writer& wr) {
        return encode_proto_frame(wr, frame_type::terminated, lane::control, 0, term);
      });
    } else {
      log(log_level::debug,
          "a system message for a remote actor was dropped: " + std::string(msg.type_name()));
    }
  } catch (...) {
    log(log_level::error, "a system message for a remote actor could not be sent");
  }
  (void)from;
}

bool remote_node::decode(receive_context& env) noexcept {
  message& m = env.message();
  auto* p = m.get_if<encoded_payload>();
  context_access::flags(env) &= ~static_cast<std::uint32_t>(envelope::flag_encoded);
  if (p == nullptr) return true;
  error why;
  codec_scope scope(this);
  if (const serializer* s = find_serializer(p->type_id())) {
    byte_reader r(p->bytes());
    try {
      result<message> d = s->decode(r);
      if (d) {
        m = std::move(*d);  // the encoded payload goes: its credit returns to the sender
        return true;
      }
      why = d.error();
    } catch (const std::exception& ex) {
      why = error(errc::decode_failed, s->name + ": " + ex.what());
    }
  } else {
    why = error(errc::decode_failed,
                "no serializer for type id " + std::to_string(p->type_id()) + " on this node");
  }
  core_->dead_letter(env, why);
  return false;
}

void remote_node::decode_for_dead_letter(message& m) noexcept {
  auto* p = m.get_if<encoded_payload>();
  if (p == nullptr) return;
  codec_scope scope(this);
  try {
    if (result<message> d = decode_message(p->type_id(), p->bytes())) m = std::move(*d);
  } catch (...) {
  }
}

void remote_node::on_actor_stopped(actor_cell* c) noexcept {
  try {
    exports_.remove(c);
  } catch (...) {
  }
}

bool remote_node::alive(const actor_cell* proxy) const noexcept {
  return !static_cast<const remote_cell*>(proxy)->terminated();
}

bool remote_node::can_send(const actor_cell* proxy) const noexcept {
  return static_cast<const remote_cell*>(proxy)->peer().window_open();
}

std::string remote_node::address_of(const actor_cell* c) const {
  if (c->is_remote()) return std::string(c->path());
  return address_ + (c->is_grain() ? "/grain/" : "/user/") + std::string(c->path());
}

// ---------------------------------------------------------------------------------------------
// lookups, spawns and stops on other nodes

result<message> remote_node::control_call(const node_address& node,
                                          const google::protobuf::MessageLite& request,
                                          std::chrono::nanoseconds timeout) {
  if (akt::detail::on_worker_thread()) return errc::blocking_on_worker;
  if (timeout <= std::chrono::nanoseconds::zero()) return errc::invalid_timeout;
  if (closing()) return errc::system_shutting_down;
  std::shared_ptr<association> a = association_for(node.host, node.port);
  auto* slot = new akt::detail::reply_slot();
  const std::int64_t deadline = core_->now_ns() + timeout.count();
  if (error e = a->call_control(request, slot, deadline)) {
    delete slot;
    return e;
  }
  result<message> r = await_reply(slot, timeout);
  if (!r && r.code() == errc::request_timeout && a->incarnation() == 0) {
    return error(errc::unreachable, "no answer from " + a->key() + " (not connected)");
  }
  return r;
}

namespace {
error error_of(const akt::remote::control_reply& r) {
  if (r.error_code() == 0) return {};
  return error(static_cast<errc>(r.error_code()), r.error_detail());
}
}  // namespace

result<pid> remote_node::lookup(std::string_view address, std::chrono::nanoseconds timeout) {
  result<actor_address> a = parse_address(address);
  if (!a) return a.error();
  std::string_view path = a->path;
  if (path.substr(0, 5) == "user/") path.remove_prefix(5);
  if (a->system == core_->name_ && a->node.host == advertised_host_ &&
      a->node.port == advertised_port_) {
    return sys_.find(path);
  }
  return lookup_on(a->node, a->system, path, timeout);
}

result<pid> remote_node::lookup(std::string_view node, std::string_view name,
                                std::chrono::nanoseconds timeout) {
  result<node_address> n = parse_node(node);
  if (!n) return n.error();
  return lookup_on(*n, n->system, name, timeout);
}

result<pid> remote_node::lookup_on(const node_address& node, std::string_view system,
                                   std::string_view name, std::chrono::nanoseconds timeout) {
  akt::remote::control req;
  req.mutable_lookup()->set_name(std::string(name));
  result<message> r = control_call(node, req, timeout);
  if (!r) return r.error();
  const auto* reply = r->get_if<akt::remote::control_reply>();
  if (reply == nullptr) return error(errc::protocol_error, "unexpected answer to a lookup");
  if (error e = error_of(*reply)) return e;
  std::shared_ptr<association> a = association_for(node.host, node.port);
  if (!system.empty() && a->system_name() != system) {
    return error(errc::actor_not_found, "the node at " + a->key() + " runs system '" +
                                            a->system_name() + "', not '" + std::string(system) +
                                            "'");
  }
  if (!reply->found()) {
    return error(errc::actor_not_found, std::string(name) + " on " + a->key());
  }
  return a->proxy(reply->uid(), "user/" + reply->path());
}

result<pid> remote_node::spawn_on(std::string_view node, std::string_view kind,
                                  std::string_view name, std::chrono::nanoseconds timeout) {
  result<node_address> n = parse_node(node);
  if (!n) return n.error();
  if (error e = akt::detail::validate_actor_name(name)) return e;
  if (!n->system.empty()) {
    // Named with its system: spawn nothing on a node that runs another one.
    if (akt::detail::on_worker_thread()) return errc::blocking_on_worker;
    if (timeout <= std::chrono::nanoseconds::zero()) return errc::invalid_timeout;
    std::shared_ptr<association> a = association_for(n->host, n->port);
    if (error e = a->wait_until_up(timeout)) return e;
    if (a->system_name() != n->system) {
      return error(errc::invalid_address, "the node at " + a->key() + " runs system '" +
                                              a->system_name() + "', not '" + n->system + "'");
    }
  }
  akt::remote::control req;
  req.mutable_spawn()->set_kind(std::string(kind));
  req.mutable_spawn()->set_name(std::string(name));
  result<message> r = control_call(*n, req, timeout);
  if (!r) return r.error();
  const auto* reply = r->get_if<akt::remote::control_reply>();
  if (reply == nullptr) return error(errc::protocol_error, "unexpected answer to a spawn");
  if (error e = error_of(*reply)) return e;
  return association_for(n->host, n->port)->proxy(reply->uid(), "user/" + reply->path());
}

result<void> remote_node::stop_remote(actor_cell* proxy, std::chrono::nanoseconds timeout) {
  auto* rc = static_cast<remote_cell*>(proxy);
  if (rc->terminated()) return {};
  akt::remote::control req;
  req.mutable_stop()->set_target_uid(rc->uid());
  result<message> r =
      control_call(node_address{rc->peer().host(), rc->peer().port(), {}}, req, timeout);
  if (!r) return r.error();
  const auto* reply = r->get_if<akt::remote::control_reply>();
  if (reply == nullptr) return error(errc::protocol_error, "unexpected answer to a stop");
  if (error e = error_of(*reply)) return e;
  rc->mark_terminated();
  return {};
}

std::vector<peer_stats> remote_node::peers() const {
  std::vector<std::shared_ptr<association>> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [key, a] : associations_) all.push_back(a);
  }
  std::vector<peer_stats> out;
  out.reserve(all.size());
  for (const auto& a : all) out.push_back(a->stats());
  return out;
}

void remote_node::collect(akt::metrics::snapshot& out) const {
  using akt::metrics::metric_type;
  std::vector<std::shared_ptr<association>> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [key, a] : associations_) all.push_back(a);
  }
  struct family_of {
    const char* name;
    const char* help;
    std::uint64_t peer_stats::*field;
  };
  static constexpr family_of counters[] = {
      {"akt_remote_messages_sent_total", "Messages sent to a peer.", &peer_stats::messages_out},
      {"akt_remote_messages_received_total", "Messages received from a peer.",
       &peer_stats::messages_in},
      {"akt_remote_bytes_sent_total", "Bytes written to a peer's connections (frames whole).",
       &peer_stats::bytes_out},
      {"akt_remote_bytes_received_total", "Bytes of the messages received from a peer.",
       &peer_stats::bytes_in},
      {"akt_remote_frames_sent_total", "Frames written to a peer (messages, replies, control).",
       &peer_stats::frames_out},
      {"akt_remote_frames_received_total", "Message frames received from a peer.",
       &peer_stats::frames_in},
      {"akt_remote_reconnects_total", "Connections to a peer made again after one closed.",
       &peer_stats::reconnects},
      {"akt_remote_refusals_total",
       "Sends to a peer refused here (window full, unreachable, not serializable, too large).",
       &peer_stats::refused},
  };
  std::vector<std::pair<std::string, peer_stats>> figures;
  figures.reserve(all.size());
  for (const auto& a : all) figures.emplace_back(a->key(), a->stats());
  for (const family_of& c : counters) {
    auto& f = out.add_family(c.name, c.help, metric_type::counter);
    for (const auto& [key, st] : figures) f.add({{"peer", key}}, static_cast<double>(st.*c.field));
  }
  auto& up = out.add_family("akt_remote_peer_connected",
                            "1 while both lanes to a peer are up, else 0.", metric_type::gauge);
  for (const auto& [key, st] : figures) up.add({{"peer", key}}, st.connected ? 1.0 : 0.0);
}

// ---------------------------------------------------------------------------------------------
// grains on a given node

namespace {
result<remote_node*> node_of_system(actor_system& sys) {
  akt::detail::remote_extension* r = akt::detail::core_of(sys)->remote();
  if (r == nullptr)
    return error(errc::remoting_disabled, "the system was configured without remoting");
  return static_cast<remote_node*>(r);
}
}  // namespace

error remote_node::declare_lost(std::string_view node, std::string reason) {
  result<node_address> n = parse_node(node);
  if (!n) return n.error();
  if (closing()) return errc::system_shutting_down;
  if (n->host == advertised_host_ && n->port == advertised_port_) {
    return error(errc::invalid_argument,
                 "declare_node_lost: " + std::string(node) + " is this node");
  }
  // Made if this node never sent there: later sends to it are refused at once too.
  std::shared_ptr<association> a = association_for(n->host, n->port);
  if (reason.empty()) reason = "membership says it left";
  a->declare_lost(error(errc::node_lost, a->key() + ": " + reason));
  return {};
}

std::uint64_t local_incarnation(actor_system& sys) noexcept {
  akt::detail::remote_extension* r = akt::detail::core_of(sys)->remote();
  return r == nullptr ? 0 : static_cast<remote_node*>(r)->incarnation();
}

error declare_node_lost(actor_system& sys, std::string_view node, std::string reason) {
  result<remote_node*> rn = node_of_system(sys);
  if (!rn) return rn.error();
  return (*rn)->declare_lost(node, std::move(reason));
}

result<message> ask_grain_on(actor_system& sys, std::string_view node, const grain_identity& id,
                             message msg, std::chrono::nanoseconds timeout) {
  result<remote_node*> rn = node_of_system(sys);
  if (!rn) return rn.error();
  result<node_address> n = parse_node(node);
  if (!n) return n.error();
  if (akt::detail::on_worker_thread()) return errc::blocking_on_worker;
  if (timeout <= std::chrono::nanoseconds::zero()) return errc::invalid_timeout;
  std::shared_ptr<association> a = (*rn)->association_for(n->host, n->port);
  auto* slot = new akt::detail::reply_slot();
  akt::detail::system_core* core = akt::detail::core_of(sys);
  const std::int64_t deadline = core->now_ns() + timeout.count();
  if (error e = a->send_to_grain(id.str(), msg, slot, deadline, false)) {
    delete slot;
    core->dead_letter(std::move(msg), pid(), pid(), e);
    return e;
  }
  return await_reply(slot, timeout);
}

error tell_grain_on(actor_system& sys, std::string_view node, const grain_identity& id, message msg,
                    const grain_tell_options& opts) {
  result<remote_node*> rn = node_of_system(sys);
  if (!rn) return rn.error();
  result<node_address> n = parse_node(node);
  if (!n) return n.error();
  std::shared_ptr<association> a = (*rn)->association_for(n->host, n->port);
  akt::detail::system_core* core = akt::detail::core_of(sys);
  if (opts.one_way) {
    error e = a->send_to_grain(id.str(), msg, nullptr, 0, false);
    if (e) core->dead_letter(std::move(msg), pid(), pid(), e);
    return e;
  }
  if (akt::detail::on_worker_thread()) return errc::blocking_on_worker;
  if (opts.timeout <= std::chrono::nanoseconds::zero()) return errc::invalid_timeout;
  auto* slot = new akt::detail::reply_slot();
  if (error e = a->send_to_grain(id.str(), msg, slot, 0, true)) {
    delete slot;
    core->dead_letter(std::move(msg), pid(), pid(), e);
    return e;
  }
  result<message> r = await_reply(slot, opts.timeout);
  return r ? error() : r.error();
}

namespace {
// set_grain_placement's answer to the grain layer's routing seam: the owner function names a
// node; another node's identities go to a proxy of that grain on it (association::grain_proxy),
// through which every way into a grain (tells, asks, requests, pipes, schedules, activation)
// reaches the owner with the ordinary remote machinery.
class placement_router final : public akt::detail::grain_placement {
 public:
  placement_router(remote_node& node, std::string self, std::string self_address,
                   std::function<std::string(const grain_identity&)> owner)
      : node_(node),
        self_(std::move(self)),
        self_address_(std::move(self_address)),
        owner_(std::move(owner)) {}

  akt::detail::grain_place place(const grain_identity& id) override {
    akt::detail::grain_place at;
    const std::string where = owner_(id);
    if (where.empty() || where == self_ || where == self_address_) return at;
    result<node_address> n = parse_node(where);
    if (!n) {
      node_.log(log_level::warning,
                "grain placement named a bad node for " + id.str() + ": " + n.error().message());
      return at;
    }
    if (n->host + ":" + std::to_string(n->port) == self_) return at;
    at.at = akt::detail::grain_place::where::remote;
    at.target = node_.association_for(n->host, n->port)->grain_proxy(id.str());
    return at;
  }

 private:
  remote_node& node_;
  const std::string self_;          // host:port of this node
  const std::string self_address_;  // akt://system@host:port of this node
  const std::function<std::string(const grain_identity&)> owner_;
};
}  // namespace

// ---------------------------------------------------------------------------------------------
// shutdown

void remote_node::shut_down(std::chrono::steady_clock::time_point deadline,
                            std::vector<std::string>& problems) noexcept {
  if (closing_.exchange(true, std::memory_order_acq_rel)) return;
  // A crash flushes nothing: what was queued for peers is dropped with the connections.
  if (core()->crashing()) deadline = std::chrono::steady_clock::now();
  try {
    std::vector<std::shared_ptr<association>> all;
    std::vector<std::shared_ptr<inbound_link>> links;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& [key, a] : associations_) all.push_back(a);
      links = links_;
    }
    if (listener_) listener_->close();
    for (auto& a : all) a->shut_down(deadline);
    for (auto& l : links) l->close(error(errc::system_shutting_down, "the node stops"));
    if (io_) {
      // The closes above are posted to the I/O threads: let them run (the listening socket is
      // free again when stop() returns, so a new node may bind its port), then stop the threads.
      for (int round = 0; round < 2; ++round) {
        auto done = std::make_shared<std::promise<void>>();
        std::future<void> f = done->get_future();
        asio::post(io_->context(), [done] { done->set_value(); });
        (void)f.wait_for(std::chrono::seconds(1));
      }
      io_->stop();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    links_.clear();
  } catch (const std::exception& e) {
    problems.push_back(std::string("remoting shutdown: ") + e.what());
  }
}

}  // namespace detail

error encode_pid(byte_writer& w, const pid& p) {
  // Only a remote_node sets a codec_scope (peer_services is its base, for associations).
  auto* n = static_cast<detail::remote_node*>(detail::t_codec_node);
  if (n == nullptr) {
    return error(errc::invalid_argument, "encode_pid outside a send to another node");
  }
  const akt::detail::actor_cell* c = akt::detail::cell_of(p);
  std::uint64_t uid = 0;
  if (c != nullptr && !c->is_remote()) {
    uid = n->exports().export_cell(const_cast<akt::detail::actor_cell*>(c));
  }
  if (c == nullptr || (!c->is_remote() && uid == 0)) {  // empty, or a local actor that stopped
    w.put_u8(0);
    return {};
  }
  w.put_u8(1);
  if (c->is_remote()) {  // a third node's actor travels on, as its own node's
    const auto* rc = static_cast<const detail::remote_cell*>(c);
    const std::string_view address = rc->path();  // akt://system@host:port/path
    const auto after_node = address.find('/', address.find('@'));
    w.put_string(rc->peer().key());
    w.put_string(rc->peer().system_name());
    w.put_u64(rc->incarnation());
    w.put_u64(rc->uid());
    w.put_string(after_node == std::string_view::npos ? std::string_view()
                                                      : address.substr(after_node + 1));
    return {};
  }
  w.put_string(n->advertised_host() + ":" + std::to_string(n->advertised_port()));
  w.put_string(n->system_name());
  w.put_u64(n->incarnation());
  w.put_u64(uid);
  w.put_string(std::string(c->is_grain() ? "grain/" : "user/") + std::string(c->path()));
  return {};
}

result<pid> decode_pid(byte_reader& r) {
  // Only a remote_node sets a codec_scope (peer_services is its base, for associations).
  auto* n = static_cast<detail::remote_node*>(detail::t_codec_node);
  if (n == nullptr) {
    return error(errc::invalid_argument, "decode_pid outside a message from another node");
  }
  std::uint8_t tag = 0;
  if (!r.get_u8(tag) || tag > 1) return error(errc::decode_failed, "a pid: bad tag");
  if (tag == 0) return pid();
  std::string_view node, system, path;
  std::uint64_t incarnation = 0, uid = 0;
  if (!r.get_string(node) || !r.get_string(system) || !r.get_u64(incarnation) || !r.get_u64(uid) ||
      !r.get_string(path)) {
    return error(errc::decode_failed, "a pid: truncated");
  }
  if (incarnation == n->incarnation()) return n->exports().resolve(uid);  // one of ours
  result<detail::node_address> where = detail::parse_node(node);
  if (!where) return error(errc::decode_failed, "a pid: " + where.error().message());
  std::shared_ptr<detail::association> a = n->association_for(where->host, where->port);
  pid p = a->proxy(uid, path);
  const std::uint64_t known = a->incarnation();
  if (known != 0 && known != incarnation) {  // of a previous life of that node
    static_cast<detail::remote_cell*>(akt::detail::cell_of(p))->mark_terminated();
  }
  (void)system;
  return p;
}

namespace detail {
result<pid> grain_proxy_on(actor_system& sys, std::string_view node, const grain_identity& id,
                           std::int64_t claim_token) {
  akt::detail::remote_extension* r = akt::detail::core_of(sys)->remote();
  if (r == nullptr)
    return error(errc::remoting_disabled, "the system was configured without remoting");
  result<node_address> n = parse_node(node);
  if (!n) return n.error();
  return static_cast<remote_node*>(r)
      ->association_for(n->host, n->port)
      ->grain_proxy(id.str(), claim_token);
}
}  // namespace detail

error set_grain_placement(actor_system& sys,
                          std::function<std::string(const grain_identity&)> owner) {
  akt::detail::remote_extension* r = akt::detail::core_of(sys)->remote();
  if (r == nullptr)
    return error(errc::remoting_disabled, "the system was configured without remoting");
  if (!owner) return error(errc::invalid_argument, "an empty placement function");
  auto* n = static_cast<detail::remote_node*>(r);
  std::string self = n->advertised_host() + ":" + std::to_string(n->advertised_port());
  auto router = std::make_unique<detail::placement_router>(*n, std::move(self), n->address(),
                                                           std::move(owner));
  if (!akt::detail::install_grain_placement(akt::detail::core_of(sys), std::move(router))) {
    return error(errc::invalid_argument, "this system has a grain placement already");
  }
  return {};
}

namespace detail {

codec_scope::codec_scope(peer_services* n) noexcept : previous_(std::exchange(t_codec_node, n)) {}
codec_scope::~codec_scope() { t_codec_node = previous_; }

remote_node& node_of(akt::detail::system_core* core) noexcept {
  return *static_cast<remote_node*>(core->remote());
}

}  // namespace detail

namespace detail {
namespace {
// Installed before main: every program that includes akt/remote/remote.hpp links this file
// (module_linked), so every such program can start a system with remote settings.
const bool factory_installed = (akt::detail::install_remote_factory(&remote_node::make), true);
}  // namespace
bool module_linked() noexcept { return factory_installed; }
}  // namespace detail

}  // namespace akt::remote
