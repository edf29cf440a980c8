#include "akt/metrics/registry.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "akt/core/assert.hpp"

namespace akt::metrics {

namespace detail {

// One series: its label values and cells (counter: stripes lines, word 0 of each; gauge: word 0
// of one line; histogram: lines_per_stripe lines per stripe, words 0..bounds the non-cumulative
// bucket counts, +Inf last, then the sum's bits).
struct series {
  std::vector<std::string> values;
  std::vector<cache_line> lines;
};

struct family {
  std::string name;
  std::string help;
  metric_type type;
  std::vector<std::string> label_names;
  std::vector<double> bounds;
  std::uint32_t stripes;           // power of two
  std::uint32_t lines_per_stripe;  // histogram: ceil((bounds + 2) / words per line); else 1

  // Guards series_ (with() and collect()); the cells themselves are atomics.
  mutable std::mutex mutex;
  // Ordered by label values, so a scrape lists them in a stable order. unique_ptr: handles
  // point into the cells, which must not move.
  std::map<std::vector<std::string>, std::unique_ptr<series>> series_by_values;

  series& find_or_add(std::vector<std::string> values) {
    AKT_ASSERT(values.size() == label_names.size());
    values.resize(label_names.size());
    std::lock_guard lock(mutex);
    auto it = series_by_values.find(values);
    if (it == series_by_values.end()) {
      auto s = std::make_unique<series>();
      s->values = values;
      const std::size_t n =
          type == metric_type::gauge ? 1 : std::size_t{stripes} * lines_per_stripe;
      s->lines = std::vector<cache_line>(n);
      it = series_by_values.emplace(std::move(values), std::move(s)).first;
    }
    return *it->second;
  }

  counter make_counter(series& s) { return counter(s.lines.data(), stripes - 1); }
  gauge make_gauge(series& s) { return gauge(&s.lines[0].words[0]); }
  histogram make_histogram(series& s) {
    return histogram(s.lines.data(), bounds.data(), static_cast<std::uint32_t>(bounds.size()),
                     lines_per_stripe, stripes - 1);
  }

  std::uint64_t word(const series& s, std::uint32_t stripe, std::size_t i) const {
    return s.lines[std::size_t{stripe} * lines_per_stripe + i / k_words_per_line]
        .words[i % k_words_per_line]
        .load(std::memory_order_relaxed);
  }

  void read_into(family_snapshot& out) const {
    std::lock_guard lock(mutex);
    out.samples.reserve(series_by_values.size());
    for (const auto& [values, sp] : series_by_values) {
      const series& s = *sp;
      std::vector<label> labels;
      labels.reserve(values.size());
      for (std::size_t i = 0; i < values.size(); ++i) labels.push_back({label_names[i], values[i]});
      switch (type) {
        case metric_type::counter: {
          std::uint64_t total = 0;
          for (std::uint32_t st = 0; st < stripes; ++st) total += word(s, st, 0);
          out.add(std::move(labels), static_cast<double>(total));
          break;
        }
        case metric_type::gauge:
          out.add(std::move(labels), std::bit_cast<double>(word(s, 0, 0)));
          break;
        case metric_type::histogram: {
          const std::size_t n = bounds.size();
          std::vector<std::uint64_t> per_bucket(n + 1, 0);
          double sum = 0;
          for (std::uint32_t st = 0; st < stripes; ++st) {
            for (std::size_t i = 0; i <= n; ++i) per_bucket[i] += word(s, st, i);
            sum += std::bit_cast<double>(word(s, st, n + 1));
          }
          std::vector<std::uint64_t> cumulative(n);
          std::uint64_t running = 0;
          for (std::size_t i = 0; i < n; ++i) cumulative[i] = running += per_bucket[i];
          out.add_histogram(std::move(labels), std::move(cumulative), running + per_bucket[n], sum);
          break;
        }
      }
    }
  }
};

struct registry_state {
  std::uint32_t stripes;

  // Guards families / by_name (registration, collect).
  mutable std::mutex families_mutex;
  std::vector<std::unique_ptr<family>> families;  // in registration order
  std::unordered_map<std::string, family*> by_name;

