#pragma once
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
//
// The layer's code is split by concern: grain_layer.cpp (kinds, the directory, activation,
// shutdown), grain_host.cpp (the host actor and grain_context's answers), grain_send.cpp (the
// send paths: tell, ask, request, pipes, a grain_ref's direct path) and grain_timers.cpp
// (activation timers and system schedules to grains). This header holds what they share.

#include <algorithm>
#include <atomic>
#include <deque>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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
#include "grain/grain_metrics.hpp"
#include "grain/grain_seams.hpp"

namespace akt {
namespace detail {

class grain_layer;

struct grain_kind {
  std::string name;
  grain_cell_factory factory;
  // The layer that registered it: a host reaches the fence through its kind (read-only after
  // registration) instead of through its cell's system pointer, which sits on the line senders
  // write on every message (grain_host_base::fence_holds).
  grain_layer* layer = nullptr;
  std::size_t index = 0;  // in registration order, from 0 (the metrics' per-kind tables)
  // The kind's metrics figures (grain_metrics.hpp); null while metrics are off. Set at
  // registration, before the kind is published: read-only afterwards, by activating threads
  // and refusals, never by a plain send.
  std::unique_ptr<grain_kind_figures> figures;
};

// Control messages of the host (user-queue messages, so they keep their place behind what was
// queued before them). Not in an anonymous namespace: several files of the layer create and
// handle them, and a message's type must be one type for all of them.
struct grain_idle_check {};
struct grain_shutdown_marker {};
// nudge_grains: a turn for the fence check, no handler; may end a dormant activation.
struct grain_nudge {};
// A tick of an activation timer: the user's message, wrapped so that the host knows which
// activation scheduled it and whether it counts as activity.
struct grain_tick {
  std::uint32_t generation;
  bool keep_alive;
  message inner;
};

// What grain_layer::visit returns for an identity without an activation when it may not
// activate one (never seen outside the layer).
constexpr errc k_not_active = errc::actor_not_found;

// The error of an exception being handled, naming where it was thrown (call inside a catch).
error caught(std::string_view where);

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
  static bool serving(grain_host_base& h) noexcept {
    return h.instance() != nullptr && h.fence_holds();
  }
  static grain_timer_table*& timers(grain_host_base& h) noexcept { return h.timers_; }
  static bool timers_stopped(grain_host_base& h) noexcept { return h.timers_stopped_; }
  static std::uint32_t generation(grain_host_base& h) noexcept { return h.generation_; }
  // Messages the host's cell handled (any thread: see handled_).
  static std::uint64_t handled(const grain_host_base& h) noexcept {
    return h.handled_.load(std::memory_order_relaxed);
  }
};

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
      : core_(core), directory_(make_local_grain_directory(&link_of)) {
    if (core->config_.metrics.enabled)
      metrics_ = std::make_unique<grain_metrics>(*this, core->metrics_);
  }
  ~grain_layer() override {
    metrics_.reset();  // first: waits out a scrape that reads the kinds and the directory
    delete kind_index_.load(std::memory_order_relaxed);
    delete placement_.load(std::memory_order_relaxed);
    delete gate_.load(std::memory_order_relaxed);
  }

  // The placement and the activation gate, if installed (grain_seams.hpp): one acquire load per
  // routed send, and per activation.
  grain_placement* placement() const noexcept { return placement_.load(std::memory_order_acquire); }
  grain_activation_gate* gate() const noexcept { return gate_.load(std::memory_order_acquire); }
  const grain_fence* fence() const noexcept { return fence_.load(std::memory_order_acquire); }
  // Whether this system is a cluster node (its config has a cluster section): its grains run
  // only under the cluster's fence, which its cluster installs as it starts. Until then (remoting
  // already listens) no grain of it may activate. Immutable: any thread.
  bool fence_expected() const noexcept { return core_->config_.cluster.has_value(); }
  bool set_fence(const grain_fence* f) noexcept {
    const grain_fence* expected = nullptr;
    return fence_.compare_exchange_strong(expected, f, std::memory_order_acq_rel);
  }
  // Install p or g (owned); false when one is installed already (the argument is then deleted).
  bool set_placement(std::unique_ptr<grain_placement> p) noexcept { return install(placement_, p); }
  bool set_gate(std::unique_ptr<grain_activation_gate> g) noexcept { return install(gate_, g); }

