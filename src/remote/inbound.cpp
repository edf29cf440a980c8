// One connection a peer opened to this node (inbound.hpp): the handshake, then routing.

#include "remote/inbound.hpp"

#include <string>
#include <utility>

#include "actor/cell_extras.hpp"
#include "actor/delivery_fields.hpp"
#include "actor/reply_slot.hpp"
#include "actor/system_core.hpp"
#include "akt/core/assert.hpp"
#include "grain/grain_seams.hpp"
#include "remote/association.hpp"
#include "remote/node.hpp"
#include "remote/wire.hpp"
#include "remote/wire.pb.h"

namespace akt::remote::detail {

using akt::detail::context_access;

namespace {

// Caches of targets per link: bounded, cleared when full (a cache, not the truth).
constexpr std::size_t k_target_cache = 4096;

// The answer to an ask that came from a peer: sent back on this node's association to it.
// `urgent`: the asker's thread sleeps until the answer comes (k_flag_caller_blocked), so
// the answer is written at once, and an ask forwarded with this route keeps the mark.
class remote_reply_route final : public akt::detail::reply_route {
 public:
  remote_reply_route(remote_node& node, std::shared_ptr<association> to, std::uint64_t id,
                     bool urgent)
      : node_(node), to_(std::move(to)), id_(id), urgent_(urgent) {}

  bool complete(result<message>& value) noexcept override {
    send(value);
    delete this;
    return true;  // the peer decides whether anyone still waits
  }
  bool caller_blocked() const noexcept override { return urgent_; }

 private:
  void send(result<message>& value) noexcept {
    codec_scope scope(&node_);  // a pid inside the reply
    try {
      if (value.has_value() && value->empty()) {  // an acknowledgement: type id 0, no bytes
        (void)to_->send_frame(
            lane::ordinary,
            [&](byte_writer& w) { return encode_reply_bytes(w, id_, 0, byte_span()); }, urgent_);
        return;
      }
      if (value.has_value()) {
        const serializer* s = find_serializer(*value);
        if (s == nullptr) {
          const std::string why =
              "the reply " + std::string(value->type_name()) + " has no serializer";
          node_.core()->dead_letter(std::move(*value), pid(), pid(),
                                    error(errc::not_serializable, why));
          send_error(error(errc::not_serializable, why));
          return;
        }
        error e = to_->send_frame(
            lane::ordinary, [&](byte_writer& w) { return encode_reply(w, id_, *s, *value); },
            urgent_);
        if (e) {
          node_.core()->dead_letter(std::move(*value), pid(), pid(),
                                    error(e.code(), "reply to " + to_->key() + ": " + e.message()));
          // Too large to send: the asker hears why now rather than at its deadline.
          if (e == errc::message_too_large)
            send_error(error(e.code(), "the reply: " + e.message()));
        }
        return;
      }
      send_error(value.error());
    } catch (...) {
      node_.log(log_level::error, "a reply could not be sent (out of memory?)");
    }
  }
  void send_error(const error& e) {
    const bool refused = akt::detail::error_access::refused(e);
    (void)to_->send_frame(
        lane::ordinary,
        [&](byte_writer& w) {
          encode_error_reply(w, id_, e.code(), e.detail(), refused);
          return error();
        },
        urgent_);
  }