  // Guards collectors (add, remove, and the whole run of them in collect(), so that a removed
  // collector is never running once remove returns).
  mutable std::mutex collectors_mutex;
  std::vector<std::pair<std::uint64_t, std::function<void(snapshot&)>>> collectors;
  std::uint64_t next_collector_id = 1;
};

}  // namespace detail

namespace {

bool name_char(char c, bool first, bool colon) noexcept {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return true;
  if (colon && c == ':') return true;
  return !first && c >= '0' && c <= '9';
}

bool ends_with(std::string_view s, std::string_view suffix) noexcept {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::uint32_t stripe_count() noexcept {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp<std::uint32_t>(std::bit_ceil(hw), 8u, 256u);
}

error invalid(std::string what) { return error(errc::invalid_argument, std::move(what)); }

}  // namespace

bool valid_metric_name(std::string_view name) noexcept {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0, true)) return false;
  return true;
}

bool valid_label_name(std::string_view name) noexcept {
  if (name.empty() || name.starts_with("__")) return false;
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0, false)) return false;
  return true;
}

std::uint64_t counter::value() const noexcept {
  std::uint64_t total = 0;
  for (std::uint32_t s = 0; s <= mask_; ++s)
    total += lines_[s].words[0].load(std::memory_order_relaxed);
  return total;
}

void histogram::observe(double v) const noexcept {
  // First bound >= v (le); NaN compares false everywhere and lands in +Inf.
  std::uint32_t i = std::isnan(v)
                        ? bound_count_
                        : static_cast<std::uint32_t>(
                              std::lower_bound(bounds_, bounds_ + bound_count_, v) - bounds_);
  detail::cache_line* base =
      lines_ + std::size_t{detail::stripe_index() & mask_} * lines_per_stripe_;
  base[i / detail::k_words_per_line].words[i % detail::k_words_per_line].fetch_add(
      1, std::memory_order_relaxed);
  const std::uint32_t si = bound_count_ + 1;
  std::atomic<std::uint64_t>& sum =
      base[si / detail::k_words_per_line].words[si % detail::k_words_per_line];
  std::uint64_t old = sum.load(std::memory_order_relaxed);
  while (!sum.compare_exchange_weak(old,
                                    std::bit_cast<std::uint64_t>(std::bit_cast<double>(old) + v),
                                    std::memory_order_relaxed)) {
  }
}

template <class Handle>
Handle family_handle<Handle>::with(std::initializer_list<std::string_view> values) const {
  std::vector<std::string> v;
  v.reserve(values.size());
  for (std::string_view s : values) v.emplace_back(s);
  return with(v);
}

template <class Handle>
Handle family_handle<Handle>::with(const std::vector<std::string>& values) const {
  AKT_ASSERT(family_ != nullptr);
  detail::series& s = family_->find_or_add(values);
  if constexpr (std::is_same_v<Handle, counter>) {
    return family_->make_counter(s);
  } else if constexpr (std::is_same_v<Handle, gauge>) {
    return family_->make_gauge(s);
  } else {
    return family_->make_histogram(s);
  }
}

template class family_handle<counter>;
template class family_handle<gauge>;
template class family_handle<histogram>;

void collector_handle::reset() noexcept {
  if (state_ == nullptr) return;
  {
    std::lock_guard lock(state_->collectors_mutex);
    auto& c = state_->collectors;
    c.erase(std::remove_if(c.begin(), c.end(), [&](const auto& e) { return e.first == id_; }),
            c.end());
  }
  state_ = nullptr;
}

registry::registry() : state_(std::make_unique<detail::registry_state>()) {
  state_->stripes = stripe_count();
}

registry::~registry() = default;

std::uint32_t registry::stripes() const noexcept { return state_->stripes; }

