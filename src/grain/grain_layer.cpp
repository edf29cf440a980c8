// The grain layer of one actor system: kinds, the activation directory, activation,
// deactivation (idle and at shutdown), and the host actor that runs a grain inside an actor cell.
//
// Activation. The first sender of a message to an identity that has no activation creates the
// activation's cell, enters it in the directory with a gate, and starts it on its own thread:
// pre_start builds the grain and runs on_activate (all attempts, within the activation timeout).
// Senders that find the gate wait on it; then the message goes to the mailbox. So a failed
// activation reaches every caller that was waiting for it (one-way ones too), nothing stays
// registered, and the next message tries again.
//
// Deactivation. The idle timer only enqueues a check message. On the grain's turn, with no
// message waiting and none handled since the timer was armed, on_deactivate runs; then, under
// the directory's shard lock, the activation leaves the directory if its mailbox is still
// empty. Otherwise the messages that arrived during on_deactivate stay in the same mailbox and
// a fresh instance is built and activated in place, so they reach a fresh activation in arrival
// order. A sender that took the activation from the directory just before it left may find its
// cell closed: it gets errc::dead, and a resend activates the grain again.
//
// Shutdown (actor_system::stop, after the hooks): the layer stops accepting sends and
// activations, puts a marker at the end of every activation's mailbox (capacity does not apply
// to it), and waits until each has handled what was queued before the marker and deactivated.
// Grains still busy at the deadline are reported and abandoned: on_deactivate never runs for
// them.

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actor/name_registry.hpp"
#include "actor/system_core.hpp"
#include "akt/core/clock.hpp"
#include "akt/core/thread.hpp"
#include "akt/grain/grains.hpp"

namespace akt {
namespace detail {

struct grain_kind {
  std::string name;
  grain_cell_factory factory;
};

namespace {

// Control messages of the host (user-queue messages, so they keep their place behind what was
// queued before them).
struct grain_idle_check {};
struct grain_shutdown_marker {};

constexpr std::size_t k_directory_shards = 64;  // power of two; spreads sender lock contention

// Signals the end of an activation to the senders that wait for it.
struct activation_gate {
  std::atomic<int> done{0};  // writer: the activating thread (release); readers: waiters
  error result;              // written before done
};

error caught(std::string_view where) {
  try {
    throw;
  } catch (const std::exception& e) {
    return error(errc::handler_failed, std::string(where) + " threw: " + e.what());
  } catch (...) {
    return error(errc::handler_failed, std::string(where) + " threw");
  }
}

}  // namespace

// Access to the host's private state for the layer.
struct grain_host_access {
  static grain_host_base& of(actor_cell* c) noexcept {
    return *static_cast<grain_host_base*>(c->instance());
  }
  static std::atomic<std::int64_t>& queued(grain_host_base& h) noexcept { return h.queued_; }
  static std::shared_ptr<const grain_settings>& settings(grain_host_base& h) noexcept {
    return h.settings_;
  }
  static error*& activation_error(grain_host_base& h) noexcept { return h.activation_error_; }
};

// Contract: every member may be called from any thread. Directory shards are guarded by their
// mutex (short sections: no user code runs under one); kinds and settings by kinds_mutex_.
// The directory holds one reference on every cell it lists.
class grain_layer final : public system_extension {
 public:
  explicit grain_layer(system_core* core) : core_(core) {}
  ~grain_layer() override {
    for (auto& s : shards_) {
      for (auto& [key, e] : s.map) e.cell->release();
    }
  }

  result<const grain_kind*> register_kind(std::string_view name, grain_cell_factory factory,
                                          const grain_options* defaults) {
    std::lock_guard<std::mutex> lock(kinds_mutex_);
    auto it = kinds_.find(name);
    if (it == kinds_.end()) {
      auto k = std::make_unique<grain_kind>();
      k->name = std::string(name);
      k->factory = factory;
      it = kinds_.emplace(k->name, std::move(k)).first;
      defaults_[it->second.get()] = settle(nullptr, grain_options{});
    }
    if (defaults != nullptr) defaults_[it->second.get()] = settle(nullptr, *defaults);
    return static_cast<const grain_kind*>(it->second.get());
  }

