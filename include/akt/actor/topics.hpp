#pragma once
// topics: publish/subscribe between actors, by topic name. One per actor system
// (actor_system::topics()).
//
//   sys.topics().subscribe(audit, "orders");
//   auto n = sys.topics().publish("orders", order_placed{42});   // result<size_t>: receivers
//
// Contract
// - Every member may be called from any thread, also from inside a handler; none blocks for
//   longer than one mutex hold (no delivery happens under the lock).
// - publish delivers a copy of the message to each subscriber that is live at the time of the
//   call, as an ordinary tell (sender = the given pid, possibly none). Per publisher and
//   subscriber, messages arrive in publish order; two publishers are not ordered. A
//   subscription added or removed while a publish is under way may or may not see that
//   publish.
// - A subscriber that stops is removed on its own: the topics follow the system's
//   actor_stopped events (from the first subscribe on), and a publish that finds a stopped
//   subscriber removes it too. When the system stops, every subscription is dropped.
// - Memory: one entry per (topic, subscriber) pair, each holding a pid (a reference on the
//   actor's cell); a topic without subscribers is forgotten. A publish allocates a snapshot
//   reference (no copy of the list) and, per subscriber, an envelope from the pool and the
//   message's copy (a heap box only for types that do not fit a message's inline storage).

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "akt/actor/event_stream.hpp"
#include "akt/actor/pid.hpp"
#include "akt/core/error.hpp"
#include "akt/core/message.hpp"
#include "akt/core/result.hpp"

namespace akt {

namespace detail {
class system_core;
}

class topics {
 public:
  // The system creates its own; use actor_system::topics().
  explicit topics(detail::system_core& core) noexcept : core_(core) {}
  ~topics();
  topics(const topics&) = delete;
  topics& operator=(const topics&) = delete;

  // Subscribes a live actor of this system to `topic`. Subscribing twice is one subscription.
  // Errors: empty_pid, dead (the actor is stopping or stopped), invalid_argument (empty topic,
  // or an actor of another system).
  error subscribe(const pid& subscriber, std::string_view topic);
  // Ends the subscription; ok also when there was none. Errors: empty_pid.
  error unsubscribe(const pid& subscriber, std::string_view topic);

  // Delivers a copy of msg to every live subscriber of `topic` and returns how many accepted it
  // (a refusal, such as a full bounded mailbox, is a dead letter as for any tell). sender may be
  // empty. Errors: invalid_argument (empty topic, or a message that is empty or not
  // copyable: checked before looking at subscribers). No subscribers: 0, nothing sent.
  result<std::size_t> publish(std::string_view topic, const message& msg, const pid& sender = {});

  // Current subscribers of `topic`.
  std::size_t subscribers(std::string_view topic) const;
  // Topics with at least one subscriber, in name order.
  std::vector<std::string> list() const;

  // Drops every subscription. The system calls it when it stops (a pid held here would keep its
  // actor's cell, and through it the system, alive).
  void clear() noexcept;

 private:
  using subscriber_list = std::vector<pid>;
  // Each topic's list is copy-on-write: publish copies the shared_ptr under the lock and
  // delivers from that snapshot after releasing it.
  using topic_map = std::map<std::string, std::shared_ptr<const subscriber_list>, std::less<>>;

  // Starts following actor_stopped (once, before the first subscription is recorded).
  void follow_stops();
  // Removes `cell` from every topic it subscribed to. Old lists go to `garbage`, to be dropped
  // by the caller after the lock is released.
  void remove_everywhere_locked(const detail::actor_cell* cell,
                                std::vector<std::shared_ptr<const subscriber_list>>& garbage);
  void remove_everywhere(const detail::actor_cell* cell);

  detail::system_core& core_;
  std::once_flag follow_once_;
  subscription stopped_sub_;  // written once inside follow_once_, reset by the destructor

  mutable std::mutex mutex_;
  topic_map by_topic_;  // guarded by mutex_
  // Reverse index, for removing a stopped actor without scanning every topic. Guarded by
  // mutex_.
  std::unordered_map<const detail::actor_cell*, std::vector<std::string>> by_subscriber_;
};

}  // namespace akt
