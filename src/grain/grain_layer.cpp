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
// empty. Otherwise what arrived during on_deactivate stays in the same mailbox, and the first
// user message among it activates a fresh instance in place, so those messages reach a fresh
// activation in arrival order (timer ticks of the ended activation are dropped). A sender that took
// the activation from the directory just before it left may find its cell closed: it gets
// errc::dead, and a resend activates the grain again.
//
// Requests, timers, pipes. A grain's non-blocking requests are the actor layer's requests made
// from the host: continuations run on the grain's turn, and stash_non_reentrant is the request's
// stash_others (the mailbox stays where it is, paused). Idle deactivation waits while requests
// are in flight. Activation timers are scheduler entries whose ticks reach only this cell,
// wrapped with the activation's generation, so a tick queued for an earlier activation is
// dropped; deactivation cancels them. Deliveries made by the runtime (system schedules, pipes
// to grains) activate from the blocking pool, never on the timer thread.
//
// Shutdown (actor_system::stop, after the hooks): the layer stops accepting sends and
// activations, puts a marker at the end of every activation's mailbox (capacity does not apply
// to it), and waits until each has handled what was queued before the marker and deactivated.
// Grains still busy at the deadline are reported and abandoned: on_deactivate never runs for
// them.

#include <algorithm>
#include <atomic>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actor/cell_extras.hpp"
#include "actor/name_registry.hpp"
#include "actor/system_core.hpp"
#include "akt/actor/detail/pipe.hpp"
#include "akt/core/clock.hpp"
#include "akt/core/thread.hpp"
#include "akt/grain/grains.hpp"
#include "grain/grain_directory.hpp"

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
// A tick of an activation timer: the user's message, wrapped so that the host knows which
// activation scheduled it and whether it counts as activity.
struct grain_tick {
  std::uint32_t generation;
  bool keep_alive;
  message inner;
};

// What grain_layer::visit returns for an identity without an activation when it may not
// activate one (never seen outside this file).
constexpr errc k_not_active = errc::actor_not_found;

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
  static std::uint32_t& mailbox_capacity(grain_host_base& h) noexcept {
    return h.mailbox_capacity_;
  }
  static error*& activation_error(grain_host_base& h) noexcept { return h.activation_error_; }
  static directory_link& link(grain_host_base& h) noexcept { return h.link_; }
  // Whether the host has a live instance (not deactivated): a request's continuation runs then.
  static bool serving(grain_host_base& h) noexcept { return h.instance() != nullptr; }
  static grain_timer_table*& timers(grain_host_base& h) noexcept { return h.timers_; }
  static bool timers_stopped(grain_host_base& h) noexcept { return h.timers_stopped_; }
  static std::uint32_t generation(grain_host_base& h) noexcept { return h.generation_; }
  static std::atomic<std::uint64_t>& direct(grain_host_base& h) noexcept { return h.direct_word(); }
};

namespace {
// grain_host_base::direct_'s fields.
constexpr std::uint64_t k_direct_closed = std::uint64_t{1} << 31;
constexpr std::uint64_t k_direct_senders = k_direct_closed - 1;
}  // namespace

// The timers of one activation (turn owner).
struct grain_timer_table {
  std::vector<std::pair<std::string, schedule_ref>> entries;
  std::uint64_t next_reference = 1;
};

