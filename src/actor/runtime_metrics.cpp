#include "actor/runtime_metrics.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <typeindex>

#include "actor/system_core.hpp"
#include "akt/actor/detail/actor_cell.hpp"

namespace akt::detail {

namespace {

// Kinds of actors, process-wide: a type's id is its index here. Only grows (kinds are C++ types:
// their number is bounded by the program).
struct kind_names {
  std::mutex mutex;
  std::unordered_map<std::type_index, std::uint32_t> ids;  // guarded by mutex
  std::vector<std::string> names;                          // guarded by mutex
};

kind_names& kinds() {
  static kind_names* k = new kind_names();  // never destroyed: cells may ask during exit
  return *k;
}

std::string demangle(const char* mangled) {
  int status = 0;
  char* s = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = status == 0 && s != nullptr ? std::string(s) : std::string(mangled);
  std::free(s);
  return out;
}

// This thread's table for one system. generation tells systems apart (not the address, which a
// later system may reuse). Writer and reader: this thread.
struct table_cache {
  std::uint64_t generation = 0;
  void* table = nullptr;
};
thread_local table_cache t_table;

std::atomic<std::uint64_t> g_generation{0};  // any thread, relaxed: only uniqueness matters

std::vector<metrics::label> kind_label(const std::string& name) { return {{"kind", name}}; }

}  // namespace

std::uint32_t intern_actor_kind(const std::type_info& type) noexcept {
  kind_names& k = kinds();
  try {
    std::lock_guard lock(k.mutex);
    auto [it, fresh] = k.ids.try_emplace(std::type_index(type), 0);
    if (fresh) {
      it->second = static_cast<std::uint32_t>(k.names.size());
      k.names.push_back(demangle(type.name()));
    }
    return it->second;
  } catch (...) {
    return k_no_kind;
  }
}

std::string actor_kind_name(std::uint32_t kind) {
  kind_names& k = kinds();
  std::lock_guard lock(k.mutex);
  return kind < k.names.size() ? k.names[kind] : std::string("unknown");
}

runtime_metrics::handler_table::~handler_table() {
  for (auto& s : slots) delete s.load(std::memory_order_relaxed);
}

runtime_metrics::runtime_metrics(system_core& core)
    : core_(core),
      enabled_(core.config_.metrics.enabled),
      sample_every_(enabled_ && core.config_.metrics.handler_sample_every > 0
                        ? core.config_.metrics.handler_sample_every
                        : UINT32_MAX),
      generation_(g_generation.fetch_add(1, std::memory_order_relaxed) + 1) {}

runtime_metrics::~runtime_metrics() = default;

void runtime_metrics::install() {
  if (!enabled_ || collector_) return;
  collector_ = core_.metrics_.add_collector([this](metrics::snapshot& s) { collect(s); });
}

runtime_metrics::kind_totals& runtime_metrics::totals(std::uint32_t kind) {
  if (kind >= totals_.size()) totals_.resize(kind + 1);
  return totals_[kind];
}

void runtime_metrics::on_actor_stopped(std::uint32_t kind, std::uint64_t processed) noexcept {
  if (kind == k_no_kind || processed == 0) return;
  try {
    std::lock_guard lock(kinds_mutex_);
    totals(kind).processed_by_stopped += processed;
  } catch (...) {  // out of memory growing the table: the figure is lost, the stop goes on
    core_.log(log_level::warning, "metrics", "could not record a stopped actor's messages");
  }
}

void runtime_metrics::on_failure(std::uint32_t kind) noexcept {
  if (kind == k_no_kind) return;
  try {
    std::lock_guard lock(kinds_mutex_);
    ++totals(kind).failures;
  } catch (...) {
    core_.log(log_level::warning, "metrics", "could not record a failure");
  }
}

void runtime_metrics::on_restart(std::uint32_t kind) noexcept {
  if (kind == k_no_kind) return;
  try {
    std::lock_guard lock(kinds_mutex_);
    ++totals(kind).restarts;
  } catch (...) {
    core_.log(log_level::warning, "metrics", "could not record a restart");
  }
}

runtime_metrics::handler_table* runtime_metrics::table_for_this_thread() noexcept {
  if (t_table.generation == generation_) return static_cast<handler_table*>(t_table.table);
  try {
    std::lock_guard lock(tables_mutex_);
    auto& slot = tables_[std::this_thread::get_id()];
    if (!slot) slot = std::make_unique<handler_table>();
    t_table = {generation_, slot.get()};
    return slot.get();
  } catch (...) {
    return nullptr;
  }
}

void runtime_metrics::record_handler(std::uint32_t kind, std::uint64_t ns) noexcept {
  if (kind >= k_max_kinds) return;
  handler_table* t = table_for_this_thread();
  if (t == nullptr) return;
  handler_slot* s = t->slots[kind].load(std::memory_order_relaxed);  // this thread wrote it
  if (s == nullptr) {
    s = new (std::nothrow) handler_slot();
    if (s == nullptr) return;
    t->slots[kind].store(s, std::memory_order_release);
  }
  std::size_t i = 0;
  while (i < k_handler_bounds_ns.size() && ns > k_handler_bounds_ns[i]) ++i;
  auto bump = [](std::atomic<std::uint64_t>& a, std::uint64_t by) {
    a.store(a.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  };
  bump(s->buckets[i], 1);
  bump(s->sum_ns, ns);
}

void runtime_metrics::collect(metrics::snapshot& snap) {
  using metrics::metric_type;
  // Live actors per kind: one pass over the name registry (grains and remote proxies are not
  // in it), reading each cell's own figures.
  struct live {
    std::uint64_t actors = 0;
    std::uint64_t processed = 0;
    std::uint64_t mailbox = 0;
  };
  // Totals of stopped actors first, then the registry: a stopping actor leaves the registry
  // before its count is folded into its kind's total, so in this order it is counted at most
  // once (missed at worst, while it is between the two; last_messages_ covers that). The other
  // order counted an actor in both when it stopped between the reads, and the floor below then
  // kept that excess for good.
  std::vector<kind_totals> totals;
  {
    std::lock_guard lock(kinds_mutex_);
    totals = totals_;
  }
  std::vector<live> by_kind;
  core_.registry_.for_each_cell([&](const actor_cell& c) {
    const std::uint32_t k = c.kind_id();
    if (k == k_no_kind) return;
    if (k >= by_kind.size()) by_kind.resize(k + 1);
    live& l = by_kind[k];
    ++l.actors;
    l.processed += c.processed();
    // Only mailboxes that count (bounded, fair, priority, segmented): the default one keeps no
    // count, and its head word is on the producers' line.
    if (const mailbox* m = c.custom_mailbox()) l.mailbox += m->size();
  });
  // A kind reported before stays in range even when, for now, no live actor and no total name
  // it (its one actor left the registry and is not folded yet).
  const std::size_t n = std::max({by_kind.size(), totals.size(), last_messages_.size()});
  by_kind.resize(n);
  totals.resize(n);
  if (last_messages_.size() < n) last_messages_.resize(n, 0);

  // Handler times, summed over the threads' tables.
  std::vector<std::array<std::uint64_t, k_handler_bounds_ns.size() + 1>> buckets;
  std::vector<std::uint64_t> sums;
  {
    std::lock_guard lock(tables_mutex_);
    for (const auto& [id, t] : tables_) {
      for (std::uint32_t k = 0; k < k_max_kinds; ++k) {
        const handler_slot* s = t->slots[k].load(std::memory_order_acquire);
        if (s == nullptr) continue;
        if (k >= buckets.size()) {
          buckets.resize(k + 1, {});
          sums.resize(k + 1, 0);
        }
        for (std::size_t i = 0; i < buckets[k].size(); ++i)
          buckets[k][i] += s->buckets[i].load(std::memory_order_relaxed);
        sums[k] += s->sum_ns.load(std::memory_order_relaxed);
      }
    }
  }

  auto timed = [&](std::size_t k) {
    if (k >= buckets.size()) return false;
    for (std::uint64_t b : buckets[k])
      if (b > 0) return true;
    return false;
  };
  std::vector<std::string> names(std::max(n, buckets.size()));
  for (std::size_t k = 0; k < names.size(); ++k) {
    // A kind once reported stays (last_messages_): a stopping actor between the registry and its
    // kind's total must not make its kind vanish from one scrape.
    const bool used = (k < n && (by_kind[k].actors > 0 || by_kind[k].processed > 0 ||
                                 last_messages_[k] > 0 || totals[k].processed_by_stopped > 0 ||
                                 totals[k].failures > 0 || totals[k].restarts > 0)) ||
                      timed(k);
    if (used) names[k] = actor_kind_name(static_cast<std::uint32_t>(k));
  }

  snap.families.reserve(snap.families.size() + 13);  // the references below stay valid
  auto& actors = snap.add_family("akt_actors", "Live actors, by kind (the actor's C++ type).",
                                 metric_type::gauge);
  auto& messages =
      snap.add_family("akt_actor_messages_total",
                      "Messages handed to actors' handlers, by kind; stopped actors included.",
                      metric_type::counter);
  auto& failures =
      snap.add_family("akt_actor_failures_total",
                      "Handler failures (exceptions or ctx.fail), by kind.", metric_type::counter);
  auto& restarts = snap.add_family("akt_actor_restarts_total", "Restarts by a supervisor, by kind.",
                                   metric_type::counter);
  auto& mailbox = snap.add_family(
      "akt_actor_mailbox_messages",
      "Messages waiting in actors' mailboxes, by kind, where the mailbox counts them (the "
      "default mailbox keeps no count and adds 0).",
      metric_type::gauge);
  for (std::size_t k = 0; k < n; ++k) {
    if (names[k].empty()) continue;
    const live& l = by_kind[k];
    const kind_totals& t = totals[k];
    std::uint64_t msgs = l.processed + t.processed_by_stopped;
    msgs = last_messages_[k] = std::max(msgs, last_messages_[k]);
    actors.add(kind_label(names[k]), static_cast<double>(l.actors));
    messages.add(kind_label(names[k]), static_cast<double>(msgs));
    failures.add(kind_label(names[k]), static_cast<double>(t.failures));
    restarts.add(kind_label(names[k]), static_cast<double>(t.restarts));
    mailbox.add(kind_label(names[k]), static_cast<double>(l.mailbox));
  }

  std::vector<double> bounds;
  for (std::uint64_t b : k_handler_bounds_ns) bounds.push_back(static_cast<double>(b) / 1e9);
  auto& handler = snap.add_family(
      "akt_actor_handler_seconds",
      "Handler time by kind, SAMPLED: one message in handler_sample_every per worker is timed.",
      metric_type::histogram, std::move(bounds));
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    if (names[k].empty() || !timed(k)) continue;
    std::vector<std::uint64_t> cumulative(k_handler_bounds_ns.size());
    std::uint64_t running = 0;
    for (std::size_t i = 0; i < cumulative.size(); ++i) cumulative[i] = running += buckets[k][i];
    running += buckets[k].back();
    handler.add_histogram(kind_label(names[k]), std::move(cumulative), running,
                          static_cast<double>(sums[k]) / 1e9);
  }
  if (handler.samples.empty()) snap.families.pop_back();

  auto& dead = snap.add_family("akt_dead_letters_total",
                               "Messages that could not be delivered or handled, by reason.",
                               metric_type::counter);
  for (std::size_t r = 0; r < k_reasons; ++r) {
    const std::uint64_t v = dead_letters_[r].load(std::memory_order_relaxed);
    if (v > 0) dead.add({{"reason", std::string(to_string(static_cast<errc>(r)))}}, double(v));
  }

  const dispatcher_stats d = core_.dispatcher_.stats();
  snap.add_family("akt_dispatcher_turns_total", "Actor turns run by the dispatcher.",
                  metric_type::counter)
      .add({}, static_cast<double>(d.turns));
  snap.add_family("akt_dispatcher_parks_total", "Times a dispatcher worker parked (went idle).",
                  metric_type::counter)
      .add({}, static_cast<double>(d.parks));
  snap.add_family("akt_dispatcher_steals_total", "Run-queue steals between dispatcher workers.",
                  metric_type::counter)
      .add({}, static_cast<double>(d.steals));
  snap.add_family("akt_dispatcher_handoffs_total",
                  "Ready actors handed straight to a parked worker.", metric_type::counter)
      .add({}, static_cast<double>(d.handoffs));
  snap.add_family("akt_dispatcher_workers", "Dispatcher worker threads.", metric_type::gauge)
      .add({}, static_cast<double>(core_.dispatcher_.worker_count()));
  snap.add_family("akt_system_actors_spawned_total", "Actors ever started in this system.",
                  metric_type::counter)
      .add({}, static_cast<double>(core_.spawned_.load(std::memory_order_relaxed)));
}

}  // namespace akt::detail