  remote_node& node_;
  std::shared_ptr<association> to_;
  const std::uint64_t id_;
  const bool urgent_;
};

error refusal(errc code, std::string detail) {
  return akt::detail::error_access::mark_refused(error(code, std::move(detail)));
}

}  // namespace

inbound_link::inbound_link(remote_node& node, std::shared_ptr<connection> c)
    : node_(node), conn_(c) {}

void inbound_link::close(const error& why) {
  auto c = conn_.lock();
  if (!c) return;
  if (node_.core()->crashing())
    c->abort(why);  // as a killed process: the peer's connection is reset
  else
    c->close(why);
}

void inbound_link::on_closed(connection&, const error& why) {
  if (why != errc::system_shutting_down && why != errc::connection_lost && origin_) {
    node_.log(log_level::info,
              "inbound connection from " + origin_->key() + " closed: " + why.message());
  }
  node_.forget_link(this);
}

void inbound_link::grant(std::uint32_t bytes) noexcept {
  const std::uint64_t total = ungranted_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (total < grant_threshold_) return;
  const std::uint64_t give = ungranted_.exchange(0, std::memory_order_relaxed);
  if (give == 0) return;
  if (auto c = conn_.lock()) {
    try {
      (void)c->send([&](std::vector<unsigned char>& out) {
        byte_writer w(out);
        encode_credit(w, lane::ordinary, give);
      });
    } catch (...) {
      // Out of memory: the sender's window shrinks by these bytes; nothing is lost.
    }
  }
}

void inbound_link::on_frame(connection& c, const frame_header& h, byte_span body) {
  // A crashing system (akt::testkit::crash) reads and answers nothing more, as a killed process:
  // its peers see the connection reset (connection_lost for what they wrote), never a refusal.
  if (AKT_UNLIKELY(node_.core()->crashing())) {
    c.abort(error(errc::connection_lost, "the node crashed"));
    return;
  }
  if (!greeted_.load(std::memory_order_relaxed)) {
    if (h.type != frame_type::hello) {
      c.close(error(errc::protocol_error, "the first frame is not a hello"));
      return;
    }
    on_hello(c, body);
    return;
  }
  switch (h.type) {
    case frame_type::tell:
    case frame_type::ask:
      on_envelope(c, h, body);
      return;
    case frame_type::reply: {
      codec_scope scope(&node_);  // decoded here: replies have no turn to wait for
      origin_->count_in(1, k_header_bytes + body.size());
      grant(static_cast<std::uint32_t>(k_header_bytes + body.size()));
      std::uint64_t type_id = 0;
      byte_span payload;
      if (std::string_view bad = decode_reply(body, type_id, payload); !bad.empty()) {
        c.close(error(errc::protocol_error, std::string(bad)));
        return;
      }
      origin_->complete_call(h.correlation, type_id == 0 ? result<message>(message())
                                                         : decode_message(type_id, payload));
      return;
    }
    case frame_type::error_reply: {
      origin_->count_in(1, k_header_bytes + body.size());
      grant(static_cast<std::uint32_t>(k_header_bytes + body.size()));
      errc code = errc::ok;
      std::string_view detail;
      if (std::string_view bad = decode_error_reply(body, code, detail); !bad.empty()) {
        c.close(error(errc::protocol_error, std::string(bad)));
        return;
      }
      error e(code, std::string(detail));
      if ((h.flags & k_flag_refused) != 0) e = akt::detail::error_access::mark_refused(e);
      origin_->complete_call(h.correlation, std::move(e));
      return;
    }
    case frame_type::control:
      on_control(c, h, body);
      return;
    case frame_type::control_reply: {
      akt::remote::control_reply r;
      if (std::string_view bad = decode_proto(body, r); !bad.empty()) {
        c.close(error(errc::protocol_error, std::string(bad)));
        return;
      }
      origin_->complete_call(h.correlation, message(std::move(r)));
      return;
    }
    case frame_type::terminated: {
      akt::remote::terminated t;
      if (std::string_view bad = decode_proto(body, t); !bad.empty()) {
        c.close(error(errc::protocol_error, std::string(bad)));
        return;
      }
      const auto code = static_cast<errc>(t.reason_code());
      origin_->on_terminated(t.uid(), t.watcher_uid(),
                             code == errc::ok ? error() : error(code, t.detail()));
      return;
    }
    default:
      c.close(error(errc::protocol_error, "unexpected frame type on an inbound connection"));
  }
}

void inbound_link::on_hello(connection& c, byte_span body) {
  akt::remote::hello h;
  auto reject = [&](std::string why) {
    akt::remote::hello_reject r;
    r.set_reason(why);
    (void)c.send([&](std::vector<unsigned char>& out) {
      byte_writer w(out);
      (void)encode_proto_frame(w, frame_type::hello_reject, lane::control, 0, r);
    });
    c.close_after_flush(error(errc::protocol_error, "handshake refused: " + why));
  };
  if (!decode_proto(body, h).empty()) {
    c.close(error(errc::protocol_error, "malformed hello"));
    return;
  }
  if (h.min_version() > k_wire_version || h.max_version() < k_wire_version) {
    reject("wrong version: this node speaks " + std::to_string(k_wire_version) + ", the peer " +
           std::to_string(h.min_version()) + ".." + std::to_string(h.max_version()));
    return;
  }
  if (h.lane() >= k_lanes || h.port() == 0 || h.port() > 65535 || h.host().empty()) {
    reject("malformed hello (lane, host or port)");
    return;
  }
  if (node_.closing()) {
    reject("the node is shutting down");
    return;
  }
  // The node answers on its own connections to the address the hello claims: it dials only
  // an address it can verify, and strangers create a bounded number of peers.
  if (!node_.claim_verified(c, h.host())) {
    reject("the hello claims host '" + h.host() + "', but the connection comes from " +
           c.remote_endpoint() +
           " (advertise the address peers see, or use mutual TLS to vouch for it)");
    return;
  }
  origin_ = node_.association_for_inbound(h.host(), static_cast<std::uint16_t>(h.port()));
  if (!origin_) {
    reject(node_.closing() ? std::string("this node is shutting down")
                           : "this node takes no more peers from inbound handshakes (" +
                                 std::to_string(k_max_inbound_peers) + ")");
    return;
  }
  greeted_.store(true, std::memory_order_release);
  origin_->observe_incarnation(h.incarnation());
  const std::uint64_t window =
      h.window_bytes() != 0 ? h.window_bytes() : node_.config().window_bytes;
  grant_threshold_ = std::max<std::uint64_t>(1, window / 8);
  const remote_config& cfg = node_.config();
  c.set_heartbeat(cfg.heartbeat_interval, cfg.heartbeat_misses);
  akt::remote::hello_ack ack;
  ack.set_system(node_.system_name());
  ack.set_incarnation(node_.incarnation());
  ack.set_max_frame_bytes(cfg.max_frame_bytes);
  ack.set_window_bytes(cfg.window_bytes);
  (void)c.send([&](std::vector<unsigned char>& out) {
    byte_writer w(out);
    (void)encode_proto_frame(w, frame_type::hello_ack, static_cast<lane>(h.lane()), 0, ack);
  });
}

pid inbound_link::target(std::uint64_t uid) {
  if (auto it = targets_.find(uid); it != targets_.end()) return it->second;
  pid p = node_.exports().resolve(uid);
  if (!p) return p;
  if (targets_.size() >= k_target_cache) targets_.clear();
  targets_.emplace(uid, p);
  return p;
}

void inbound_link::refuse(const frame_header& h, const error& why) {
  if (h.type != frame_type::ask) return;
  (void)origin_->send_frame(lane::ordinary, [&](byte_writer& w) {
    encode_error_reply(w, h.correlation, why.code(), why.detail(), true);
    return error();
  });
}

void inbound_link::on_envelope(connection& c, const frame_header& h, byte_span body) {
  const auto credit = static_cast<std::uint32_t>(k_header_bytes + body.size());
  origin_->count_in(1, credit);
  envelope_fields f;
  byte_span payload;
  if (std::string_view bad = decode_envelope(body, f, payload); !bad.empty()) {
    c.close(error(errc::protocol_error, std::string(bad)));
    return;
  }
  akt::detail::system_core* core = node_.core();
  if (f.target_kind == envelope_target::grain) {
    deliver_to_grain(h, f, payload, credit);
    return;
  }
  pid to = target(f.target_uid);
  if (!to) {
    const error why =
        refusal(errc::actor_not_found,
                "no actor with uid " + std::to_string(f.target_uid) + " on " + node_.address());
    refuse(h, why);
    result<message> m = decode_message(f.type_id, payload);
    core->dead_letter(m ? std::move(*m) : message(), pid(), pid(), why);
    grant(credit);
    return;
  }
  akt::detail::actor_cell* cell = akt::detail::cell_of(to);
  // A poison pill travels on the system queue, ahead of user messages: it is a control message
  // with no payload, so it is made here rather than decoded on the turn.
  constexpr std::uint64_t k_poison_pill = type_id_of(poison_pill::akt_type_name);
  const bool pill = f.type_id == k_poison_pill;
  envelope_ptr owned =
      pill ? akt::detail::make_envelope(cell, poison_pill{})
           : akt::detail::make_envelope(
                 cell, encoded_payload(f.type_id, payload, shared_from_this(), credit));
  if (pill) grant(credit);
  akt::detail::delivery_fields d = delivery_of(h, f);
  if (!pill) d.flags |= envelope::flag_encoded;
  akt::detail::fill_envelope(*static_cast<receive_context*>(owned.get()), d);
  // A refusal (dead, mailbox full, shutting down) dead-letters it and answers an ask, marked.
  (void)cell->deliver(static_cast<receive_context*>(owned.release()));
}

akt::detail::delivery_fields inbound_link::delivery_of(const frame_header& h,
                                                       const envelope_fields& f) {
  akt::detail::delivery_fields d;
  d.flags = envelope::flag_remote_origin;
  if (AKT_UNLIKELY(f.trace_span_id != 0)) {
    // A traced message: its server span opens now (its arrival) and closes with its handler;
    // a node that does not trace drops the context (the message is handled all the same).
    if (node_.core()->tracer() != nullptr) {
      span_context ctx;
      ctx.trace_id = f.trace_id;
      ctx.span_id = f.trace_span_id;
      ctx.flags = f.trace_flags;
      d.trace.reset(new (std::nothrow) akt::detail::trace_state{
          ctx, akt::detail::tracer::new_span_id(), akt::detail::unix_now_ns()});
    }
  }
  if (f.sender_uid != 0) {
    pid sender = origin_->proxy(f.sender_uid, "");
    d.sender = akt::detail::cell_of(sender);
    d.sender->add_ref();
  }
  if (h.type == frame_type::ask) {
    d.route = new remote_reply_route(node_, origin_, h.correlation,
                                     (h.flags & k_flag_caller_blocked) != 0);
    if ((f.flags & k_envelope_acknowledged) != 0) d.flags |= envelope::flag_grain_ack;
  }
  if (f.deadline_left_ns != 0) {
    // Time left, not a clock reading: the nodes' clocks need not agree.
    d.deadline_ns = node_.core()->now_ns() + static_cast<std::int64_t>(f.deadline_left_ns);
  }
  return d;
}

void inbound_link::deliver_to_grain(const frame_header& h, const envelope_fields& f,
                                    byte_span payload, std::uint32_t credit) {
  const std::string_view identity = f.target_grain;
  const auto slash = identity.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == identity.size()) {
    const error why = refusal(errc::invalid_actor_name,
                              "not a grain identity (kind/name): " + std::string(identity));
    refuse(h, why);
    grant(credit);
    return;
  }
  grain_identity id{std::string(identity.substr(0, slash)),
                    std::string(identity.substr(slash + 1))};
  akt::detail::grain_delivery d;
  d.msg = message(encoded_payload(f.type_id, payload, shared_from_this(), credit));
  static_cast<akt::detail::delivery_fields&>(d) = delivery_of(h, f);
  d.claim_token = f.claim_token;
  d.flags |= envelope::flag_encoded;
  akt::detail::deliver_to_grain(node_.core(), id, std::move(d));
}