  result<const grain_kind*> find_kind(std::string_view name) {
    std::lock_guard<std::mutex> lock(kinds_mutex_);
    auto it = kinds_.find(name);
    if (it == kinds_.end())
      return error(errc::grain_kind_unknown, "no grain kind '" + std::string(name) + "'");
    return static_cast<const grain_kind*>(it->second.get());
  }

  // The kind's declared settings with per_call on top.
  std::shared_ptr<const grain_settings> settings_for(const grain_kind* k,
                                                     const grain_options* per_call) {
    std::lock_guard<std::mutex> lock(kinds_mutex_);
    const auto& base = defaults_[k];
    if (per_call == nullptr) return base;
    return settle(base.get(), *per_call);
  }

  // The cell of the identity's activation (activating it if needed), with a reference.
  result<pid> acquire(const grain_kind* kind, std::string_view name,
                      const grain_options* per_call) {
    if (error e = refuse_now()) return e;
    if (error e = validate_actor_name(name)) return e;
    std::string key;
    key.reserve(kind->name.size() + 1 + name.size());
    key.append(kind->name).append(1, '/').append(name);
    shard& s = shard_of(key);
    for (;;) {
      std::shared_ptr<activation_gate> gate;
      {
        std::unique_lock<std::mutex> lock(s.mutex);
        auto it = s.map.find(key);
        if (it != s.map.end()) {
          if (!it->second.gate) return pid::share(it->second.cell);
          gate = it->second.gate;
        } else {
          if (closing_.load(std::memory_order_acquire)) return errc::system_shutting_down;
          return activate(lock, s, kind, key, per_call);
        }
      }
      // Someone else is activating it: wait for the outcome, then look again.
      gate->done.wait(0, std::memory_order_acquire);
      if (gate->result) return gate->result;
    }
  }

  // Removes the directory entry of `cell` if it is still there (and still the same cell).
  // With require_empty, only while the cell's mailbox is empty (turn owner), and returns false
  // when it is not.
  bool leave(actor_cell* cell, bool require_empty) {
    shard& s = shard_of(cell->path());
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      auto it = s.map.find(cell->path());
      if (it == s.map.end() || it->second.cell != cell) return true;
      if (require_empty && !cell->user_backlog_empty()) return false;
      s.map.erase(it);
    }
    cell->release();
    return true;
  }

