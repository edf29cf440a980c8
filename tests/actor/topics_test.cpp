// Topics: publish/subscribe between actors, by topic name.

#include <gtest/gtest.h>

#include <akt/testkit/probe.hpp>

#include <memory>
#include <stdexcept>

#include "actor/actor_test_support.hpp"

namespace akt::test {
namespace {

using akt::testkit::probe;

struct news {
  int n;
};

// Counts the news it receives; throws on boom.
class counter : public akt::actor {
 public:
  explicit counter(std::atomic<long>* seen) : seen_(seen) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<news>()) {
      seen_->fetch_add(1);
    } else if (auto* b = ctx.get_if<boom>()) {
      throw std::runtime_error(b->why);
    }
  }

 private:
  std::atomic<long>* seen_;
};

TEST(Topics_Publish, FansOutACopyToEverySubscriber) {
  actor_system sys("topics-fan", {.workers = 2});
  ASSERT_TRUE(sys.start());
  probe a(sys), b(sys), c(sys), outsider(sys);
  for (probe* p : {&a, &b, &c}) ASSERT_FALSE(sys.topics().subscribe(p->ref(), "news"));
  ASSERT_FALSE(sys.topics().subscribe(outsider.ref(), "weather"));
  EXPECT_EQ(sys.topics().subscribers("news"), 3u);
  EXPECT_EQ(sys.topics().list(), (std::vector<std::string>{"news", "weather"}));

  auto n = sys.topics().publish("news", news{7});
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_EQ(*n, 3u);
  for (probe* p : {&a, &b, &c}) {
    auto got = p->expect<news>();
    ASSERT_TRUE(got) << got.error().message();
    EXPECT_EQ(got->n, 7);
    EXPECT_TRUE(p->last_sender().empty()) << "published without a sender";
  }
  EXPECT_TRUE(outsider.expect_no_message());

  // A heap-boxed payload is copied for each subscriber, not shared.
  const std::string big(200, 'x');
  ASSERT_EQ(sys.topics().publish("news", big).value_or(0), 3u);
  for (probe* p : {&a, &b, &c}) EXPECT_EQ(p->expect<std::string>().value_or(""), big);
}

TEST(Topics_Publish, NoSubscribersReturnsZeroAndSendsNothing) {
  actor_system sys("topics-none", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto dls = dead_letters(sys);
  auto n = sys.topics().publish("nobody-listens", news{1});
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 0u);
  EXPECT_TRUE(sys.topics().list().empty()) << "publishing does not create a topic";
  EXPECT_EQ(sys.topics().subscribers("nobody-listens"), 0u);
  EXPECT_EQ(dls.size(), 0u);
  EXPECT_EQ(sys.stats().dead_letters, 0u);
}

TEST(Topics_Unsubscribe, StopsDeliveryAndForgetsAnEmptyTopic) {
  actor_system sys("topics-unsub", {.workers = 2});
  ASSERT_TRUE(sys.start());
  probe a(sys), b(sys);
  ASSERT_FALSE(sys.topics().subscribe(a.ref(), "t"));
  ASSERT_FALSE(sys.topics().subscribe(b.ref(), "t"));
  ASSERT_FALSE(sys.topics().unsubscribe(a.ref(), "t"));
  EXPECT_EQ(sys.topics().subscribers("t"), 1u);
  EXPECT_EQ(sys.topics().publish("t", news{1}).value_or(99), 1u);
  EXPECT_EQ(b.expect<news>().value_or(news{0}).n, 1);
  EXPECT_TRUE(a.expect_no_message());
  // Unsubscribing again, or from a topic never joined, is fine.
  EXPECT_FALSE(sys.topics().unsubscribe(a.ref(), "t"));
  EXPECT_FALSE(sys.topics().unsubscribe(a.ref(), "elsewhere"));
  ASSERT_FALSE(sys.topics().unsubscribe(b.ref(), "t"));
  EXPECT_TRUE(sys.topics().list().empty());
  EXPECT_EQ(sys.topics().publish("t", news{2}).value_or(99), 0u);
  EXPECT_TRUE(b.expect_no_message());
}

TEST(Topics_Subscribe, IsIdempotent) {
  actor_system sys("topics-idem", {.workers = 1});
  ASSERT_TRUE(sys.start());
  probe a(sys);
  ASSERT_FALSE(sys.topics().subscribe(a.ref(), "t"));
  ASSERT_FALSE(sys.topics().subscribe(a.ref(), "t"));
  EXPECT_EQ(sys.topics().subscribers("t"), 1u);
  EXPECT_EQ(sys.topics().publish("t", news{3}).value_or(99), 1u);
  EXPECT_TRUE(a.expect<news>());
  EXPECT_TRUE(a.expect_no_message()) << "one subscription, one copy";
  // One unsubscribe ends it.
  ASSERT_FALSE(sys.topics().unsubscribe(a.ref(), "t"));
  EXPECT_EQ(sys.topics().subscribers("t"), 0u);
}