// Contract: every member may be called from any thread. The directory has its own contract
// (grain_directory.hpp). Kinds are registered under kinds_mutex_ and never removed; senders
// find them in an immutable snapshot without a lock. Settings are read under kinds_mutex_.
class grain_layer final : public system_extension {
 public:
  explicit grain_layer(system_core* core)
      : core_(core), directory_(make_local_grain_directory(&link_of)) {}
  ~grain_layer() override { delete kind_index_.load(std::memory_order_relaxed); }

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
      publish_kind_index();
    } else if (it->second->factory != factory) {
      // The factory is per type: another type registered this name first.
      return error(errc::duplicate_type_name,
                   "grain kind '" + std::string(name) + "' is registered by another type");
    }
    if (defaults != nullptr) defaults_[it->second.get()] = settle(nullptr, *defaults);
    return static_cast<const grain_kind*>(it->second.get());
  }

  result<const grain_kind*> find_kind(std::string_view name) const {
    if (const kind_index* idx = kind_index_.load(std::memory_order_acquire)) {
      auto it = idx->kinds.find(name);
      if (it != idx->kinds.end()) return it->second;
    }
    return error(errc::grain_kind_unknown, "no grain kind '" + std::string(name) + "'");
  }

  // The kind's declared settings with per_call on top (shared with the kind when per_call sets
  // nothing, so that an activation costs no settings of its own).
  std::shared_ptr<const grain_settings> settings_for(const grain_kind* k,
                                                     const grain_options* per_call) {
    std::lock_guard<std::mutex> lock(kinds_mutex_);
    const auto& base = defaults_[k];
    if (per_call == nullptr || sets_nothing(*per_call)) return base;
    return settle(base.get(), *per_call);
  }

  // The kind's settings for a fresh activation in place in a cell whose mailbox has `capacity`
  // (the kind's own when they agree, else a copy with the mailbox's capacity).
  std::shared_ptr<const grain_settings> settings_for_fresh(const grain_kind* k,
                                                           std::size_t capacity) {
    std::lock_guard<std::mutex> lock(kinds_mutex_);
    const auto& base = defaults_[k];
    if (std::min<std::size_t>(base->mailbox_capacity, std::numeric_limits<std::uint32_t>::max()) ==
        capacity)
      return base;
    auto out = std::make_shared<grain_settings>(*base);
    out->mailbox_capacity = capacity;
    return out;
  }

  // Visits the identity's activation (activating it if needed, unless may_activate is false:
  // then an identity without one gives k_not_active): see grain_directory.
  error visit(const grain_kind* kind, std::string_view name, const grain_options* per_call,
              grain_directory::visitor& v, bool may_activate = true) {
    if (error e = refuse_now()) return e;
    // The key is built in a per-thread buffer: no allocation per send once it has grown.
    thread_local std::string key;
    key.assign(kind->name).append(1, '/').append(name);
    activation how(*this, kind, per_call, key, name, may_activate);
    // An activation that finished after the shutdown began is rolled back like every other
    // activation (it gets the marker); its message is refused.
    struct unless_rolled_back final : grain_directory::visitor {
      grain_layer& layer;
      activation& how;
      grain_directory::visitor& inner;
      unless_rolled_back(grain_layer& l, activation& a, grain_directory::visitor& v)
          : layer(l), how(a), inner(v) {}
      error visit(actor_cell* cell) override {
        if (how.activated && layer.closing_.load(std::memory_order_seq_cst)) {
          layer.post_marker(cell);
          return errc::system_shutting_down;
        }
        return inner.visit(cell);
      }
    } guarded(*this, how, v);
    error e = directory_->with_activation(key, how, guarded);
    // A failed activation leaves the directory without a death: wake a shutdown that waits
    // for the directory to empty (the entry is gone by now).
    if (how.attempted && !how.activated && closing_.load(std::memory_order_seq_cst))
      core_->wake_death_waiters();
    return e;
  }

  // The cell of the identity's activation (activating it if needed), with a reference.
  result<pid> acquire(const grain_kind* kind, std::string_view name,
                      const grain_options* per_call) {
    struct take final : grain_directory::visitor {
      pid p;
      error visit(actor_cell* cell) override {
        p = pid::share(cell);
        return {};
      }
    } t;
    if (error e = visit(kind, name, per_call, t)) return e;
    return std::move(t.p);
  }

  void withdraw(actor_cell* cell) { directory_->withdraw(cell); }

  // Withdraws the directory entry of `cell` (see grain_directory::release).
  bool leave(actor_cell* cell, bool require_empty) {
    return directory_->release(cell, require_empty);
  }

  void before_actors_stop(std::chrono::steady_clock::time_point deadline,
                          std::vector<std::string>& problems, bool& timed_out) override {
    closing_.store(true, std::memory_order_seq_cst);
    // Activations still in progress get their marker when they finish (visit's rollback), and
    // the wait below covers them: an activation that succeeds after this point is rolled back
    // with on_deactivate, never left running past the shutdown. No gap between the two: an
    // activation that leaves its gate after this scan (both under the shard's lock) sees
    // closing_ set, and one that left it before is in the scan. A grain found by both gets two
    // markers; the second finds it deactivated.
    for (const pid& p : directory_->active()) post_marker(p.cell());
    if (core_->dispatcher_.manual()) {  // deterministic mode: this thread runs the grains' turns
      while (!directory_->none_left() && std::chrono::steady_clock::now() < deadline) {
        if (!core_->dispatcher_.run_one())
          std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    bool all = core_->wait_for_deaths(deadline, [&] { return directory_->none_left(); });
    if (!all) {
      abandoned_.store(true, std::memory_order_seq_cst);
      const std::vector<pid> left = directory_->active();
      std::string names;
      for (std::size_t i = 0; i < left.size() && i < 8; ++i)
        names.append(names.empty() ? "" : ", ").append(left[i].cell()->path());
      if (left.empty()) names = "activations still in progress";
      timed_out = true;
      problems.push_back(std::to_string(left.size()) +
                         " grains still busy at the shutdown timeout (" + names +
                         "); abandoned without on_deactivate");
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
    for (const pid& p : directory_->active()) {
      const std::string_view key = p.cell()->path();
      const auto slash = key.rfind('/');
      out.push_back({std::string(key.substr(0, slash)), std::string(key.substr(slash + 1))});
    }
    return out;
  }

  pid find_active(std::string_view key) { return directory_->find(key); }

  void post_marker(actor_cell* c) {
    envelope* env = acquire_envelope(c);
    fill(env, grain_shutdown_marker{});
    (void)detail::deliver(nullptr, c, env);
  }

  system_core* core() const noexcept { return core_; }

 private:
  // Activates one identity for the directory: builds the cell (create) and runs on_activate
  // through the cell's start (start).
  struct activation final : grain_directory::activator {
    activation(grain_layer& l, const grain_kind* k, const grain_options* o, std::string_view id,
               std::string_view n, bool may)
        : layer(l), kind(k), per_call(o), key(id), name(n), may_activate(may) {}
    result<directory_link*> create() override;
    error start(actor_cell* cell) override;
    grain_layer& layer;
    const grain_kind* kind;
    const grain_options* per_call;
    std::string_view key;  // kind/name, the cell's path
    std::string_view name;
    bool may_activate;
    bool attempted = false;  // this call ran the activation
    bool activated = false;  // this call ran the activation, and it succeeded
  };

  // The kinds by name, immutable once published; a registration publishes a new one. Earlier
  // snapshots are kept (retired_) until the layer goes, so a sender may still read one.
  struct kind_index {
    std::map<std::string, const grain_kind*, std::less<>> kinds;
  };

  void publish_kind_index() {  // under kinds_mutex_
    auto next = std::make_unique<kind_index>();
    for (const auto& [name, k] : kinds_) next->kinds.emplace(name, k.get());
    kind_index* old = kind_index_.exchange(next.release(), std::memory_order_acq_rel);
    if (old != nullptr) retired_.emplace_back(old);
  }

  error refuse_now() const {
    if (error e = core_->refusal()) return e;
    if (closing_.load(std::memory_order_acquire)) return errc::system_shutting_down;
    return {};
  }

  static bool sets_nothing(const grain_options& o) noexcept {
    return !o.mailbox_capacity && !o.deactivate_after && !o.activation_timeout &&
           !o.activation_attempts && !o.dependencies && !o.reentrancy;
  }

  static directory_link& link_of(actor_cell* cell) noexcept {
    return grain_host_access::link(grain_host_access::of(cell));
  }

  static std::shared_ptr<const grain_settings> settle(const grain_settings* base,
                                                      const grain_options& o) {
    auto out = std::make_shared<grain_settings>(base != nullptr ? *base : grain_settings{});
    if (o.mailbox_capacity) out->mailbox_capacity = *o.mailbox_capacity;
    if (o.deactivate_after) out->deactivate_after = *o.deactivate_after;
    if (o.activation_timeout) out->activation_timeout = *o.activation_timeout;
    if (o.activation_attempts) out->activation_attempts = std::max(1u, *o.activation_attempts);
    if (o.dependencies) out->dependencies = o.dependencies;
    if (o.reentrancy) out->reentrancy = *o.reentrancy;
    return out;
  }

  system_core* const core_;
  std::unique_ptr<grain_directory> directory_;
  std::mutex kinds_mutex_;
  std::map<std::string, std::unique_ptr<grain_kind>, std::less<>> kinds_;  // guarded
  std::unordered_map<const grain_kind*, std::shared_ptr<const grain_settings>> defaults_;
  // Writer: register_kind under kinds_mutex_ (acq_rel exchange); readers: senders (acquire).
  std::atomic<kind_index*> kind_index_{nullptr};
  std::vector<std::unique_ptr<kind_index>> retired_;  // guarded by kinds_mutex_
  std::atomic<bool> closing_{false};                  // writer: stop (seq_cst); readers: senders
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

result<directory_link*> grain_layer::activation::create() {
  if (!may_activate) return k_not_active;
  if (layer.closing_.load(std::memory_order_acquire)) return errc::system_shutting_down;
  // Names are checked here, once per activation: an active grain's name was checked already.
  if (error e = validate_actor_name(name)) return e;
  actor_cell* cell = nullptr;
  try {
    cell = kind->factory(layer.core_, key, kind);
  } catch (...) {
    return caught("the grain's constructor");
  }
  cell->mark_grain();
  grain_host_base& host = grain_host_access::of(cell);
  auto settings = layer.settings_for(kind, per_call);
  grain_host_access::mailbox_capacity(host) = static_cast<std::uint32_t>(
      std::min<std::size_t>(settings->mailbox_capacity, std::numeric_limits<std::uint32_t>::max()));
  grain_host_access::settings(host) = std::move(settings);
  cell->add_ref();  // the directory's
  directory_link& link = grain_host_access::link(host);
  link.cell = cell;
  return &link;
}

error grain_layer::activation::start(actor_cell* cell) {
  grain_host_base& host = grain_host_access::of(cell);
  attempted = true;
  error own;  // on_activate's own error, reported by pre_start
  grain_host_access::activation_error(host) = &own;
  error started = cell->start(false);
  if (started) {
    if (!own) own = started;  // pre_start published grain_activation_failed
    return own;
  }
  grain_host_access::activation_error(host) = nullptr;
  layer.count_activation();
  activated = true;
  return {};
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

// Ends an activation that has no instance (deactivated by the shutdown marker, dormant after an
// idle deactivation that a send raced, or a failed reactivation) once nothing is left in its
// mailbox. Every branch of receive that finds no instance must end here, whatever kind of
// message it handled: no later message comes to do it. The marker's activation has already
// left the directory, so nothing new reaches it, and a dormant one is only reached again while
// listed, which leave (under the directory's shard lock, like every send) rules out. A branch
// that returned early instead left the cell alive and unlisted for ever: an idle check that the
// timer thread queued just behind the shutdown marker did that, and stop() then waited for the
// cell until its timeout.
void end_if_drained(receive_context& ctx, actor_cell* cell, grain_layer& layer) {
  if (cell->user_backlog_empty() && layer.leave(cell, true)) ctx.stop_self();
}

}  // namespace

error grain_host_base::activate(actor_system& sys, actor_cell* cell) {
  const grain_identity id = identity_of(kind_, cell);
  const grain_settings& settings = *settings_;
  const auto deadline = std::chrono::steady_clock::now() + settings.activation_timeout;
  ++generation_;          // ticks of an earlier activation's timers are stale from here on
  reentrancy_mode_ = -1;  // a new activation starts from its options
  timers_stopped_ = false;
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
    grain_props props(id, sys, settings, deadline, this);
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
    end_activation();  // what the failed attempt scheduled goes with it
    timers_stopped_ = false;
  }
  auto& events = sys.events();
  if (last) {
    timers_stopped_ = true;
    if (events.has_subscribers<grain_activation_failed>())
      events.publish(grain_activation_failed{id, last});
    return last;
  }
  handled_at_arm_ = handled_;
  arm_idle_timer(cell, settings.deactivate_after);
  open_direct();
  if (events.has_subscribers<grain_activated>()) events.publish(grain_activated{id});
  return {};
}

void grain_host_base::open_direct() noexcept {
  std::atomic<std::uint64_t>& direct = direct_word();
  const std::uint64_t open = std::uint64_t{generation_} << 32;
  std::uint64_t v = direct.load(std::memory_order_relaxed);
  // Senders that found it closed may still be on their way out: keep their count.
  while (!direct.compare_exchange_weak(v, open | (v & k_direct_senders), std::memory_order_release,
                                       std::memory_order_relaxed)) {
  }
}

void grain_host_base::close_direct() noexcept {
  std::atomic<std::uint64_t>& direct = direct_word();
  std::uint64_t v = direct.fetch_or(k_direct_closed, std::memory_order_acq_rel);
  // A sender inside is between its check and its enqueue (a few instructions): wait it out, so
  // that what it sends is in the mailbox before anyone checks the mailbox is empty.
  for (unsigned spins = 0; (v & k_direct_senders) != 0; ++spins) {
    if (spins > 64) std::this_thread::yield();
    v = direct.load(std::memory_order_acquire);
  }
}

error grain_host_base::pre_start(actor_context& ctx) {
  error e = activate(ctx.system(), ctx.self().cell());
  if (e) {
    // The cell destroys this host (and the directory link in it) when pre_start fails: leave
    // the directory first (grain_directory::activator::start).
    layer_of(ctx.system()).withdraw(ctx.self().cell());
    if (activation_error_ != nullptr) *activation_error_ = e;
  }
  return e;
}

error grain_host_base::deactivate(actor_system& sys, actor_cell* cell, bool for_stop) {
  error e;
  if (instance() != nullptr) {
    const grain_identity id = identity_of(kind_, cell);
    grain_props props(id, sys, *settings_, std::chrono::steady_clock::time_point::max(), this);
    timers_stopped_ = true;  // on_deactivate may not start timers
    stop_timers();
    try {
      e = instance()->on_deactivate(props);
    } catch (...) {
      e = caught("on_deactivate");
    }
    if (e) {
      if (for_stop) layer_of(sys).report_deactivation_failure(id.str() + ": " + e.message());
      cell->system()->log(log_level::warning, id.str(), "on_deactivate: " + e.message());
    }
    auto& events = sys.events();
    if (events.has_subscribers<grain_deactivated>()) events.publish(grain_deactivated{id, e});
  }
  end_activation();
  return e;
}

void grain_host_base::deactivate_for_stop(actor_system& sys, actor_cell* cell) {
  grain_layer& layer = layer_of(sys);
  if (layer.abandoned())
    end_activation();
  else
    (void)deactivate(sys, cell, true);
  (void)layer.leave(cell, false);
}

void grain_host_base::end_activation() noexcept {
  close_direct();
  timers_stopped_ = true;
  stop_timers();
  drop_instance();
}

grain_host_base::~grain_host_base() { delete timers_; }

void grain_host_base::stop_timers() noexcept {
  if (!timers_) return;
  for (auto& [ref, sched] : timers_->entries) (void)sched.cancel();
  delete std::exchange(timers_, nullptr);
}

void grain_host_base::post_stop(actor_context& ctx) {
  // Normally the instance is gone by now (deactivated). It is still here when the cell was
  // stopped some other way.
  deactivate_for_stop(ctx.system(), ctx.self().cell());
}

void grain_host_base::receive(receive_context& ctx) {
  actor_cell* const cell = context_access::receiver(ctx);
  grain_layer& layer = layer_of(cell->system());

  if (ctx.is<grain_shutdown_marker>()) {
    deactivate_for_stop(ctx.system(), cell);
    // Whatever is queued behind the marker was sent after the shutdown began: it is refused
    // like a send that would activate (below, as it is reached), not handed to a new instance.
    failing_ = errc::system_shutting_down;
    end_if_drained(ctx, cell, layer);  // left the directory already: stops when drained
    return;
  }
  if (ctx.is<grain_idle_check>()) {
    if (instance() == nullptr) {
      // A check of an ended activation (it can sit behind the shutdown marker): never a reason
      // to activate, but it may be the last message, so it ends the activation like any other.
      end_if_drained(ctx, cell, layer);
      return;
    }
    const cell_extras* x = cell->extras_if_any();
    const bool requests_in_flight = x != nullptr && !x->requests.empty();
    if (handled_ != handled_at_arm_ || !cell->user_backlog_empty() || requests_in_flight) {
      // Busy since the timer was armed, or waiting for a reply: wait a full period again.
      handled_at_arm_ = handled_;
      arm_idle_timer(cell, settings_->deactivate_after);
      return;
    }
    (void)deactivate(ctx.system(), cell, false);
    if (layer.leave(cell, true)) {
      ctx.stop_self();
      return;
    }
    // Something arrived during on_deactivate. The activation stays in the directory without
    // an instance: the first user message it reaches activates a fresh one in place (below),
    // so those messages reach a fresh activation in arrival order, while timer ticks of the
    // ended activation are dropped and never activate it. Once the shutdown began nothing is
    // activated: they are refused.
    if (layer.closing()) failing_ = errc::system_shutting_down;
    return;
  }

  if (auto* tick = ctx.get_if<grain_tick>()) {
    // A timer tick: not counted against the mailbox capacity; activity only with keep_alive; a
    // tick of an earlier activation (or one after deactivation) is dropped.
    if (tick->generation != generation_ || instance() == nullptr || failing_) {
      // A dormant activation (see the idle check) that had only ticks waiting goes now.
      if (instance() == nullptr) end_if_drained(ctx, cell, layer);
      return;
    }
    if (tick->keep_alive) ++handled_;
    message inner = std::move(tick->inner);
    ctx.message() = std::move(inner);
    (void)run_on_receive(ctx, cell, false);
    return;
  }

  // A user message.
  if (mailbox_capacity_ != 0) queued_.fetch_sub(1, std::memory_order_acq_rel);
  ++handled_;
  if (!failing_ && instance() == nullptr) {
    // Dormant since an idle deactivation: this message activates a fresh instance in place.
    // A fresh activation starts from the kind's options, like one made by a new cell: the
    // options of the call that created this cell belonged to the activation that just ended.
    // Only the mailbox (and so its capacity) carries over.
    if (layer.closing()) {
      failing_ = errc::system_shutting_down;
    } else {
      settings_ = layer.settings_for_fresh(kind_, mailbox_capacity_);
      if (error e = activate(ctx.system(), cell))
        failing_ = e;
      else
        layer.count_activation();
    }
  }
  if (failing_) {
    // A failed reactivation, or the shutdown: every waiting message gets the error; then the
    // activation goes.
    const error why = failing_;
    if (ctx.expects_reply())
      ctx.reply_error(why);
    else
      cell->system()->dead_letter(ctx, why);
    end_if_drained(ctx, cell, layer);
    return;
  }
  const bool acknowledged = (context_access::flags(ctx) & envelope::flag_grain_ack) != 0;
  const bool answered = run_on_receive(ctx, cell, acknowledged);
  if (ctx.expects_reply() && !answered) ctx.reply_error(errc::no_reply);
}

bool grain_host_base::run_on_receive(receive_context& ctx, actor_cell* cell, bool acknowledged) {
  grain_context g(ctx, *this, acknowledged);
  try {
    instance()->on_receive(g);
  } catch (...) {
    // No supervisor for grains: the caller gets the error and the grain keeps serving.
    error e = caught("on_receive");
    cell->system()->log(log_level::warning, cell->path(), e.message());  // path: kind/name
    g.reply_error(std::move(e));
  }
  g.finish();
  return g.answered();
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// grain_context

grain_identity grain_context::self() const {
  return detail::identity_of(host_.kind(), detail::context_access::receiver(env_));
}

void grain_context::ack() {
  if (answered_) return;
  answered_ = true;
  env_.ack();
}

void grain_context::reply_error(error e) {
  if (answered_) return;
  answered_ = true;
  if (!e) e = error(errc::handler_failed, "reply_error() without an error");
  if (env_.expects_reply())
    env_.reply_error(std::move(e));
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

// Takes a place in the activation's bounded mailbox (no-op when unbounded).
error reserve(actor_cell* cell, const grain_identity& id) {
  grain_host_base& host = grain_host_access::of(cell);
  if (const std::size_t cap = grain_host_access::mailbox_capacity(host); cap != 0) {
    auto& q = grain_host_access::queued(host);
    if (q.fetch_add(1, std::memory_order_acq_rel) >= static_cast<std::int64_t>(cap)) {
      q.fetch_sub(1, std::memory_order_acq_rel);
      return error(errc::mailbox_full,
                   id.str() + " has " + std::to_string(cap) + " messages waiting");
    }
  }
  return {};
}

// The activation for id (activating it if needed), with room reserved in a bounded mailbox.
result<pid> reach(grain_layer& layer, const grain_identity& id) {
  auto kind = layer.find_kind(id.kind);
  if (!kind) return kind.error();
  auto p = layer.acquire(*kind, id.name, nullptr);
  if (!p) return p;
  if (error e = reserve(p->cell(), id)) return e;
  return p;
}

// An envelope to `to` holding msg.
envelope* envelope_for(actor_cell* to, message msg) {
  envelope* env = acquire_envelope(to);
  fill(env, std::move(msg));
  return env;
}
envelope* envelope_for(const pid& to, message msg) {
  return envelope_for(to.cell(), std::move(msg));
}

// Publishes a message refused before its enqueue as a dead letter naming the grain: always for
// a full mailbox, and for every refusal with publish_all (senders that cannot report an error,
// like timers).
void publish_refused(system_core* core, message& msg, actor_cell* sender, const grain_identity& id,
                     const error& e, bool publish_all = false) {
  if (!publish_all && e.code() != errc::mailbox_full) return;
  core->dead_letter(std::move(msg), pid::share(sender), pid(),
                    error(e.code(), id.str() + ": " + e.message()));
}

// The activation for id and an envelope to it holding msg. A message refused later (at
// delivery) keeps its reservation: such refusals come only from a closing activation, whose
// counter goes with it.
result<std::pair<pid, envelope*>> address(system_core* core, const grain_identity& id, message msg,
                                          actor_cell* sender) {
  auto p = reach(layer_of(core), id);
  if (!p) {
    publish_refused(core, msg, sender, id, p.error());
    return p.error();
  }
  envelope* env = envelope_for(*p, std::move(msg));
  return std::make_pair(std::move(*p), env);
}

// A one-way tell: the message goes into the mailbox while the directory holds the activation
// (under its shard lock), so a send costs no reference count traffic on the grain's cell; only
// a refusal (a closing cell) is delivered outside the lock, where its dead letter is published.
// publish_all: see publish_refused. Without may_activate (a runtime thread that must not run
// on_activate: the timer thread) a delivery that needs an activation moves to the blocking pool.
// With a route (a grain_ref's), the activation it reached is remembered when it is open for
// direct sends.
error tell_one_way(system_core* core, const grain_identity& id, message msg, actor_cell* sender,
                   bool publish_all = false, bool may_activate = true,
                   grain_route* route = nullptr) {
  grain_layer& layer = layer_of(core);
  auto kind = layer.find_kind(id.kind);
  struct enqueue final : grain_directory::visitor {
    const grain_identity& id;
    message& msg;
    actor_cell* sender;
    grain_route* route;
    receive_context* refused = nullptr;  // to deliver (and be refused) outside the lock
    pid refused_by;
    enqueue(const grain_identity& i, message& m, actor_cell* s, grain_route* r)
        : id(i), msg(m), sender(s), route(r) {}
    error visit(actor_cell* cell) override {
      if (error e = reserve(cell, id)) return e;
      auto* env = static_cast<receive_context*>(envelope_for(cell, std::move(msg)));
      if (sender != nullptr) {
        sender->add_ref();
        context_access::sender(*env) = sender;
      }
      if (route != nullptr) remember(cell);
      if (cell->deliver_if_open(env)) return {};
      refused = env;
      refused_by = pid::share(cell);
      return {};
    }
    // Under the directory's lock: the host is alive.
    void remember(actor_cell* cell) {
      std::atomic<std::uint64_t>& direct = grain_host_access::direct(grain_host_access::of(cell));
      const std::uint64_t d = direct.load(std::memory_order_acquire);
      if ((d & k_direct_closed) != 0) {
        route->cell = pid();  // dormant or ending: ask the directory next time too
        return;
      }
      if (route->cell.cell() != cell) route->cell = pid::share(cell);
      route->direct = &direct;
      route->generation = static_cast<std::uint32_t>(d >> 32);
    }
  } v(id, msg, sender, route);
  error e = kind ? layer.visit(*kind, id.name, nullptr, v, may_activate) : kind.error();
  if (e == k_not_active) {  // without may_activate only; msg is untouched
    auto task = [core, id, publish_all, m = std::make_shared<message>(std::move(msg))] {
      (void)tell_one_way(core, id, std::move(*m), nullptr, publish_all);
    };
    if (core->blocking_.submit(std::move(task))) return {};
    e = errc::system_shutting_down;
  }
  if (e) {
    publish_refused(core, msg, sender, id, e, publish_all);
    return e;
  }
  if (v.refused != nullptr) return v.refused_by.cell()->deliver(v.refused);
  return {};
}

// The fast path of a grain_ref's one-way tell: straight into route's activation while it is open
// for direct sends under route's generation (no directory lookup, no lock). False when the route
// is empty or stale (nothing was sent; msg is untouched); true when sent or refused (`out`).
bool direct_send(const grain_identity& id, message& msg, grain_route& route, actor_cell* sender,
                 error& out) {
  actor_cell* const cell = route.cell.cell();
  if (cell == nullptr) return false;
  // Not through the host: it may be gone (the cell stopped); the word is the cell's.
  std::atomic<std::uint64_t>& direct = *route.direct;
  const std::uint64_t d = direct.fetch_add(1, std::memory_order_acquire);
  if ((d & k_direct_closed) != 0 || static_cast<std::uint32_t>(d >> 32) != route.generation) {
    direct.fetch_sub(1, std::memory_order_release);
    route.cell = pid();
    return false;
  }
  receive_context* refused = nullptr;
  out = reserve(cell, id);
  if (!out) {
    auto* env = static_cast<receive_context*>(envelope_for(cell, std::move(msg)));
    if (sender != nullptr) {
      sender->add_ref();
      context_access::sender(*env) = sender;
    }
    if (!cell->deliver_if_open(env)) refused = env;
  }
  // Release: the enqueue above is in the mailbox before close_direct sees this sender leave.
  direct.fetch_sub(1, std::memory_order_release);
  if (out) {
    publish_refused(cell->system(), msg, sender, id, out);
  } else if (refused != nullptr) {
    out = cell->deliver(refused);  // a closed cell: refused, with its dead letter
  }
  return true;
}

// Delivers a timer's or a pipe's message to a grain: every refusal is published, and
// on_activate never runs on the timer thread.
error deliver_from_runtime(system_core* core, const grain_identity& id, message msg) {
  return tell_one_way(core, id, std::move(msg), nullptr, true, false);
}

// Schedules msg to target as spec says.
result<schedule_ref> schedule(scheduler& sched, schedule_target target, message msg,
                              const timer_spec& spec) {
  switch (spec.kind) {
    case schedule_kind::once:
      return sched.schedule_once(std::move(target), std::move(msg), spec.period);
    case schedule_kind::interval:
      return sched.schedule_every(std::move(target), std::move(msg), spec.period);
    case schedule_kind::cron:
      break;
  }
  return sched.schedule_cron(std::move(target), std::move(msg), spec.expression, spec.zone);
}

}  // namespace

result<message> ask_grain_message(actor_system& sys, const grain_identity& id, message msg,
                                  std::chrono::nanoseconds timeout) {
  if (timeout <= std::chrono::nanoseconds::zero()) return errc::invalid_timeout;
  if (!may_wait_for_reply()) return errc::blocking_on_worker;
  auto a = address(sys.core(), id, std::move(msg), nullptr);
  if (!a) return a.error();
  return ask(a->first.cell(), a->second, timeout);
}

error tell_grain_message(actor_system& sys, const grain_identity& id, message msg,
                         const grain_tell_options& opts, actor_cell* sender) {
  if (opts.one_way) return tell_one_way(sys.core(), id, std::move(msg), sender);
  if (opts.timeout <= std::chrono::nanoseconds::zero()) return errc::invalid_timeout;
  if (on_worker_thread()) return errc::blocking_on_worker;
  auto a = address(sys.core(), id, std::move(msg), sender);
  if (!a) return a.error();
  result<message> r =
      ask(a->first.cell(), a->second, opts.timeout, envelope::flag_grain_ack, false);
  return r ? error() : r.error();
}

result<message> ask_from_grain(receive_context& env, const grain_identity* grain, const pid* actor,
                               message msg, std::chrono::nanoseconds timeout) {
  actor_cell* self = context_access::receiver(env);
  system_core* core = self->system();
  if (timeout <= std::chrono::nanoseconds::zero()) return errc::invalid_timeout;
  if (core->dispatcher_.manual()) {
    return error(errc::blocking_on_worker,
                 "a blocking ask from a grain in the deterministic mode (use request_grain)");
  }
  actor_cell* to = nullptr;
  envelope* e = nullptr;
  pid target;
  if (grain != nullptr) {
    if (grain->str() == self->path())
      return error(errc::invalid_argument, "a grain cannot ask itself (use a method call)");
    auto a = address(core, *grain, std::move(msg), self);
    if (!a) return a.error();
    target = std::move(a->first);
    e = a->second;
  } else {
    if (actor == nullptr || !*actor) return errc::empty_pid;
    if (actor->cell() == self)
      return error(errc::invalid_argument, "a grain cannot ask itself (use a method call)");
    target = *actor;
    e = envelope_for(target, std::move(msg));
  }
  to = target.cell();
  // The wait is bounded by timeout: allowed on this worker for this one call.
  const bool before = std::exchange(bounded_wait_allowed, true);
  result<message> r = ask(to, e, timeout);
  bounded_wait_allowed = before;
  return r;
}

error pipe_from_grain(receive_context& env, const grain_identity* grain, const pid* actor,
                      piped_task task, std::chrono::nanoseconds timeout) {
  actor_cell* self = context_access::receiver(env);
  system_core* core = self->system();
  if (grain == nullptr) {
    if (actor == nullptr || !*actor) return errc::empty_pid;
    return pipe_through(core, self, *actor, nullptr, std::move(task), timeout);
  }
  if (error e = validate_actor_name(grain->name)) return e;
  pipe_sink sink = [core, id = *grain](message m) {
    (void)deliver_from_runtime(core, id, std::move(m));
  };
  return pipe_through(core, self, pid(), std::move(sink), std::move(task), timeout);
}

result<std::string> grain_timer(grain_host_base* host, message msg, const timer_spec& spec,
                                grain_timer_options options) {
  if (host == nullptr) return error(errc::invalid_argument, "grain timers need an activation");
  if (grain_host_access::timers_stopped(*host)) {
    return error(errc::grain_timers_stopped, "the activation is ending: no new timers");
  }
  actor_cell* cell = host->cell();
  system_core* core = cell->system();
  auto& table = grain_host_access::timers(*host);
  if (table == nullptr) table = new grain_timer_table();
  std::string ref = options.reference.empty() ? "timer-" + std::to_string(table->next_reference++)
                                              : std::move(options.reference);
  (void)cancel_grain_timer(host, ref);  // the same reference replaces the earlier timer
  schedule_target target;
  target.label = std::string(cell->path()) + " (timer " + ref + ")";  // path: kind/name
  // The tick goes to this cell only (never activates the grain again); a strong reference
  // keeps the cell while the timer lives, and stop_timers cancels it on deactivation.
  target.sink = [to = pid::share(cell), generation = grain_host_access::generation(*host),
                 keep = options.keep_alive](message m) {
    envelope* env = acquire_envelope(to.cell());
    env->payload().emplace<grain_tick>(grain_tick{generation, keep, std::move(m)});
    return deliver(nullptr, to.cell(), env);
  };
  result<schedule_ref> r = schedule(core->scheduler_, std::move(target), std::move(msg), spec);
  if (!r) return r.error();
  table->entries.emplace_back(ref, std::move(*r));
  return ref;
}

error cancel_grain_timer(grain_host_base* host, std::string_view reference) {
  if (host == nullptr) return errc::schedule_not_found;
  grain_timer_table* table = grain_host_access::timers(*host);
  if (table == nullptr) return errc::schedule_not_found;
  auto& v = table->entries;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it->first != reference) continue;
    const bool live = it->second.cancel();
    v.erase(it);
    return live ? error() : error(errc::schedule_not_found);
  }
  return errc::schedule_not_found;
}

result<schedule_ref> schedule_grain(actor_system& sys, const grain_identity& id, message msg,
                                    const timer_spec& spec) {
  system_core* core = sys.core();
  if (error e = validate_actor_name(id.name)) return e;
  if (auto k = layer_of(core).find_kind(id.kind); !k) return k.error();
  schedule_target target;
  target.label = id.str();
  target.sink = [core, id](message m) { return deliver_from_runtime(core, id, std::move(m)); };
  return schedule(core->scheduler_, std::move(target), std::move(msg), spec);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// grain_context: requests and deferred answers

request_handle grain_context::request_message(const grain_identity* grain, const pid* actor,
                                              akt::message msg, detail::grain_continuation then,
                                              const grain_request_options& options, error refused) {
  using namespace detail;
  grain_host_base* host = &host_;
  auto continuation = [host, then = std::move(then)](receive_context& rc,
                                                     result<akt::message> reply) mutable {
    // The activation that made the request is gone (a shutdown deactivated it): nobody to
    // continue; the reply is dropped with it.
    if (!grain_host_access::serving(*host)) return;
    grain_context g(rc, *host, false);
    try {
      then(g, std::move(reply));
    } catch (...) {
      actor_cell* c = context_access::receiver(rc);
      c->system()->log(log_level::warning, c->path(), caught("a request's continuation").message());
    }
    g.finish();
  };
  // A refusal made here reaches the continuation too (on a later turn), like every outcome.
  auto refuse = [&](error why) {
    return context_access::refuse_request(env_, std::move(continuation), std::move(why));
  };
  if (refused) return refuse(std::move(refused));
  const grain_reentrancy policy = host_.reentrancy();
  if (policy.mode == reentrancy_mode::off) {
    return refuse(error(errc::reentrancy_disabled,
                        "enable reentrancy on the grain kind, or with ctx.enable_reentrancy"));
  }
  const reentrancy_mode mode = options.mode.value_or(policy.mode);
  if (mode == reentrancy_mode::off) {
    return refuse(error(errc::reentrancy_disabled, "a request with its mode set to off"));
  }
  actor_cell* self = context_access::receiver(env_);
  if (policy.max_in_flight != 0) {
    const cell_extras* x = self->extras_if_any();
    if (x != nullptr && x->requests.size() >= policy.max_in_flight) {
      return refuse(error(errc::reentrancy_in_flight_limit,
                          std::to_string(policy.max_in_flight) + " requests already in flight"));
    }
  }
  pid to;
  if (grain != nullptr) {
    auto p = reach(layer_of(self->system()), *grain);
    if (!p) {
      publish_refused(self->system(), msg, self, *grain, p.error());
      return refuse(p.error());
    }
    to = std::move(*p);
  } else {
    if (actor == nullptr || !*actor) return refuse(errc::empty_pid);
    to = *actor;
  }
  request_options ro;
  ro.stash_others = mode == reentrancy_mode::stash_non_reentrant;
  return env_.request<akt::message>(to, std::move(msg), options.timeout, std::move(continuation),
                                    ro);
}

void grain_context::enable_reentrancy(grain_reentrancy r) {
  if (r.mode == reentrancy_mode::off) r.mode = reentrancy_mode::allow_all;
  host_.set_reentrancy(r);
}

void grain_context::disable_reentrancy() { host_.set_reentrancy({reentrancy_mode::off, 0}); }

reply_handle grain_context::defer_reply() {
  reply_handle r = env_.defer_reply();
  r.ack_only_ = acknowledged_;
  if (acknowledged_) r.deadline_ns_ = 0;  // a tell has no deadline (see deadline())
  r.grain_ = std::string(detail::context_access::receiver(env_)->path());  // kind/name
  answered_ = true;  // the answer now belongs to the handle
  return r;
}

namespace detail {

error check_grain_name(std::string_view name) { return validate_actor_name(name); }

error tell_grain_via(actor_system& sys, const grain_identity& id, message msg, grain_route& route,
                     actor_cell* sender) {
  error out;
  if (direct_send(id, msg, route, sender, out)) return out;
  return tell_one_way(sys.core(), id, std::move(msg), sender, false, true, &route);
}

request_handle request_grain_from_actor(receive_context& ctx, const grain_identity& id, message msg,
                                        std::chrono::nanoseconds timeout, continuation then,
                                        request_options options) {
  actor_cell* self = context_access::receiver(ctx);
  auto p = reach(layer_of(self->system()), id);
  if (!p) {
    publish_refused(self->system(), msg, self, id, p.error());
    return context_access::refuse_request(ctx, std::move(then), p.error());
  }
  return ctx.request<message>(*p, std::move(msg), timeout, std::move(then), options);
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
