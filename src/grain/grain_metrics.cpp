// The grain layer's metrics (grain_metrics.hpp).

#include "grain/grain_metrics.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "grain/grain_layer.hpp"

namespace akt::detail {

namespace {
using akt::metrics::label;
using akt::metrics::metric_type;
}  // namespace

std::vector<double> grain_metrics::activation_bounds() {
  return akt::metrics::exponential_bounds(0.0001, 2, 20);
}

grain_metrics::grain_metrics(grain_layer& layer, akt::metrics::registry& reg) : layer_(layer) {
  // A name the user took already with another shape leaves the histogram out (the rest stays).
  if (auto f = reg.add_histogram("akt_grain_activation_seconds",
                                 "Time from the start of a grain activation (fence, cluster "
                                 "claim, on_activate) to its success, per kind.",
                                 activation_bounds(), {"kind"})) {
    activation_seconds_ = *f;
  }
  collector_ = reg.add_collector([this](akt::metrics::snapshot& out) { collect(out); });
}

std::unique_ptr<grain_kind_figures> grain_metrics::figures_for(std::string_view kind) const {
  auto f = std::make_unique<grain_kind_figures>();
  if (activation_seconds_) f->activation_seconds = activation_seconds_.with({kind});
  return f;
}

void grain_metrics::collect(akt::metrics::snapshot& out) {
  const std::vector<const grain_kind*> kinds = layer_.kinds();
  const std::size_t n = kinds.size();
  // The stopped cells' messages first, then the directory: a cell leaves the directory before
  // it adds its count to the kind's (grain_host_base::post_stop), so read in this order a cell
  // is never counted twice; one that stops between the two reads is missed by this scrape, and
  // the clamp below keeps the counter from going back for it.
  std::vector<std::uint64_t> messages(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (kinds[i]->figures)
      messages[i] = kinds[i]->figures->messages_of_stopped.load(std::memory_order_relaxed);
  }
  struct tally final : grain_directory::visitor {
    std::vector<std::uint64_t> active;
    std::vector<std::uint64_t>& messages;
    tally(std::size_t kinds, std::vector<std::uint64_t>& m) : active(kinds, 0), messages(m) {}
    error visit(actor_cell* cell) override {  // under the cell's shard lock: the host is alive
      const grain_host_base& host = grain_host_access::of(cell);
      const std::size_t i = host.kind()->index;
      if (i < active.size()) {  // a kind registered after the list was read waits a scrape
        ++active[i];
        messages[i] += grain_host_access::handled(host);
      }
      return {};
    }
  } t(n, messages);
  layer_.each_active(t);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (last_messages_.size() < n) last_messages_.resize(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      messages[i] = std::max(messages[i], last_messages_[i]);
      last_messages_[i] = messages[i];
    }
  }

  // Each family is filled before the next is added: add_family may move the ones before it.
  auto per_kind = [&](const char* name, const char* help, metric_type type, auto value_of) {
    auto& f = out.add_family(name, help, type);
    for (std::size_t i = 0; i < n; ++i) {
      if (kinds[i]->figures) f.add({{"kind", kinds[i]->name}}, value_of(i, *kinds[i]->figures));
    }
  };
  auto load = [](const std::atomic<std::uint64_t>& a) {
    return static_cast<double>(a.load(std::memory_order_relaxed));
  };
  per_kind("akt_grains_active",
           "Grain activations in this node's directory, per kind (those still activating are "
           "not counted).",
           metric_type::gauge,
           [&](std::size_t i, const grain_kind_figures&) { return double(t.active[i]); });
  per_kind("akt_grain_activations_total", "Grain activations that succeeded, per kind.",
           metric_type::counter,
           [&](std::size_t, const grain_kind_figures& f) { return load(f.activations); });
  per_kind("akt_grain_deactivations_total",
           "Grain activations that ended (idle, shutdown, fence drop), per kind.",
           metric_type::counter,
           [&](std::size_t, const grain_kind_figures& f) { return load(f.deactivations); });
  per_kind("akt_grain_messages_total",
           "User messages (and keep-alive timer ticks) the kind's cells took from their mailboxes.",
           metric_type::counter,
           [&](std::size_t i, const grain_kind_figures&) { return double(messages[i]); });
  auto& refusals = out.add_family(
      "akt_grain_refusals_total",
      "Messages to grains refused on this node before any handler ran, per kind and reason "
      "(the errc name).",
      metric_type::counter);
  for (std::size_t i = 0; i < n; ++i) {
    const grain_kind_figures* f = kinds[i]->figures.get();
    if (f == nullptr) continue;
    for (std::size_t r = 0; r < k_refusal_reasons; ++r) {
      const std::uint64_t v = f->refusals[r].load(std::memory_order_relaxed);
      if (v == 0) continue;
      refusals.add(
          {{"kind", kinds[i]->name}, {"reason", std::string(to_string(static_cast<errc>(r)))}},
          static_cast<double>(v));
    }
  }
}

}  // namespace akt::detail