  result<const grain_kind*> register_kind(std::string_view name, grain_cell_factory factory,
                                          const grain_options* defaults) {
    std::lock_guard<std::mutex> lock(kinds_mutex_);
    auto it = kinds_.find(name);
    if (it == kinds_.end()) {
      auto k = std::make_unique<grain_kind>();
      k->name = std::string(name);
      k->factory = factory;
      k->layer = this;
      k->index = kinds_.size();
      if (metrics_) k->figures = metrics_->figures_for(k->name);
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
    // Marked refused: nothing ran and nothing left this node, so a caller may count the call
    // as not delivered (a cluster node that does not host the kind answers with this when its
    // placement found no owner to route to; unmarked, callers had to count it as possibly
    // delivered).
    return error_access::mark_refused(
        error(errc::grain_kind_unknown, "no grain kind '" + std::string(name) + "'"));
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
  // then an identity without one gives k_not_active): see grain_directory. Once the shutdown
  // began, a local send is refused (system_shutting_down); a delivery from another node
  // (from_peer) still reaches an activation that is there, until it is deactivated, and is
  // refused only when it would activate one (goakt-grains.md "During shutdown"). In a cluster
  // that matters: the sender releases the grain's claim on that refusal and activates it
  // elsewhere, which must not happen while this activation may still run a handler.
  error visit(const grain_kind* kind, std::string_view name, const grain_options* per_call,
              grain_directory::visitor& v, bool may_activate = true, bool from_peer = false) {
    // A peer's delivery once the shutdown began: to the activation that is there, or refused
    // now (not queued for an activation later: nothing would answer it once the blocking pool
    // stopped).
    const bool peer_while_closing = from_peer && closing_.load(std::memory_order_acquire);
    if (error e = peer_while_closing ? core_->refusal() : refuse_now()) {
      if (kind->figures) kind->figures->refused(e.code());
      return e;
    }
    if (peer_while_closing) may_activate = false;
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
    if (peer_while_closing && e == k_not_active) e = errc::system_shutting_down;
    if (AKT_UNLIKELY(e) && kind->figures && e != k_not_active) kind->figures->refused(e.code());
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
        p = detail::share_pid(cell);
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
  // See grain_directory::opened.
  bool opened(actor_cell* cell) { return directory_->opened(cell); }

  void before_actors_stop(std::chrono::steady_clock::time_point deadline,
                          std::vector<std::string>& problems, bool& timed_out) override {
    // A crash (akt::testkit::crash) drops every grain as a killed process would: no
    // on_deactivate, no release through the gate.
    if (core_->crashing()) abandoned_.store(true, std::memory_order_seq_cst);
    closing_.store(true, std::memory_order_seq_cst);
    // Activations still in progress get their marker when they finish (visit's rollback), and
    // the wait below covers them: an activation that succeeds after this point is rolled back
    // with on_deactivate, never left running past the shutdown. No gap between the two: an
    // activation that leaves its gate after this scan (both under the shard's lock) sees
    // closing_ set, and one that left it before is in the scan. A grain found by both gets two
    // markers; the second finds it deactivated.
    for (const pid& p : directory_->active()) post_marker(detail::cell_of(p));
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
        names.append(names.empty() ? "" : ", ").append(detail::cell_of(left[i])->path());
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
      const std::string_view key = detail::cell_of(p)->path();
      const auto slash = key.rfind('/');
      out.push_back({std::string(key.substr(0, slash)), std::string(key.substr(slash + 1))});
    }
    return out;
  }

  pid find_active(std::string_view key) { return directory_->find(key); }
  std::size_t active_count() { return directory_->count(); }
  // Visits every activation in the directory (not those still activating) under its shard's
  // lock: quick, no user code (grain_directory::each_active).
  void each_active(grain_directory::visitor& v) { directory_->each_active(v); }

  // The kinds registered so far, in registration order (index i is the kind of index i).
  std::vector<const grain_kind*> kinds() const {
    std::vector<const grain_kind*> out;
    if (const kind_index* idx = kind_index_.load(std::memory_order_acquire)) {
      out.resize(idx->kinds.size());
      for (const auto& [name, k] : idx->kinds) out[k->index] = k;
    }
    return out;
  }
  // A refusal of a message to kind `kind` (by name: the direct path knows no kind pointer), for
  // the metrics; a cold path: a lookup in the kinds' snapshot.
  void note_refusal(std::string_view kind, errc why) const {
    if (!metrics_) return;
    if (result<const grain_kind*> k = find_kind(kind); k && (*k)->figures)
      (*k)->figures->refused(why);
  }

  // A nudge (grain_nudge) to every activation: each takes a turn, and the fence check there
  // drops those of an epoch that is no longer valid.
  void nudge_all() {
    for (const pid& p : directory_->active()) {
      actor_cell* c = detail::cell_of(p);
      (void)detail::deliver(nullptr, c, make_envelope(c, grain_nudge{}));
    }
  }

  void post_marker(actor_cell* c) {
    (void)detail::deliver(nullptr, c, make_envelope(c, grain_shutdown_marker{}));
  }

  system_core* core() const noexcept { return core_; }

  // The queue of deliveries from other nodes that wait for an identity's activation
  // (deliver_to_grain, drain_pending in grain_send.cpp; see pending_). Any thread; each call
  // takes pending_mutex_ once, except any_pending, which reads only the count.
  //
  // Whether any identity has a queue: a send skips the mutex while nothing waits anywhere.
  bool any_pending() const noexcept { return pending_count_.load(std::memory_order_acquire) != 0; }
  // Appends d to key's queue if it has one (true); false (d untouched) if it has none.
  bool join_pending(const std::string& key, grain_delivery& d) {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    return join_pending_locked(key, d);
  }
  // Appends d to key's queue if it has one (false), or opens key's queue with d (true: the
  // caller must see it drained).
  bool open_pending(const std::string& key, grain_delivery& d) {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    if (join_pending_locked(key, d)) return false;
    auto& q = pending_[key];
    q.push_back(std::make_unique<grain_delivery>(std::move(d)));
    pending_count_.fetch_add(1, std::memory_order_release);
    return true;
  }
  // The first delivery of key's queue, which stays in the queue (and owned there) until
  // pop_pending; null when key has no queue, or its queue is empty (the queue is then closed).
  grain_delivery* front_pending(const std::string& key) {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    auto it = pending_.find(key);
    if (it == pending_.end()) return nullptr;
    if (it->second.empty()) {
      pending_.erase(it);
      pending_count_.fetch_sub(1, std::memory_order_release);
      return nullptr;
    }
    return it->second.front().get();
  }
  // Drops the first delivery of key's queue (the one front_pending gave).
  void pop_pending(const std::string& key) {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_[key].pop_front();
  }
  // Closes key's queue and hands over what waits in it (empty when it has none).
  std::deque<std::unique_ptr<grain_delivery>> take_pending(const std::string& key) {
    std::deque<std::unique_ptr<grain_delivery>> out;
    std::lock_guard<std::mutex> lock(pending_mutex_);
    if (auto it = pending_.find(key); it != pending_.end()) {
      out.swap(it->second);
      pending_.erase(it);
      pending_count_.fetch_sub(1, std::memory_order_release);
    }
    return out;
  }

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

  bool join_pending_locked(const std::string& key, grain_delivery& d) {  // under pending_mutex_
    auto it = pending_.find(key);
    if (it == pending_.end()) return false;
    it->second.push_back(std::make_unique<grain_delivery>(std::move(d)));
    return true;
  }

  template <class T>
  static bool install(std::atomic<T*>& slot, std::unique_ptr<T>& v) noexcept {
    T* expected = nullptr;
    if (!slot.compare_exchange_strong(expected, v.get(), std::memory_order_acq_rel)) return false;
    (void)v.release();
    return true;
  }

  error refuse_now() const {
    if (error e = core_->refusal()) return e;
    if (closing_.load(std::memory_order_acquire)) return errc::system_shutting_down;
    return {};
  }

  static bool sets_nothing(const grain_options& o) noexcept {
    return !o.mailbox_capacity && !o.deactivate_after && !o.activation_timeout &&
           !o.activation_attempts && !o.dependencies && !o.reentrancy && !o.placement &&
           o.role.empty();
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
    if (o.placement) out->placement = *o.placement;
    if (!o.role.empty()) out->role = o.role;
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
  // Deliveries from other nodes waiting for their identity's activation on the blocking pool,
  // in arrival order (deliver_to_grain): while an identity has an entry here, later deliveries
  // to it join the queue instead of overtaking it. Guarded by pending_mutex_; pending_count_
  // (writer: under the mutex, release; reader: any_pending, acquire) lets a send skip the
  // mutex while nothing waits anywhere.
  std::mutex pending_mutex_;
  std::unordered_map<std::string, std::deque<std::unique_ptr<grain_delivery>>> pending_;
  std::atomic<std::size_t> pending_count_{0};
  // Writers: set_placement / set_gate, once (acq_rel); readers: senders and activations
  // (acquire). Owned.
  std::atomic<grain_placement*> placement_{nullptr};
  std::atomic<grain_activation_gate*> gate_{nullptr};
  std::atomic<const grain_fence*> fence_{nullptr};  // as placement_, but not owned
  std::atomic<bool> abandoned_{false};  // writer: stop after its deadline; readers: hosts
  // Written once per activation: on a line of its own, so that it never invalidates the
  // read-mostly seams above, which a fenced grain's turn reads on every message (fence_).
  alignas(64) std::atomic<std::uint64_t> activations_{0};
  std::mutex problems_mutex_;
  std::vector<std::string> deactivation_problems_;
  // The metrics' collector and histogram (null while metrics are off). Built by the constructor,
  // destroyed first by the destructor.
  std::unique_ptr<grain_metrics> metrics_;
};

// The system's grain layer, created on first use.
grain_layer& layer_of(system_core* core);
grain_layer& layer_of(actor_system& sys);
// The identity of the activation living in `cell` (its path is kind/name).
grain_identity identity_of(const grain_kind* kind, const actor_cell* cell);

// A blocking ask through the target of an identity that another node owns (route_grain).
result<message> ask_owner(const pid& to, message msg, std::chrono::nanoseconds timeout);

// Delivers a timer's or a pipe's message to a grain: every refusal is published, and
// on_activate never runs on the timer thread (grain_send.cpp).
error deliver_from_runtime(system_core* core, const grain_identity& id, message msg);

}  // namespace detail
}  // namespace akt