namespace {

result<detail::family*> add_family(detail::registry_state& st, std::string_view name,
                                   std::string_view help, metric_type type,
                                   std::vector<double> bounds,
                                   std::vector<std::string> label_names) {
  if (!valid_metric_name(name))
    return invalid("metric name '" + std::string(name) + "' is not [a-zA-Z_:][a-zA-Z0-9_:]*");
  if (type == metric_type::counter && !ends_with(name, "_total"))
    return invalid("counter name '" + std::string(name) + "' does not end in _total");
  for (std::size_t i = 0; i < label_names.size(); ++i) {
    const std::string& l = label_names[i];
    if (!valid_label_name(l))
      return invalid("label name '" + l + "' of " + std::string(name) +
                     " is not [a-zA-Z_][a-zA-Z0-9_]* or starts with __");
    if (type == metric_type::histogram && l == "le")
      return invalid("a histogram may not have the label 'le' (" + std::string(name) + ")");
    for (std::size_t j = 0; j < i; ++j)
      if (label_names[j] == l)
        return invalid("label name '" + l + "' twice in " + std::string(name));
  }
  if (type == metric_type::histogram) {
    if (bounds.size() > 64) return invalid("more than 64 bounds for " + std::string(name));
    for (std::size_t i = 0; i < bounds.size(); ++i) {
      if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i - 1] < bounds[i])))
        return invalid("bounds of " + std::string(name) +
                       " are not finite and strictly increasing");
    }
  }

  std::lock_guard lock(st.families_mutex);
  if (auto it = st.by_name.find(std::string(name)); it != st.by_name.end()) {
    detail::family* f = it->second;
    if (f->type != type)
      return invalid("metric '" + std::string(name) + "' is already registered as a " +
                     std::string(to_string(f->type)));
    if (f->label_names != label_names || f->bounds != bounds)
      return invalid("metric '" + std::string(name) +
                     "' is already registered with other labels or bounds");
    return f;
  }
  auto f = std::make_unique<detail::family>();
  f->name = std::string(name);
  f->help = std::string(help);
  f->type = type;
  f->label_names = std::move(label_names);
  f->bounds = std::move(bounds);
  f->stripes = st.stripes;
  f->lines_per_stripe =
      type == metric_type::histogram
          ? static_cast<std::uint32_t>((f->bounds.size() + 2 + detail::k_words_per_line - 1) /
                                       detail::k_words_per_line)
          : 1;
  detail::family* raw = f.get();
  st.families.push_back(std::move(f));
  st.by_name.emplace(raw->name, raw);
  return raw;
}

}  // namespace

result<counter_family> registry::add_counter(std::string_view name, std::string_view help,
                                             std::vector<std::string> label_names) {
  auto f = add_family(*state_, name, help, metric_type::counter, {}, std::move(label_names));
  if (!f) return f.error();
  return counter_family(*f);
}

result<gauge_family> registry::add_gauge(std::string_view name, std::string_view help,
                                         std::vector<std::string> label_names) {
  auto f = add_family(*state_, name, help, metric_type::gauge, {}, std::move(label_names));
  if (!f) return f.error();
  return gauge_family(*f);
}

result<histogram_family> registry::add_histogram(std::string_view name, std::string_view help,
                                                 std::vector<double> bounds,
                                                 std::vector<std::string> label_names) {
  auto f = add_family(*state_, name, help, metric_type::histogram, std::move(bounds),
                      std::move(label_names));
  if (!f) return f.error();
  return histogram_family(*f);
}

collector_handle registry::add_collector(std::function<void(snapshot&)> collector) {
  std::lock_guard lock(state_->collectors_mutex);
  const std::uint64_t id = state_->next_collector_id++;
  state_->collectors.emplace_back(id, std::move(collector));
  return collector_handle(state_.get(), id);
}

snapshot registry::collect() const {
  snapshot snap;
  {
    std::lock_guard lock(state_->families_mutex);
    snap.families.reserve(state_->families.size());
    for (const auto& f : state_->families) {
      family_snapshot& out = snap.add_family(f->name, f->help, f->type, f->bounds);
      f->read_into(out);
    }
  }
  const std::size_t registered = snap.families.size();
  {
    std::lock_guard lock(state_->collectors_mutex);
    for (const auto& [id, fn] : state_->collectors) fn(snap);
  }
  if (snap.families.size() == registered) return snap;

  // Merge what the collectors added: one family per name (the first keeps its place).
  std::unordered_map<std::string_view, std::size_t> index;
  std::vector<family_snapshot> merged;
  merged.reserve(snap.families.size());
  for (auto& f : snap.families) {
    auto it = index.find(f.name);
    if (it == index.end()) {
      merged.push_back(std::move(f));  // reserved: merged never reallocates, the key stays valid
      index.emplace(merged.back().name, merged.size() - 1);
      continue;
    }
    family_snapshot& into = merged[it->second];
    if (into.type != f.type || into.bounds != f.bounds) continue;  // dropped
    for (auto& s : f.samples) into.samples.push_back(std::move(s));
  }
  snap.families = std::move(merged);
  return snap;
}

std::vector<double> exponential_bounds(double start, double factor, std::size_t count) {
  AKT_ASSERT(start > 0 && factor > 1);
  std::vector<double> b(count);
  for (std::size_t i = 0; i < count; ++i, start *= factor) b[i] = start;
  return b;
}

std::vector<double> linear_bounds(double start, double width, std::size_t count) {
  AKT_ASSERT(width > 0);
  std::vector<double> b(count);
  for (std::size_t i = 0; i < count; ++i) b[i] = start + width * static_cast<double>(i);
  return b;
}

}  // namespace akt::metrics