TEST(Topics_Subscribe, RefusesEmptyDeadAndForeignSubscribersAndEmptyTopics) {
  actor_system other("topics-other", {.workers = 1});
  actor_system sys("topics-refuse", {.workers = 1});
  ASSERT_TRUE(sys.start());
  ASSERT_TRUE(other.start());
  probe a(sys), stranger(other);
  EXPECT_EQ(sys.topics().subscribe(pid(), "t"), errc::empty_pid);
  EXPECT_EQ(sys.topics().unsubscribe(pid(), "t"), errc::empty_pid);
  EXPECT_EQ(sys.topics().subscribe(a.ref(), ""), errc::invalid_argument);
  EXPECT_EQ(sys.topics().publish("", news{1}).code(), errc::invalid_argument);
  EXPECT_EQ(sys.topics().subscribe(stranger.ref(), "t"), errc::invalid_argument);
  std::atomic<long> seen{0};
  auto gone = sys.spawn<counter>("gone", &seen);
  ASSERT_TRUE(gone);
  ASSERT_TRUE(sys.stop_actor(*gone));
  EXPECT_EQ(sys.topics().subscribe(*gone, "t"), errc::dead);
  EXPECT_TRUE(sys.topics().list().empty());
}

TEST(Topics_Subscribe, AnActorMaySubscribeItselfInPreStart) {
  struct listener : akt::actor {
    explicit listener(std::atomic<long>* s) : seen(s) {}
    akt::error pre_start(akt::actor_context& ctx) override {
      return ctx.system().topics().subscribe(ctx.self(), "boot");
    }
    void receive(akt::receive_context& ctx) override {
      if (ctx.is<news>()) seen->fetch_add(1);
    }
    std::atomic<long>* seen;
  };
  std::atomic<long> seen{0};
  actor_system sys("topics-prestart", {.workers = 1});
  ASSERT_TRUE(sys.start());
  ASSERT_TRUE(sys.spawn<listener>("l", &seen));
  EXPECT_EQ(sys.topics().publish("boot", news{1}).value_or(0), 1u);
  EXPECT_TRUE(eventually([&] { return seen.load() == 1; }));
}

TEST(Topics_AutoRemoval, StoppedAndFailedSubscribersAreRemoved) {
  std::atomic<long> seen{0};
  actor_system sys("topics-auto", {.workers = 2});
  ASSERT_TRUE(sys.start());
  probe stays(sys);
  auto stopped = sys.spawn<counter>("stopped", &seen);
  auto failed = sys.spawn<counter>("failed", &seen);
  ASSERT_TRUE(stopped && failed);
  for (const pid& p : {*stopped, *failed, stays.ref()}) {
    ASSERT_FALSE(sys.topics().subscribe(p, "t"));
    ASSERT_FALSE(sys.topics().subscribe(p, "u"));
  }
  ASSERT_FALSE(sys.topics().subscribe(*stopped, "only-stopped"));
  EXPECT_EQ(sys.topics().subscribers("t"), 3u);

  ASSERT_TRUE(sys.stop_actor(*stopped));
  ASSERT_FALSE(failed->tell(boom{"bye"}));  // the default supervisor stops it
  ASSERT_TRUE(eventually(
      [&] { return sys.topics().subscribers("t") == 1 && sys.topics().subscribers("u") == 1; }));
  EXPECT_EQ(sys.topics().list(), (std::vector<std::string>{"t", "u"}))
      << "a topic whose last subscriber stopped is forgotten";
  EXPECT_EQ(sys.topics().publish("t", news{1}).value_or(99), 1u);
  EXPECT_TRUE(stays.expect<news>());
  EXPECT_EQ(seen.load(), 0);
}

