#include "akt/actor/router.hpp"

#include <algorithm>
#include <random>

#include "actor/system_core.hpp"
#include "akt/actor/detail/actor_cell.hpp"
#include "akt/actor/events.hpp"

namespace akt {

std::string_view to_string(routing r) noexcept {
  switch (r) {
    case routing::round_robin:
      return "round_robin";
    case routing::random:
      return "random";
    case routing::broadcast:
      return "broadcast";
    case routing::consistent_hash:
      return "consistent_hash";
    case routing::scatter_gather_first:
      return "scatter_gather_first";
    case routing::tail_chopping:
      return "tail_chopping";
  }
  return "?";
}

namespace detail {

// A scatter_gather_first ask in flight, shared by the continuations of its requests.
struct router_gather {
  reply_handle reply;
  std::size_t outstanding = 0;  // requests whose continuation has not run yet
  bool done = false;            // answered (or failed): later replies are dropped
  error last = errc::request_timeout;
};

// A tail_chopping ask in flight, shared by the continuations of its requests; its ticks hold a
// weak reference, so a tick that comes after the last continuation finds nothing to do.
struct router_chop {
  reply_handle reply;
  message msg;             // the original, copied for each routee but the last
  std::vector<pid> order;  // the routees in the order they are tried
  std::size_t next = 0;    // the next routee in `order` to try
  std::size_t outstanding = 0;
  std::chrono::steady_clock::time_point deadline;
  std::chrono::nanoseconds interval{};
  bool done = false;
  error last = errc::request_timeout;
};

namespace {

// Scheduled `interval` after attempt `attempt`: try the next routee if nothing else was tried
// since (a failed reply tries the next one at once).
struct chop_tick {
  std::weak_ptr<router_chop> chop;
  std::size_t attempt;
};

// FNV-1a, then murmur3's 64-bit finaliser: FNV alone leaves similar strings ("routee-1#7",
// "routee-1#8") close together, and the ring needs their points spread out.
std::uint64_t hash64(std::string_view s) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

void gather_reply(router_gather& g, result<message> reply) {
  --g.outstanding;
  if (g.done) return;  // the first reply already answered
  if (reply) {
    g.done = true;
    g.reply.reply_message(std::move(*reply));
    return;
  }
  g.last = reply.error();
  if (g.outstanding == 0) {
    g.done = true;
    g.reply.reply_error(g.last);
  }
}

void chop_next(receive_context& ctx, const std::shared_ptr<router_chop>& c);

void chop_reply(receive_context& ctx, const std::shared_ptr<router_chop>& c,
                result<message> reply) {
  --c->outstanding;
  if (c->done) return;
  if (reply) {
    c->done = true;
    c->msg.reset();
    c->reply.reply_message(std::move(*reply));
    return;
  }
  c->last = reply.error();
  chop_next(ctx, c);  // a failure does not wait for the interval
}

// Requests the next live routee (and schedules the one after), or, when every routee was tried
// or the time is up and no request is left, fails the ask with the last error.
void chop_next(receive_context& ctx, const std::shared_ptr<router_chop>& c) {
  while (c->next < c->order.size()) {
    const pid& r = c->order[c->next++];
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
        c->deadline - std::chrono::steady_clock::now());
    if (left <= std::chrono::nanoseconds::zero()) {
      c->next = c->order.size();
      break;
    }
    if (!r.alive()) continue;
    const bool last = c->next == c->order.size();
    message m = last ? std::move(c->msg) : std::move(*c->msg.try_clone());
    ++c->outstanding;
    ctx.request(r, std::move(m), left, [c](receive_context& rc, result<message> reply) {
      chop_reply(rc, c, std::move(reply));
    });
    if (!last) {
      (void)ctx.schedule_once(chop_tick{c, c->next}, std::min(c->interval, left));
    }
    return;
  }
  if (c->outstanding == 0) {
    c->done = true;
    c->reply.reply_error(c->last);
  }
}

}  // namespace

error validate(const router_options& o) {
  if (o.pool_size == 0) return error(errc::invalid_argument, "a router needs pool_size > 0");
  switch (o.strategy) {
    case routing::consistent_hash:
      if (!o.key) return error(errc::invalid_argument, "consistent_hash needs a key function");
      if (o.virtual_nodes == 0) {
        return error(errc::invalid_argument, "consistent_hash needs virtual_nodes > 0");
      }
      break;
    case routing::tail_chopping:
      if (o.interval <= std::chrono::nanoseconds::zero()) {
        return error(errc::invalid_argument, "tail_chopping needs interval > 0");
      }
      [[fallthrough]];
    case routing::scatter_gather_first:
      if (o.within <= std::chrono::nanoseconds::zero()) {
        return error(errc::invalid_argument,
                     std::string(to_string(o.strategy)) + " needs within > 0");
      }
      break;
    case routing::round_robin:
    case routing::random:
    case routing::broadcast:
      break;
  }
  return {};
}

router_actor::router_actor(router_options options, routee_factory factory)
    : options_(std::move(options)), factory_(std::move(factory)) {
  std::random_device rd;
  rng_ = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

error router_actor::pre_start(actor_context& ctx) {
  routees_.reserve(options_.pool_size);
  for (std::size_t i = 0; i < options_.pool_size; ++i) {
    result<pid> r = factory_(ctx.system(), detail::cell_of(ctx.self()),
                             "routee-" + std::to_string(i), options_.routee_supervisor);
    if (!r)
      return error(r.error().code(), "routee-" + std::to_string(i) + ": " + r.error().message());
    routees_.push_back(std::move(*r));
  }
  if (options_.strategy == routing::consistent_hash) rebuild_ring();
  return {};
}

void router_actor::receive(receive_context& ctx) {
  if (!watching_) {
    // Not in pre_start: watching needs a receive_context. A routee that stopped before this is
    // reported at once.
    for (const pid& r : routees_) ctx.watch(r);
    watching_ = true;
  }
  if (auto* t = ctx.get_if<terminated>()) {
    if (remove_routee(t->actor)) return;
  } else if (auto* tick = ctx.get_if<chop_tick>()) {
    std::shared_ptr<router_chop> c = tick->chop.lock();
    if (c && !c->done && c->next == tick->attempt) chop_next(ctx, c);
    return;
  } else if (ctx.is<get_routees>()) {
    ctx.reply(live_routees());
    return;
  } else if (auto* b = ctx.get_if<broadcast>()) {
    message inner = std::move(b->msg);  // b lives in ctx.message(): move out before replacing
    ctx.message() = std::move(inner);
    to_all(ctx);
    return;
  }
  route(ctx);
}

void router_actor::route(receive_context& ctx) {
  const pid* to = nullptr;
  switch (options_.strategy) {
    case routing::round_robin:
      to = next_in_turn();
      break;
    case routing::random:
      to = at_random();
      break;
    case routing::consistent_hash: {
      std::string key;
      try {
        key = options_.key(ctx.message());
      } catch (const std::exception& e) {
        refuse(ctx, error(errc::handler_failed, std::string("routing key threw: ") + e.what()));
        return;
      } catch (...) {
        refuse(ctx, error(errc::handler_failed, "routing key threw"));
        return;
      }
      to = by_key(key);
      break;
    }
    case routing::broadcast:
      to_all(ctx);
      return;
    case routing::scatter_gather_first:
      scatter(ctx);
      return;
    case routing::tail_chopping:
      tail_chop(ctx);
      return;
  }
  if (to == nullptr) {
    refuse(ctx, error(errc::dead, "the router has no routee left"));
    return;
  }
  (void)ctx.forward(*to);  // a refusal is a dead letter and fails an ask
}

void router_actor::to_all(receive_context& ctx) {
  std::size_t last = routees_.size();
  for (std::size_t i = 0; i < routees_.size(); ++i) {
    if (routees_[i].alive()) last = i;
  }
  if (!can_fan_out(ctx, last != routees_.size(), "a broadcast")) return;
  // Copies with the original sender; the original (and its reply route) goes to the last.
  actor_cell* sender = context_access::sender(ctx);
  for (std::size_t i = 0; i < last; ++i) {
    if (!routees_[i].alive()) continue;
    actor_cell* to = detail::cell_of(routees_[i]);
    (void)deliver(sender, to, make_envelope(to, std::move(*ctx.message().try_clone())));
  }
  (void)ctx.forward(routees_[last]);
}

void router_actor::scatter(receive_context& ctx) {
  // A snapshot: each of these gets a request (one that stops meanwhile answers errc::dead).
  const std::vector<pid> targets = live_routees();
  if (!can_fan_out(ctx, !targets.empty(), "scatter_gather_first")) return;
  const std::chrono::nanoseconds timeout = budget(ctx);
  if (timeout <= std::chrono::nanoseconds::zero()) {
    refuse(ctx, errc::request_timeout);
    return;
  }
  auto g = std::make_shared<router_gather>();
  g->reply = ctx.defer_reply();
  g->outstanding = targets.size();
  for (std::size_t i = 0; i < targets.size(); ++i) {
    // The original goes to the last one, copies to the others.
    message m =
        i + 1 == targets.size() ? std::move(ctx.message()) : std::move(*ctx.message().try_clone());
    ctx.request(targets[i], std::move(m), timeout, [g](receive_context&, result<message> reply) {
      gather_reply(*g, std::move(reply));
    });
  }
}

void router_actor::tail_chop(receive_context& ctx) {
  std::vector<pid> order = live_routees();
  if (!can_fan_out(ctx, !order.empty(), "tail_chopping")) return;
  const std::chrono::nanoseconds timeout = budget(ctx);
  if (timeout <= std::chrono::nanoseconds::zero()) {
    refuse(ctx, errc::request_timeout);
    return;
  }
  for (std::size_t i = order.size(); i > 1; --i) {  // Fisher-Yates
    std::swap(order[i - 1], order[random() % i]);
  }
  auto c = std::make_shared<router_chop>();
  c->reply = ctx.defer_reply();
  c->msg = std::move(ctx.message());
  c->order = std::move(order);
  c->deadline = std::chrono::steady_clock::now() + timeout;
  c->interval = options_.interval;
  chop_next(ctx, c);
}

void router_actor::refuse(receive_context& ctx, const error& why) {
  cell_system(detail::cell_of(ctx.self()))->dead_letter(ctx, why);
}

bool router_actor::can_fan_out(receive_context& ctx, bool have_routees, std::string_view who) {
  if (!have_routees) {
    refuse(ctx, error(errc::dead, "the router has no routee left"));
    return false;
  }
  if (!ctx.message().copyable()) {
    refuse(ctx, error(errc::invalid_argument, std::string(who) + " needs a copyable message, not " +
                                                  std::string(ctx.message().type_name())));
    return false;
  }
  return true;
}

std::chrono::nanoseconds router_actor::budget(const receive_context& ctx) const {
  std::chrono::nanoseconds t = options_.within;
  if (auto d = ctx.deadline()) {
    t = std::min(t, std::chrono::duration_cast<std::chrono::nanoseconds>(
                        *d - std::chrono::steady_clock::now()));
  }
  return t;
}

const pid* router_actor::next_in_turn() noexcept {
  const std::size_t n = routees_.size();
  for (std::size_t i = 0; i < n; ++i) {
    const pid& r = routees_[next_++ % n];
    if (r.alive()) return &r;
  }
  return nullptr;
}

const pid* router_actor::at_random() noexcept {
  const std::size_t n = routees_.size();
  if (n == 0) return nullptr;
  const std::size_t first = static_cast<std::size_t>(random() % n);
  for (std::size_t i = 0; i < n; ++i) {
    const pid& r = routees_[(first + i) % n];
    if (r.alive()) return &r;
  }
  return nullptr;
}

const pid* router_actor::by_key(std::string_view key) const noexcept {
  if (ring_.empty()) return nullptr;
  const std::uint64_t h = hash64(key);
  const auto it =
      std::lower_bound(ring_.begin(), ring_.end(), h,
                       [](const auto& point, std::uint64_t v) { return point.first < v; });
  const std::size_t at = static_cast<std::size_t>(it - ring_.begin());
  // Clockwise from the key's point to the first live routee: a routee that stopped but whose
  // terminated notice has not come yet hands its keys on as its removal will.
  for (std::size_t i = 0; i < ring_.size(); ++i) {
    const pid& r = routees_[ring_[(at + i) % ring_.size()].second];
    if (r.alive()) return &r;
  }
  return nullptr;
}

bool router_actor::remove_routee(const pid& gone) {
  auto it = std::find(routees_.begin(), routees_.end(), gone);
  if (it == routees_.end()) return false;
  routees_.erase(it);
  if (options_.strategy == routing::consistent_hash) rebuild_ring();
  return true;
}

void router_actor::rebuild_ring() {
  ring_.clear();
  ring_.reserve(routees_.size() * options_.virtual_nodes);
  std::string point;
  for (std::size_t i = 0; i < routees_.size(); ++i) {
    // Points from the routee's name, not its index: they stay put when another routee leaves.
    for (unsigned v = 0; v < options_.virtual_nodes; ++v) {
      point.assign(routees_[i].name());
      point += '#';
      point += std::to_string(v);
      ring_.emplace_back(hash64(point), static_cast<std::uint32_t>(i));
    }
  }
  std::sort(ring_.begin(), ring_.end());
}

std::vector<pid> router_actor::live_routees() const {
  std::vector<pid> out;
  out.reserve(routees_.size());
  for (const pid& r : routees_) {
    if (r.alive()) out.push_back(r);
  }
  return out;
}

std::uint64_t router_actor::random() noexcept {  // splitmix64
  std::uint64_t z = (rng_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace detail
}  // namespace akt
