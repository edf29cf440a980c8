#include "akt/actor/topics.hpp"

#include <algorithm>
#include <utility>

#include "actor/system_core.hpp"

namespace akt {

namespace {
using list_ptr = std::shared_ptr<const std::vector<pid>>;

// Stopping or stopped. An actor still in pre_start counts as live: it may subscribe itself there,
// and messages sent to it wait for its start.
bool gone(const pid& p) noexcept {
  return detail::cell_of(p)->life() >= detail::life_state::stopping;
}
}  // namespace

topics::~topics() {
  // Before the members go: a callback in flight on another thread still needs them, and
  // reset() waits for it.
  stopped_sub_.reset();
}

void topics::follow_stops() {
  std::call_once(follow_once_, [this] {
    stopped_sub_ = core_.events_->subscribe<actor_stopped>(
        [this](const actor_stopped& e) { remove_everywhere(detail::cell_of(e.actor)); });
  });
}

error topics::subscribe(const pid& subscriber, std::string_view topic) {
  if (!subscriber) return errc::empty_pid;
  if (topic.empty()) return error(errc::invalid_argument, "empty topic name");
  if (detail::cell_system(detail::cell_of(subscriber)) != &core_) {
    return error(errc::invalid_argument, "the subscriber belongs to another actor system");
  }
  // Following stops first, then checking liveness under the lock, closes the gap with a stop
  // in progress: either its actor_stopped callback takes the lock after we recorded the
  // subscription (and removes it), or it took the lock before, after the actor stopped being
  // live, and we see that below.
  follow_stops();
  list_ptr old;  // dropped after the lock
  std::lock_guard<std::mutex> lock(mutex_);
  if (gone(subscriber)) return errc::dead;
  auto it = by_topic_.find(topic);
  if (it == by_topic_.end()) {
    it = by_topic_.emplace(std::string(topic), std::make_shared<const std::vector<pid>>()).first;
  }
  const auto& current = *it->second;
  if (std::find(current.begin(), current.end(), subscriber) != current.end()) return {};
  auto next = std::make_shared<std::vector<pid>>();
  next->reserve(current.size() + 1);
  *next = current;
  next->push_back(subscriber);
  old = std::exchange(it->second, std::move(next));
  by_subscriber_[detail::cell_of(subscriber)].emplace_back(topic);
  return {};
}

error topics::unsubscribe(const pid& subscriber, std::string_view topic) {
  if (!subscriber) return errc::empty_pid;
  list_ptr old;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_topic_.find(topic);
  if (it == by_topic_.end()) return {};
  const auto& current = *it->second;
  if (std::find(current.begin(), current.end(), subscriber) == current.end()) return {};
  if (current.size() == 1) {
    old = std::move(it->second);
    by_topic_.erase(it);
  } else {
    auto next = std::make_shared<std::vector<pid>>();
    next->reserve(current.size() - 1);
    for (const pid& p : current) {
      if (p != subscriber) next->push_back(p);
    }
    old = std::exchange(it->second, std::move(next));
  }
  auto rev = by_subscriber_.find(detail::cell_of(subscriber));
  if (rev != by_subscriber_.end()) {
    auto& names = rev->second;
    names.erase(std::find(names.begin(), names.end(), topic));
    if (names.empty()) by_subscriber_.erase(rev);
  }
  return {};
}

result<std::size_t> topics::publish(std::string_view topic, const message& msg, const pid& sender) {
  if (topic.empty()) return error(errc::invalid_argument, "empty topic name");
  if (!msg.copyable()) {
    return error(errc::invalid_argument, msg.empty()
                                             ? std::string("empty message")
                                             : "a published message must be copyable; " +
                                                   std::string(msg.type_name()) + " is not");
  }
  list_ptr snapshot;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = by_topic_.find(topic);
    if (it == by_topic_.end()) return std::size_t{0};
    snapshot = it->second;
  }
  std::size_t delivered = 0;
  std::vector<const detail::actor_cell*> stopped;
  for (const pid& to : *snapshot) {
    if (gone(to)) {
      stopped.push_back(detail::cell_of(to));
      continue;
    }
    const error err =
        detail::deliver(detail::cell_of(sender), detail::cell_of(to),
                        detail::make_envelope(detail::cell_of(to), std::move(*msg.try_clone())));
    if (!err) {
      ++delivered;
    } else if (err == errc::dead) {
      stopped.push_back(detail::cell_of(to));  // stopped since the check above
    }
  }
  // Normally actor_stopped got there first; this covers a stop that raced with subscribe.
  for (const detail::actor_cell* c : stopped) remove_everywhere(c);
  return delivered;
}

std::size_t topics::subscribers(std::string_view topic) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_topic_.find(topic);
  return it == by_topic_.end() ? 0 : it->second->size();
}

std::vector<std::string> topics::list() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> names;
  names.reserve(by_topic_.size());
  for (const auto& [name, subs] : by_topic_) names.push_back(name);
  return names;
}

void topics::clear() noexcept {
  topic_map dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dropped.swap(by_topic_);
    by_subscriber_.clear();
  }
}

void topics::remove_everywhere_locked(const detail::actor_cell* cell,
                                      std::vector<list_ptr>& garbage) {
  auto rev = by_subscriber_.find(cell);
  if (rev == by_subscriber_.end()) return;
  for (const std::string& name : rev->second) {
    auto it = by_topic_.find(name);
    if (it == by_topic_.end()) continue;
    const auto& current = *it->second;
    if (current.size() == 1) {
      garbage.push_back(std::move(it->second));
      by_topic_.erase(it);
      continue;
    }
    auto next = std::make_shared<std::vector<pid>>();
    next->reserve(current.size() - 1);
    for (const pid& p : current) {
      if (detail::cell_of(p) != cell) next->push_back(p);
    }
    garbage.push_back(std::exchange(it->second, std::move(next)));
  }
  by_subscriber_.erase(rev);
}

void topics::remove_everywhere(const detail::actor_cell* cell) {
  std::vector<list_ptr> garbage;  // releases the pids after the lock
  std::lock_guard<std::mutex> lock(mutex_);
  remove_everywhere_locked(cell, garbage);
}

}  // namespace akt