  void before_actors_stop(std::chrono::steady_clock::time_point deadline,
                          std::vector<std::string>& problems, bool& timed_out) override {
    closing_.store(true, std::memory_order_seq_cst);
    std::vector<pid> cells;
    for (auto& s : shards_) {
      std::lock_guard<std::mutex> lock(s.mutex);
      for (auto& [key, e] : s.map) {
        if (!e.gate) cells.push_back(pid::share(e.cell));
      }
    }
    // Activations still in progress add themselves after they finish (see activate).
    for (const pid& p : cells) post_marker(p.cell());
    if (core_->dispatcher_.manual()) {  // deterministic mode: this thread runs the grains' turns
      while (!directory_empty_of_active() && std::chrono::steady_clock::now() < deadline) {
        if (!core_->dispatcher_.run_one())
          std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    bool all = core_->wait_for_deaths(deadline, [&] { return directory_empty_of_active(); });
    if (!all) {
      abandoned_.store(true, std::memory_order_seq_cst);
      std::size_t left = 0;
      std::string names;
      for (auto& s : shards_) {
        std::lock_guard<std::mutex> lock(s.mutex);
        for (auto& [key, e] : s.map) {
          if (left++ < 8) names.append(names.empty() ? "" : ", ").append(key);
        }
      }
      timed_out = true;
      problems.push_back(std::to_string(left) + " grains still busy at the shutdown timeout (" +
                         names + "); abandoned without on_deactivate");
    }
    std::lock_guard<std::mutex> lock(problems_mutex_);
    for (auto& p : deactivation_problems_) problems.push_back(std::move(p));
    deactivation_problems_.clear();
  }

  void report_deactivation_failure(std::string what) {
    std::lock_guard<std::mutex> lock(problems_mutex_);
    deactivation_problems_.push_back(std::move(what));
  }

  bool abandoned() const noexcept { return abandoned_.load(std::memory_order_acquire); }
  bool closing() const noexcept { return closing_.load(std::memory_order_acquire); }
  void count_activation() noexcept { activations_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t activations() const noexcept {
    return activations_.load(std::memory_order_relaxed);
  }

  std::vector<grain_identity> active() {
    std::vector<grain_identity> out;
    for (auto& s : shards_) {
      std::lock_guard<std::mutex> lock(s.mutex);
      for (auto& [key, e] : s.map) {
        if (e.gate) continue;
        const auto slash = key.rfind('/');
        out.push_back({std::string(key.substr(0, slash)), std::string(key.substr(slash + 1))});
      }
    }
    return out;
  }

  pid find_active(std::string_view key) {
    shard& s = shard_of(key);
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.map.find(key);
    if (it == s.map.end() || it->second.gate) return pid();
    return pid::share(it->second.cell);
  }

  void post_marker(actor_cell* c) {
    envelope* env = acquire_envelope(c);
    fill(env, grain_shutdown_marker{});
    (void)detail::deliver(nullptr, c, env);
  }

  system_core* core() const noexcept { return core_; }

 private:
  struct entry {
    actor_cell* cell;                       // a reference held by the directory
    std::shared_ptr<activation_gate> gate;  // set while the activation runs
  };
  struct alignas(64) shard {
    std::mutex mutex;
    // Keyed by the cell's own path (kind/name), which lives as long as the cell.
    std::unordered_map<std::string_view, entry> map;
  };

  error refuse_now() const {
    if (error e = core_->refusal()) return e;
    if (closing_.load(std::memory_order_acquire)) return errc::system_shutting_down;
    return {};
  }

  shard& shard_of(std::string_view key) noexcept {
    return shards_[name_registry::hash(key) & (k_directory_shards - 1)];
  }

  bool directory_empty_of_active() {
    for (auto& s : shards_) {
      std::lock_guard<std::mutex> lock(s.mutex);
      for (auto& [key, e] : s.map) {
        if (!e.gate) return false;
      }
    }
    return true;
  }

  static std::shared_ptr<const grain_settings> settle(const grain_settings* base,
                                                      const grain_options& o) {
    auto out = std::make_shared<grain_settings>(base != nullptr ? *base : grain_settings{});
    if (o.mailbox_capacity) out->mailbox_capacity = *o.mailbox_capacity;
    if (o.deactivate_after) out->deactivate_after = *o.deactivate_after;
    if (o.activation_timeout) out->activation_timeout = *o.activation_timeout;
    if (o.activation_attempts) out->activation_attempts = std::max(1u, *o.activation_attempts);
    if (o.dependencies) out->dependencies = o.dependencies;
    return out;
  }

  // Called with `lock` holding s.mutex and no entry for key: enters the activation with a gate,
  // runs it with the lock released, and settles the entry. Returns the activated cell.
  result<pid> activate(std::unique_lock<std::mutex>& lock, shard& s, const grain_kind* kind,
                       const std::string& key, const grain_options* per_call);

  system_core* const core_;
  std::mutex kinds_mutex_;
  std::map<std::string, std::unique_ptr<grain_kind>, std::less<>> kinds_;
  std::unordered_map<const grain_kind*, std::shared_ptr<const grain_settings>> defaults_;
  shard shards_[k_directory_shards];
  std::atomic<bool> closing_{false};    // writer: stop (seq_cst); readers: senders
  std::atomic<bool> abandoned_{false};  // writer: stop after its deadline; readers: hosts
  std::atomic<std::uint64_t> activations_{0};
  std::mutex problems_mutex_;
  std::vector<std::string> deactivation_problems_;
};

namespace {

grain_layer& layer_of(system_core* core) {
  if (auto* g = core->grains_.load(std::memory_order_acquire)) return *static_cast<grain_layer*>(g);
  std::lock_guard<std::mutex> lock(core->extension_mutex_);
  auto* g = core->grains_.load(std::memory_order_relaxed);
  if (g == nullptr) {
    g = new grain_layer(core);
    core->grains_.store(g, std::memory_order_release);
  }
  return *static_cast<grain_layer*>(g);
}

grain_layer& layer_of(actor_system& sys) { return layer_of(sys.core()); }

grain_identity identity_of(const grain_kind* kind, const actor_cell* cell) {
  const std::string_view path = cell->path();
  return {kind->name, std::string(path.substr(kind->name.size() + 1))};
}

}  // namespace

result<pid> grain_layer::activate(std::unique_lock<std::mutex>& lock, shard& s,
                                  const grain_kind* kind, const std::string& key,
                                  const grain_options* per_call) {
  actor_cell* cell = nullptr;
  try {
    cell = kind->factory(core_, key, kind);
  } catch (...) {
    return caught("the grain's constructor");
  }
  cell->mark_grain();
  grain_host_base& host = grain_host_access::of(cell);
  grain_host_access::settings(host) = settings_for(kind, per_call);
  auto gate = std::make_shared<activation_gate>();
  cell->add_ref();  // the directory's
  s.map.emplace(cell->path(), entry{cell, gate});
  pid self = pid::share(cell);

  lock.unlock();  // on_activate is user code: never under the directory lock
  error own;      // on_activate's own error, reported by pre_start
  grain_host_access::activation_error(host) = &own;
  error started = cell->start(false);
  if (started) {
    if (!own) own = started;
  } else {
    grain_host_access::activation_error(host) = nullptr;
  }
  lock.lock();

  if (own) {
    s.map.erase(cell->path());
    cell->release();
    gate->result = own;  // pre_start published grain_activation_failed
  } else {
    s.map[cell->path()].gate.reset();
    count_activation();
  }
  lock.unlock();
  gate->done.store(1, std::memory_order_release);
  gate->done.notify_all();
  if (own) return own;
  if (closing_.load(std::memory_order_seq_cst)) {
    // The shutdown began while this activation ran: roll it back like every other activation.
    post_marker(cell);
    return errc::system_shutting_down;
  }
  return self;
}

// ---------------------------------------------------------------------------------------------
// the host

namespace {

void arm_idle_timer(actor_cell* cell, std::chrono::nanoseconds after) {
  if (after <= std::chrono::nanoseconds::zero()) return;
  pid self = pid::share(cell);
  (void)cell->system()->timers_.schedule_after(after,
                                               [self] { (void)self.tell(grain_idle_check{}); });
}

}  // namespace

error grain_host_base::activate(actor_system& sys, actor_cell* cell) {
  const grain_identity id = identity_of(kind_, cell);
  const grain_settings& settings = *settings_;
  const auto deadline = std::chrono::steady_clock::now() + settings.activation_timeout;
  error last;
  for (unsigned attempt = 0; attempt < settings.activation_attempts; ++attempt) {
    if (attempt > 0 && std::chrono::steady_clock::now() >= deadline) break;
    grain* g = nullptr;
    try {
      g = build_instance();
    } catch (...) {
      last = caught("the grain's constructor");
      continue;
    }
    grain_props props(id, sys, settings, deadline);
    try {
      last = g->on_activate(props);
    } catch (...) {
      last = caught("on_activate");
    }
    if (!last && std::chrono::steady_clock::now() > deadline) {
      // Too late: the caller has given up. Undo it, so nothing half-activated stays.
      try {
        (void)g->on_deactivate(props);
      } catch (...) {
      }
      last = error(errc::request_timeout,
                   "activation of " + id.str() + " took longer than " +
                       std::to_string(settings.activation_timeout.count() / 1'000'000) + " ms");
    }
    if (!last) break;
    drop_instance();
  }
  auto& events = sys.events();
  if (last) {
    if (events.has_subscribers<grain_activation_failed>())
      events.publish(grain_activation_failed{id, last});
    return last;
  }
  deactivated_ = false;
  handled_at_arm_ = handled_;
  arm_idle_timer(cell, settings.deactivate_after);
  if (events.has_subscribers<grain_activated>()) events.publish(grain_activated{id});
  return {};
}

error grain_host_base::pre_start(actor_context& ctx) {
  error e = activate(ctx.system(), ctx.self().cell());
  if (e && activation_error_ != nullptr) *activation_error_ = e;
  return e;
}

error grain_host_base::deactivate(actor_system& sys, actor_cell* cell, bool for_stop) {
  error e;
  if (instance() != nullptr && !deactivated_) {
    const grain_identity id = identity_of(kind_, cell);
    grain_props props(id, sys, *settings_, std::chrono::steady_clock::time_point::max());
    try {
      e = instance()->on_deactivate(props);
    } catch (...) {
      e = caught("on_deactivate");
    }
    deactivated_ = true;
    if (e) {
      if (for_stop) layer_of(sys).report_deactivation_failure(id.str() + ": " + e.message());
      cell->system()->log(log_level::warning, id.str(), "on_deactivate: " + e.message());
    }
    auto& events = sys.events();
    if (events.has_subscribers<grain_deactivated>()) events.publish(grain_deactivated{id, e});
  }
  drop_instance();
  return e;
}

void grain_host_base::post_stop(actor_context& ctx) {
  // Normally the instance is gone by now (deactivated). It is still here when the cell was
  // stopped some other way; deactivate it then, unless the shutdown abandoned it.
  grain_layer& layer = layer_of(ctx.system());
  if (!layer.abandoned()) (void)deactivate(ctx.system(), ctx.self().cell(), true);
  drop_instance();
  (void)layer.leave(ctx.self().cell(), false);
}

void grain_host_base::receive(receive_context& ctx) {
  actor_cell* const cell = context_access::receiver(ctx);
  grain_layer& layer = layer_of(cell->system());

  if (ctx.is<grain_shutdown_marker>()) {
    if (!layer.abandoned()) (void)deactivate(ctx.system(), cell, true);
    drop_instance();
    (void)layer.leave(cell, false);
    ctx.stop_self();
    return;
  }
  if (ctx.is<grain_idle_check>()) {
    if (instance() == nullptr) return;
    if (handled_ != handled_at_arm_ || !cell->user_backlog_empty()) {
      handled_at_arm_ = handled_;  // busy since the timer was armed: wait a full period again
      arm_idle_timer(cell, settings_->deactivate_after);
      return;
    }
    (void)deactivate(ctx.system(), cell, false);
    if (layer.leave(cell, true)) {
      ctx.stop_self();
      return;
    }
    // Messages arrived during on_deactivate: a fresh instance, in place, handles them (or, if
    // it cannot be activated, answers each with the activation's error).
    if (error e = activate(ctx.system(), cell))
      failing_ = e;
    else
      layer.count_activation();
    return;
  }

  // A user message.
  if (settings_->mailbox_capacity != 0) queued_.fetch_sub(1, std::memory_order_acq_rel);
  ++handled_;
  if (failing_ || instance() == nullptr) {
    // A failed reactivation: every waiting message gets its error; then the activation goes.
    const error why = failing_ ? failing_ : error(errc::dead);
    if (ctx.expects_reply())
      ctx.respond_error(why);
    else
      cell->system()->dead_letter(ctx, why);
    if (cell->user_backlog_empty() && layer.leave(cell, true)) ctx.stop_self();
    return;
  }
  const bool acknowledged = (context_access::flags(ctx) & envelope::flag_grain_ack) != 0;
  grain_context g(ctx, *this, acknowledged);
  try {
    instance()->on_receive(g);
  } catch (...) {
    error e = caught("on_receive");
    cell->system()->log(log_level::warning, identity_of(kind_, cell).str(), e.message());
    g.err(std::move(e));
  }
  g.finish();
  if (ctx.expects_reply() && !g.answered()) ctx.respond_error(errc::no_reply);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// grain_context

grain_identity grain_context::self() const {
  return detail::identity_of(host_.kind(), detail::context_access::receiver(env_));
}

void grain_context::no_err() {
  if (answered_) return;
  answered_ = true;
  if (env_.expects_reply()) env_.respond_message(akt::message());
}

void grain_context::err(error e) {
  if (answered_) return;
  answered_ = true;
  if (!e) e = error(errc::handler_failed, "err() without an error");
  if (env_.expects_reply())
    env_.respond_error(std::move(e));
  else
    detail::cell_system(detail::context_access::receiver(env_))->dead_letter(env_, e);
}

void grain_context::unhandled() {
  if (answered_) return;
  answered_ = true;
  env_.unhandled();
}

result<pid> grain_context::lookup_actor(std::string_view name) const {
  return env_.system().find(name);
}

error grain_context::tell_grain_message(const grain_identity& to, akt::message msg) {
  grain_tell_options o;
  o.one_way = true;
  return detail::tell_grain_message(env_.system(), to, std::move(msg), o,
                                    detail::context_access::receiver(env_));
}

// ---------------------------------------------------------------------------------------------
// the API

namespace detail {

result<const grain_kind*> register_kind(actor_system& sys, std::string_view name,
                                        grain_cell_factory factory, const grain_options* defaults) {
  return layer_of(sys).register_kind(name, factory, defaults);
}

result<grain_identity> resolve_grain(actor_system& sys, const grain_kind* kind,
                                     std::string_view name, const grain_options& per_call) {
  auto p = layer_of(sys).acquire(kind, name, &per_call);
  if (!p) return p.error();
  return grain_identity{kind->name, std::string(name)};
}

namespace {

// The activation for id, with room reserved in a bounded mailbox.
result<pid> reach(grain_layer& layer, const grain_identity& id) {
  auto kind = layer.find_kind(id.kind);
  if (!kind) return kind.error();
  auto p = layer.acquire(*kind, id.name, nullptr);
  if (!p) return p;
  grain_host_base& host = grain_host_access::of(p->cell());
  if (const std::size_t cap = grain_host_access::settings(host)->mailbox_capacity; cap != 0) {
    auto& q = grain_host_access::queued(host);
    if (q.fetch_add(1, std::memory_order_acq_rel) >= static_cast<std::int64_t>(cap)) {
      q.fetch_sub(1, std::memory_order_acq_rel);
      return error(errc::mailbox_full,
                   id.str() + " has " + std::to_string(cap) + " messages waiting");
    }
  }
  return p;
}

}  // namespace

// The activation for id and an envelope to it holding msg; a message refused for a full
// mailbox is published as a dead letter. A message refused later (at delivery) keeps its
// reservation: such refusals come only from a closing activation, whose counter goes with it.
static result<std::pair<pid, envelope*>> address(actor_system& sys, const grain_identity& id,
                                                 message msg, actor_cell* sender) {
  auto p = reach(layer_of(sys), id);
  if (!p) {
    if (p.error().code() == errc::mailbox_full)
      sys.core()->dead_letter(std::move(msg), pid::share(sender), pid(), p.error());
    return p.error();
  }
  envelope* env = acquire_envelope(p->cell());
  fill(env, std::move(msg));
  return std::make_pair(std::move(*p), env);
}

result<message> ask_grain_message(actor_system& sys, const grain_identity& id, message msg,
                                  std::chrono::nanoseconds timeout) {
  if (timeout <= std::chrono::nanoseconds::zero()) return errc::invalid_timeout;
  if (on_worker_thread()) return errc::blocking_on_worker;
  auto a = address(sys, id, std::move(msg), nullptr);
  if (!a) return a.error();
  return ask(a->first.cell(), a->second, timeout);
}

error tell_grain_message(actor_system& sys, const grain_identity& id, message msg,
                         const grain_tell_options& opts, actor_cell* sender) {
  if (!opts.one_way) {
    if (opts.timeout <= std::chrono::nanoseconds::zero()) return errc::invalid_timeout;
    if (on_worker_thread()) return errc::blocking_on_worker;
  }
  auto a = address(sys, id, std::move(msg), sender);
  if (!a) return a.error();
  actor_cell* to = a->first.cell();
  if (opts.one_way) return deliver(sender, to, a->second);
  result<message> r = ask(to, a->second, opts.timeout, envelope::flag_grain_ack, false);
  return r ? error() : r.error();
}

}  // namespace detail

std::vector<grain_identity> active_grains(actor_system& sys) {
  return detail::layer_of(sys).active();
}

std::uint64_t grain_activation_count(actor_system& sys) {
  return detail::layer_of(sys).activations();
}

grain_stats stats_of(actor_system& sys, const grain_identity& id) {
  grain_stats s;
  pid p = detail::layer_of(sys).find_active(id.str());
  if (!p) return s;
  s.active = true;
  s.processed = p.cell()->processed();
  return s;
}

}  // namespace akt
