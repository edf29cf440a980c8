// Choosing a mailbox: a bounded one that refuses when full, and a priority one. Quoted by
// docs/guide/02-mailboxes-and-failures.md.

#include <akt/akt.hpp>

#include <chrono>
#include <cstdio>
#include <thread>

struct job {
  int priority;
  int id;
};

class worker : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    if (auto* j = ctx.get_if<job>()) {
      if (j->id == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // busy
      std::printf("job %d (priority %d)\n", j->id, j->priority);
    }
  }
};

int main() {
  akt::actor_system sys("mailboxes", {.workers = 1});
  if (!sys.start()) return 1;

  // [bounded]
  // At most 2 messages wait; more are refused with mailbox_full and published as dead letters.
  auto bounded = sys.spawn<worker>(
      "bounded", akt::with_mailbox(std::make_unique<akt::non_blocking_bounded_mailbox>(2)));
  // [/bounded]
  if (!bounded) return 1;
  if (bounded->tell(job{0, 0})) return 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(10));  // let job 0 start
  for (int i = 1; i <= 4; ++i) {
    akt::error e = bounded->tell(job{0, i});
    if (e) std::printf("job %d refused: %s\n", i, e.message().c_str());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));

  // [priority]
  // Higher priority first; equal priorities keep their arrival order.
  auto by_priority = [](const akt::message& a, const akt::message& b) {
    return a.get_if<job>()->priority > b.get_if<job>()->priority;
  };
  auto urgent_first = sys.spawn<worker>(
      "urgent-first",
      akt::with_mailbox(std::make_unique<akt::unbounded_stable_priority_mailbox>(by_priority)));
  // [/priority]
  if (!urgent_first) return 1;
  if (urgent_first->tell(job{0, 0})) return 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (urgent_first->tell(job{1, 1})) return 1;
  if (urgent_first->tell(job{5, 2})) return 1;
  if (urgent_first->tell(job{1, 3})) return 1;
  if (urgent_first->tell(job{9, 4})) return 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));

  sys.stop();
  return 0;
}
