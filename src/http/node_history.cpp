#include "http/node_history.hpp"

#include "http/json_writer.hpp"

namespace akt::http::detail {

node_history::node_history(std::size_t capacity, std::chrono::milliseconds interval)
    : interval_(interval), ring_(capacity) {}

void node_history::add(const history_sample& s) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ring_.empty()) return;
  ring_[next_] = s;
  next_ = (next_ + 1) % ring_.size();
  if (size_ < ring_.size()) ++size_;
}

std::vector<history_sample> node_history::samples() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<history_sample> out;
  out.reserve(size_);
  // The oldest is at next_ once the ring is full, at 0 before.
  const std::size_t first = size_ == ring_.size() ? next_ : 0;
  for (std::size_t i = 0; i < size_; ++i) out.push_back(ring_[(first + i) % ring_.size()]);
  return out;
}

std::string node_history::json() const {
  const std::vector<history_sample> all = samples();
  json_writer w;
  w.begin_object()
      .field("interval_ms", static_cast<std::uint64_t>(interval_.count()))
      .field("capacity", static_cast<std::uint64_t>(ring_.size()))
      .key("fields")
      .begin_array()
      .value("t")
      .value("processed")
      .value("dead")
      .value("grains")
      .value("actors")
      .end_array()
      .key("samples")
      .begin_array();
  for (const history_sample& s : all) {
    w.begin_array()
        .value(s.time_ms)
        .value(s.processed)
        .value(s.dead_letters)
        .value(s.grains)
        .value(s.actors)
        .end_array();
  }
  w.end_array().end_object();
  return w.take();
}

}  // namespace akt::http::detail