TEST(Topics_AutoRemoval, SystemStopDropsEverySubscription) {
  std::atomic<long> seen{0};
  actor_system sys("topics-sysstop", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto a = sys.spawn<counter>("a", &seen);
  ASSERT_TRUE(a);
  ASSERT_FALSE(sys.topics().subscribe(*a, "t"));
  ASSERT_TRUE(sys.stop());
  EXPECT_TRUE(sys.topics().list().empty());
  EXPECT_EQ(sys.topics().publish("t", news{1}).value_or(99), 0u);
}

TEST(Topics_Publish, RefusesANonCopyableMessage) {
  actor_system sys("topics-move-only", {.workers = 1});
  ASSERT_TRUE(sys.start());
  probe a(sys);
  ASSERT_FALSE(sys.topics().subscribe(a.ref(), "t"));
  auto r = sys.topics().publish("t", std::make_unique<int>(5));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::invalid_argument);
  EXPECT_NE(r.error().message().find("unique_ptr"), std::string::npos) << r.error().message();
  // Refused whether or not anyone listens, so the mistake does not depend on timing.
  EXPECT_EQ(sys.topics().publish("empty", std::make_unique<int>(5)).code(), errc::invalid_argument);
  EXPECT_EQ(sys.topics().publish("t", message()).code(), errc::invalid_argument);
  EXPECT_TRUE(a.expect_no_message());
}

TEST(Topics_Publish, SubscribersSeeTheSenderAndCanAnswerIt) {
  // Answers news with news{n + 1} to whoever sent it.
  struct answerer : akt::actor {
    void receive(akt::receive_context& ctx) override {
      if (auto* n = ctx.get_if<news>()) ctx.reply(news{n->n + 1});
    }
  };
  actor_system sys("topics-sender", {.workers = 2});
  ASSERT_TRUE(sys.start());
  probe publisher(sys), listener(sys);
  auto ans = sys.spawn<answerer>("answerer");
  ASSERT_TRUE(ans);
  ASSERT_FALSE(sys.topics().subscribe(listener.ref(), "q"));
  ASSERT_FALSE(sys.topics().subscribe(*ans, "q"));
  EXPECT_EQ(sys.topics().publish("q", news{41}, publisher.ref()).value_or(0), 2u);
  ASSERT_TRUE(listener.expect<news>());
  EXPECT_EQ(listener.last_sender(), publisher.ref());
  auto answer = publisher.expect<news>();
  ASSERT_TRUE(answer) << answer.error().message();
  EXPECT_EQ(answer->n, 42);
  EXPECT_EQ(publisher.last_sender(), *ans);
}

TEST(Topics_Concurrency, PublishersAndSubscribersRaceSafely) {
  // Stable subscribers see every publish; churning threads subscribe, unsubscribe, spawn and
  // stop subscribers meanwhile. Bounded in time; TSan checks the rest.
  constexpr int k_publishers = 3;
  constexpr int k_churners = 2;
  constexpr int k_publishes = 1000;
  constexpr int k_stable = 3;
  std::atomic<long> stable_seen{0};
  std::atomic<long> churn_seen{0};
  std::atomic<long> delivered{0};
  actor_system sys("topics-race", {.workers = 2});
  ASSERT_TRUE(sys.start());
  for (int i = 0; i < k_stable; ++i) {
    auto p = sys.spawn<counter>("stable-" + std::to_string(i), &stable_seen);
    ASSERT_TRUE(p);
    ASSERT_FALSE(sys.topics().subscribe(*p, "race"));
  }
  std::atomic<bool> stop{false};
  const bool in_time =
      run_bounded(k_publishers + k_churners, std::chrono::seconds(60), stop, [&](int id) {
        if (id < k_publishers) {
          for (int i = 0; i < k_publishes && !stop.load(); ++i) {
            auto n = sys.topics().publish("race", news{i});
            if (n) delivered.fetch_add(static_cast<long>(*n));
          }
          return;
        }
        for (int i = 0; i < 100 && !stop.load(); ++i) {
          auto p = sys.spawn<counter>("churn-" + std::to_string(id) + "-" + std::to_string(i),
                                      &churn_seen);
          if (!p) continue;
          (void)sys.topics().subscribe(*p, "race");
          (void)sys.topics().subscribers("race");
          (void)sys.topics().list();
          if (i % 2 == 0)
            (void)sys.topics().unsubscribe(*p, "race");
          else
            (void)p->stop();  // removed by the actor_stopped event
        }
      });
  ASSERT_TRUE(in_time) << "publishers and churners did not finish in time";
  constexpr long k_expected = static_cast<long>(k_publishers) * k_publishes * k_stable;
  EXPECT_TRUE(eventually([&] { return stable_seen.load() == k_expected; }))
      << stable_seen.load() << " of " << k_expected;
  EXPECT_GE(delivered.load(), k_expected);
  EXPECT_TRUE(eventually([&] { return sys.topics().subscribers("race") == k_stable; }))
      << "the stopped churners were removed";
}

}  // namespace
}  // namespace akt::test