void inbound_link::on_control(connection& c, const frame_header& h, byte_span body) {
  akt::remote::control req;
  if (std::string_view bad = decode_proto(body, req); !bad.empty()) {
    c.close(error(errc::protocol_error, std::string(bad)));
    return;
  }
  std::shared_ptr<association> origin = origin_;
  const std::uint64_t id = h.correlation;
  auto answer = [origin, id](const akt::remote::control_reply& r) {
    (void)origin->send_frame(lane::control, [&](byte_writer& w) {
      return encode_proto_frame(w, frame_type::control_reply, lane::control, id, r);
    });
  };
  auto fail = [](akt::remote::control_reply& r, const error& e) {
    r.set_error_code(static_cast<std::uint32_t>(e.code()));
    r.set_error_detail(std::string(e.detail()));
  };
  remote_node& node = node_;
  switch (req.request_case()) {
    case akt::remote::control::kLookup: {
      akt::remote::control_reply r;
      result<pid> p = node.system().find(req.lookup().name());
      if (p) {
        const std::uint64_t uid = node.exports().export_cell(akt::detail::cell_of(*p));
        r.set_found(uid != 0);
        r.set_uid(uid);
        r.set_path(std::string(akt::detail::cell_of(*p)->path()));
      }
      answer(r);
      return;
    }
    case akt::remote::control::kWatch:
    case akt::remote::control::kUnwatch: {
      const bool watch = req.request_case() == akt::remote::control::kWatch;
      const auto& w = watch ? req.watch() : req.unwatch();
      pid watcher = origin_->proxy(w.watcher_uid(), "");
      pid t = target(w.target_uid());
      if (!t) {
        if (watch) {  // like a local watch of a stopped actor: terminated at once
          akt::remote::terminated term;
          term.set_uid(w.target_uid());
          term.set_watcher_uid(w.watcher_uid());
          (void)origin_->send_frame(lane::control, [&](byte_writer& wr) {
            return encode_proto_frame(wr, frame_type::terminated, lane::control, 0, term);
          });
        }
        return;
      }
      if (watch)
        akt::detail::cell_of(t)->post_system(akt::detail::watch_request{watcher});
      else
        akt::detail::cell_of(t)->post_system(akt::detail::unwatch_request{watcher});
      return;
    }
    case akt::remote::control::kSpawn: {
      // Spawning runs the actor's pre_start: user code, never on an I/O thread.
      auto task = [&node, answer, fail, kind = req.spawn().kind(), name = req.spawn().name()] {
        akt::remote::control_reply r;
        akt::detail::system_core::actor_factory make = node.core()->find_actor_kind(kind);
        if (!make) {
          fail(r,
               error(errc::invalid_argument, "no actor kind '" + kind + "' on " + node.address()));
        } else if (result<pid> p = make(node.system(), name); !p) {
          fail(r, p.error());
        } else {
          r.set_found(true);
          r.set_uid(node.exports().export_cell(akt::detail::cell_of(*p)));
          r.set_path(std::string(akt::detail::cell_of(*p)->path()));
        }
        answer(r);
      };
      if (!node.core()->run_blocking(std::move(task))) {
        akt::remote::control_reply r;
        fail(r, refusal(errc::system_shutting_down, node.address() + " is stopping"));
        answer(r);
      }
      return;
    }
    case akt::remote::control::kStop: {
      pid t = target(req.stop().target_uid());
      auto task = [&node, answer, fail, t] {
        akt::remote::control_reply r;
        if (!t) {
          fail(r, error(errc::actor_not_found, "no such actor on " + node.address()));
        } else if (result<void> s = node.system().stop_actor(t, std::chrono::seconds(30)); !s) {
          fail(r, s.error());
        }
        answer(r);
      };
      if (!node.core()->run_blocking(std::move(task))) {
        akt::remote::control_reply r;
        fail(r, refusal(errc::system_shutting_down, node.address() + " is stopping"));
        answer(r);
      }
      return;
    }
    default:
      c.close(error(errc::protocol_error, "unknown control request"));
  }
}

}  // namespace akt::remote::detail
