// The event stream: typed subscriptions and their lifetime.

#include <gtest/gtest.h>

#include "actor/actor_test_support.hpp"

namespace akt::test {
namespace {

struct custom_event {
  int value;
};

TEST(EventStream_Subscribe, DeliversOnlyTheSubscribedType) {
  auto es = std::make_shared<event_stream>();
  std::vector<int> seen;
  auto sub = es->subscribe<custom_event>([&](const custom_event& e) { seen.push_back(e.value); });
  EXPECT_TRUE(es->has_subscribers<custom_event>());
  EXPECT_FALSE(es->has_subscribers<dead_letter>());
  es->publish(custom_event{1});
  es->publish(42);  // another type
  es->publish(custom_event{2});
  EXPECT_EQ(seen, (std::vector<int>{1, 2}));
}

TEST(EventStream_Subscribe, UnsubscribeStopsDelivery) {
  auto es = std::make_shared<event_stream>();
  int calls = 0;
  auto sub = es->subscribe<custom_event>([&](const custom_event&) { ++calls; });
  es->publish(custom_event{1});
  sub.reset();
  EXPECT_FALSE(sub.active());
  es->publish(custom_event{2});
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(es->has_subscribers<custom_event>());
}

TEST(EventStream_Subscribe, UnsubscribeFromInsideTheCallback) {
  auto es = std::make_shared<event_stream>();
  int calls = 0;
  subscription sub;
  sub = es->subscribe<custom_event>([&](const custom_event&) {
    ++calls;
    sub.reset();
  });
  es->publish(custom_event{1});
  es->publish(custom_event{2});
  EXPECT_EQ(calls, 1);
}

TEST(EventStream_Subscribe, NoCallAfterUnsubscribeReturnsUnderConcurrency) {
  auto es = std::make_shared<event_stream>();
  std::atomic<bool> unsubscribed{false};
  std::atomic<int> late_calls{0};
  std::atomic<int> calls{0};
  std::atomic<long> published{0};
  auto sub = es->subscribe<custom_event>([&](const custom_event&) {
    if (unsubscribed.load()) late_calls.fetch_add(1);
    calls.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(50));  // widens the in-flight window
  });
  std::atomic<bool> stop{false};
  std::thread publisher([&] {
    while (!stop.load()) {
      es->publish(custom_event{1});
      published.fetch_add(1);
    }
  });
  // Unsubscribe while the publisher is calling the callback...
  EXPECT_TRUE(eventually([&] { return calls.load() >= 20; }));
  sub.reset();
  unsubscribed.store(true);
  // ...then let it publish many more times before looking.
  const long at_reset = published.load();
  EXPECT_TRUE(eventually([&] { return published.load() >= at_reset + 1000; }));
  stop.store(true);
  publisher.join();
  EXPECT_EQ(late_calls.load(), 0);
}

TEST(EventStream_System, LifecycleEventsArePublished) {
  recorder::shared s;
  actor_system sys("events", {.workers = 1});
  ASSERT_TRUE(sys.start());
  collector<actor_started, std::string> started(
      sys, [](const actor_started& e) { return std::string(e.actor.name()); });
  collector<actor_stopped, std::string> stopped(
      sys, [](const actor_stopped& e) { return std::string(e.actor.name()); });
  auto p = sys.spawn<recorder>("watched", &s);
  ASSERT_TRUE(p);
  ASSERT_TRUE(sys.stop_actor(*p));
  ASSERT_EQ(started.wait_for(1), 1u);
  ASSERT_EQ(stopped.wait_for(1), 1u);
  EXPECT_EQ(started.items()[0], "watched");
  EXPECT_EQ(stopped.items()[0], "watched");
}

TEST(EventStream_System, DeadLettersAreCountedWithoutSubscribers) {
  recorder::shared s;
  actor_system sys("dl-count", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  ASSERT_TRUE(sys.stop_actor(*p));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(p->tell(add{1}), errc::dead);
  EXPECT_EQ(sys.stats().dead_letters, 5u);
}

TEST(EventStream_System, ADeadLetterCarriesPayloadSenderAndReceiver) {
  recorder::shared s;
  actor_system sys("dl-fields", {.workers = 1});
  ASSERT_TRUE(sys.start());
  struct seen_t {
    long value = 0;
    std::string sender;
    std::string receiver;
  };
  collector<dead_letter, seen_t> dls(sys, [](const dead_letter& d) {
    seen_t s;
    if (auto* v = d.msg.get_if<add>()) s.value = v->n;
    s.sender = std::string(d.sender.name());
    s.receiver = std::string(d.receiver.name());
    return s;
  });
  auto victim = sys.spawn<recorder>("victim", &s);
  ASSERT_TRUE(victim);
  ASSERT_TRUE(sys.stop_actor(*victim));
  struct sender_actor : akt::actor {
    pid to;
    explicit sender_actor(pid t) : to(std::move(t)) {}
    void receive(akt::receive_context& ctx) override { (void)ctx.tell(to, add{77}); }
  };
  auto from = sys.spawn<sender_actor>("from", *victim);
  ASSERT_TRUE(from);
  ASSERT_FALSE(from->tell(1));
  ASSERT_EQ(dls.wait_for(1), 1u);
  EXPECT_EQ(dls.items()[0].value, 77);
  EXPECT_EQ(dls.items()[0].sender, "from");
  EXPECT_EQ(dls.items()[0].receiver, "victim");
}

}  // namespace
}  // namespace akt::test
