// Routers (every strategy, broadcast, the pool's supervision and shrinking, refusals) and the
// deferred replies (receive_context::defer_reply) that scatter-gather and tail-chopping use.

#include <gtest/gtest.h>

#include <future>
#include <map>
#include <memory>
#include <set>

#include <akt/testkit/manual_time.hpp>

#include "actor/actor_test_support.hpp"

namespace akt::test {
namespace {

struct work {
  long n;
};
struct who {};  // answered with the routee's name
struct keyed {
  std::string key;
};
// Answered with the routee's name, at once or later (see worker::shared::mode).
struct query {};
// Answers the queries a worker deferred, with its name.
struct answer_now {};
struct crash {};
struct move_only {
  std::unique_ptr<int> p;
};

// A routee: records what it handled, per routee name, in state shared with the test.
class worker : public akt::actor {
 public:
  enum mode : int { answer, defer, unhandled_query };
  struct shared {
    std::mutex mu;
    std::map<std::string, std::vector<long>> work;      // routee -> work values, in order
    std::map<std::string, std::set<std::string>> keys;  // key -> routees that got it
    std::map<std::string, int> pre_starts;              // routee -> pre_start calls
    std::vector<std::string> queried;                   // routees, in the order queried
    std::atomic<int> handled{0};
    std::atomic<int> queries{0};
    std::atomic<int> mode{answer};  // how a query is answered
  };
  explicit worker(shared* s) : s_(s) {}

  akt::error pre_start(akt::actor_context& ctx) override {
    name_ = std::string(ctx.name());
    std::lock_guard<std::mutex> lock(s_->mu);
    ++s_->pre_starts[name_];
    return {};
  }

  void receive(akt::receive_context& ctx) override {
    if (auto* w = ctx.get_if<work>()) {
      {
        std::lock_guard<std::mutex> lock(s_->mu);
        s_->work[name_].push_back(w->n);
      }
      s_->handled.fetch_add(1);
    } else if (ctx.is<who>()) {
      ctx.reply(name_);
    } else if (auto* k = ctx.get_if<keyed>()) {
      {
        std::lock_guard<std::mutex> lock(s_->mu);
        s_->keys[k->key].insert(name_);
      }
      s_->handled.fetch_add(1);
    } else if (ctx.is<query>()) {
      {
        std::lock_guard<std::mutex> lock(s_->mu);
        s_->queried.push_back(name_);
      }
      s_->queries.fetch_add(1);
      switch (s_->mode.load()) {
        case answer:
          ctx.reply(name_);
          break;
        case defer:
          pending_.push_back(ctx.defer_reply());
          break;
        default:
          ctx.unhandled();
      }
    } else if (ctx.is<answer_now>()) {
      for (auto& h : pending_) h.reply(name_);
      pending_.clear();
    } else if (ctx.is<crash>()) {
      throw std::runtime_error("routee crash");
    } else {
      ctx.unhandled();
    }
  }

 private:
  shared* s_;
  std::string name_;
  std::vector<akt::reply_handle> pending_;
};

router_options with(routing strategy, std::size_t pool) {
  router_options o;
  o.strategy = strategy;
  o.pool_size = pool;
  return o;
}

std::vector<pid> routees_of(const pid& router) {
  auto r = router.ask<std::vector<pid>>(get_routees{}, std::chrono::seconds(5));
  return r ? *r : std::vector<pid>{};
}

// Tells `target` answer_now (the routee named `name` among the router's routees).
void answer(const pid& router, std::string_view name) {
  for (const pid& p : routees_of(router)) {
    if (p.name() == name) (void)p.tell(answer_now{});
  }
}

TEST(Router_Options, InvalidOptionsAreRefused) {
  worker::shared s;
  actor_system sys("router-options", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto empty = spawn_router<worker>(sys, "empty", with(routing::round_robin, 0), &s);
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code(), errc::invalid_argument);
  auto no_key = spawn_router<worker>(sys, "no-key", with(routing::consistent_hash, 2), &s);
  ASSERT_FALSE(no_key);
  EXPECT_EQ(no_key.error().code(), errc::invalid_argument);
  auto no_nodes = with(routing::consistent_hash, 2);
  no_nodes.key = [](const message&) { return std::string("k"); };
  no_nodes.virtual_nodes = 0;
  EXPECT_EQ(spawn_router<worker>(sys, "no-nodes", no_nodes, &s).error().code(),
            errc::invalid_argument);
  auto no_time = with(routing::scatter_gather_first, 2);
  no_time.within = std::chrono::nanoseconds::zero();
  EXPECT_EQ(spawn_router<worker>(sys, "no-time", no_time, &s).error().code(),
            errc::invalid_argument);
  auto no_interval = with(routing::tail_chopping, 2);
  no_interval.interval = std::chrono::milliseconds(-1);
  EXPECT_EQ(spawn_router<worker>(sys, "no-interval", no_interval, &s).error().code(),
            errc::invalid_argument);
  // Nothing was spawned for them.
  EXPECT_FALSE(sys.find("empty"));
  EXPECT_FALSE(sys.find("no-key"));
  EXPECT_EQ(sys.stats().actors, 0u);
  // The spawn's own errors.
  ASSERT_TRUE(spawn_router<worker>(sys, "pool", with(routing::round_robin, 1), &s));
  EXPECT_EQ(spawn_router<worker>(sys, "pool", with(routing::round_robin, 1), &s).error().code(),
            errc::actor_already_exists);
}

class fails_to_build : public akt::actor {
 public:
  explicit fails_to_build(int n) {
    if (n < 0) throw std::runtime_error("no");
  }
  void receive(akt::receive_context& ctx) override { ctx.unhandled(); }
};

TEST(Router_Options, ARouteeThatCannotStartFailsTheRouter) {
  actor_system sys("router-init", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto r = spawn_router<fails_to_build>(sys, "pool", with(routing::round_robin, 3), -1);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::init_failure);
  EXPECT_FALSE(sys.find("pool"));
  EXPECT_TRUE(eventually([&] { return sys.stats().actors == 0; }));
}

TEST(Router_Routees, GetRouteesListsThePoolAsChildren) {
  worker::shared s;
  actor_system sys("router-routees", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto router = spawn_router<worker>(sys, "pool", with(routing::round_robin, 3), &s);
  ASSERT_TRUE(router) << router.error().message();
  std::vector<pid> routees = routees_of(*router);
  ASSERT_EQ(routees.size(), 3u);
  for (std::size_t i = 0; i < routees.size(); ++i) {
    EXPECT_EQ(routees[i].name(), "routee-" + std::to_string(i));
    auto found = sys.find("pool/routee-" + std::to_string(i));
    ASSERT_TRUE(found);
    EXPECT_EQ(*found, routees[i]);
  }
  // Stopping the router stops its routees.
  ASSERT_TRUE(sys.stop_actor(*router));
  EXPECT_TRUE(eventually([&] { return sys.stats().actors == 0; }));
  for (const pid& p : routees) EXPECT_FALSE(p.alive());
}

TEST(Router_RoundRobin, CyclesThroughTheRouteesExactly) {
  worker::shared s;
  actor_system sys("router-rr", {.workers = 4});
  ASSERT_TRUE(sys.start());
  auto router = spawn_router<worker>(sys, "pool", with(routing::round_robin, 3), &s);
  ASSERT_TRUE(router);
  for (long i = 0; i < 30; ++i) ASSERT_FALSE(router->tell(work{i}));
  ASSERT_TRUE(eventually([&] { return s.handled.load() == 30; }));
  std::lock_guard<std::mutex> lock(s.mu);
  ASSERT_EQ(s.work.size(), 3u);
  for (long r = 0; r < 3; ++r) {
    std::vector<long> expected;
    for (long i = r; i < 30; i += 3) expected.push_back(i);
    EXPECT_EQ(s.work["routee-" + std::to_string(r)], expected) << "routee-" << r;
  }
}

TEST(Router_RoundRobin, AnAskIsAnsweredByARoutee) {
  worker::shared s;
  actor_system sys("router-ask", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto router = spawn_router<worker>(sys, "pool", with(routing::round_robin, 2), &s);
  ASSERT_TRUE(router);
  std::vector<std::string> answers;
  for (int i = 0; i < 4; ++i) {
    auto r = router->ask<std::string>(who{}, std::chrono::seconds(5));
    ASSERT_TRUE(r) << r.error().message();
    answers.push_back(*r);
  }
  EXPECT_EQ(answers, (std::vector<std::string>{"routee-0", "routee-1", "routee-0", "routee-1"}));
}

struct ask_via {
  pid router;
};

// Tells the router `who` with itself as the sender and records the replies and their senders.
class client : public akt::actor {
 public:
  struct shared {
    std::mutex mu;
    std::vector<std::string> replies;  // "<reply> from <sender>"
    std::atomic<int> count{0};
  };
  explicit client(shared* s) : s_(s) {}
  void receive(akt::receive_context& ctx) override {
    if (auto* a = ctx.get_if<ask_via>()) {
      (void)ctx.tell(a->router, who{});
    } else if (auto* r = ctx.get_if<std::string>()) {
      std::lock_guard<std::mutex> lock(s_->mu);
      s_->replies.push_back(*r + " from " + std::string(ctx.sender().name()));
      s_->count.fetch_add(1);
    }
  }

 private:
  shared* s_;
};

TEST(Router_RoundRobin, TheOriginalSenderGoesWithTheMessage) {
  worker::shared s;
  client::shared cs;
  actor_system sys("router-sender", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto router = spawn_router<worker>(sys, "pool", with(routing::round_robin, 2), &s);
  auto c = sys.spawn<client>("client", &cs);
  ASSERT_TRUE(router && c);
  ASSERT_FALSE(c->tell(ask_via{*router}));
  ASSERT_FALSE(c->tell(ask_via{*router}));
  ASSERT_TRUE(eventually([&] { return cs.count.load() == 2; }));
  std::lock_guard<std::mutex> lock(cs.mu);
  // The routees answered the client directly (the reply's sender is the routee, not the router).
  EXPECT_EQ(std::set<std::string>(cs.replies.begin(), cs.replies.end()),
            (std::set<std::string>{"routee-0 from routee-0", "routee-1 from routee-1"}));
}

TEST(Router_Random, ReachesEveryRouteeOverManyMessages) {
  worker::shared s;
  actor_system sys("router-random", {.workers = 4});
  ASSERT_TRUE(sys.start());
  auto router = spawn_router<worker>(sys, "pool", with(routing::random, 4), &s);
  ASSERT_TRUE(router);
  constexpr long n = 400;  // a routee missed by all: 4 * (3/4)^400, never
  for (long i = 0; i < n; ++i) ASSERT_FALSE(router->tell(work{i}));
  ASSERT_TRUE(eventually([&] { return s.handled.load() == n; }));
  std::lock_guard<std::mutex> lock(s.mu);
  ASSERT_EQ(s.work.size(), 4u);
  std::size_t total = 0;
  for (auto& [name, values] : s.work) {
    EXPECT_FALSE(values.empty()) << name;
    total += values.size();
  }
  EXPECT_EQ(total, static_cast<std::size_t>(n));
}

router_options hashed(std::size_t pool) {
  router_options o = with(routing::consistent_hash, pool);
  o.key = [](const message& m) {
    const keyed* k = m.get_if<keyed>();
    return k != nullptr ? k->key : std::string();
  };
  return o;
}

TEST(Router_ConsistentHash, OneKeyOneRouteeAndKeysSpread) {
  worker::shared s;
  actor_system sys("router-hash", {.workers = 4});
  ASSERT_TRUE(sys.start());
  auto router = spawn_router<worker>(sys, "pool", hashed(4), &s);
  ASSERT_TRUE(router);
  constexpr int keys = 64;
  for (int round = 0; round < 3; ++round) {
    for (int k = 0; k < keys; ++k) ASSERT_FALSE(router->tell(keyed{"user-" + std::to_string(k)}));
  }
  ASSERT_TRUE(eventually([&] { return s.handled.load() == 3 * keys; }));
  std::map<std::string, std::string> owner;  // key -> routee
  std::map<std::string, int> per_routee;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    ASSERT_EQ(s.keys.size(), static_cast<std::size_t>(keys));
    for (auto& [key, routees] : s.keys) {
      EXPECT_EQ(routees.size(), 1u) << key << " went to more than one routee";
      owner[key] = *routees.begin();
      ++per_routee[*routees.begin()];
    }
  }
  // The ring is deterministic (routee names and keys are fixed): every routee owns some keys.
  EXPECT_EQ(per_routee.size(), 4u);

  // A routee leaves: only its keys move.
  const std::vector<pid> routees = routees_of(*router);
  ASSERT_EQ(routees.size(), 4u);
  ASSERT_TRUE(sys.stop_actor(routees[0]));
  ASSERT_TRUE(eventually([&] { return routees_of(*router).size() == 3; }));
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.keys.clear();
  }
  for (int k = 0; k < keys; ++k) ASSERT_FALSE(router->tell(keyed{"user-" + std::to_string(k)}));
  ASSERT_TRUE(eventually([&] { return s.handled.load() == 4 * keys; }));
  std::lock_guard<std::mutex> lock(s.mu);
  for (auto& [key, routees_now] : s.keys) {
    ASSERT_EQ(routees_now.size(), 1u);
    const std::string& now = *routees_now.begin();
    EXPECT_NE(now, "routee-0");
    if (owner[key] != "routee-0") {
      EXPECT_EQ(now, owner[key]) << key << " moved";
    }
  }
}

TEST(Router_ConsistentHash, AKeyThatThrowsIsRefused) {
  worker::shared s;
  actor_system sys("router-hash-throw", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto o = with(routing::consistent_hash, 2);
  o.key = [](const message& m) -> std::string {
    if (m.is<keyed>()) return m.get_if<keyed>()->key;
    throw std::runtime_error("no key");
  };
  auto router = spawn_router<worker>(sys, "pool", o, &s);
  ASSERT_TRUE(router);
  auto r = router->ask<std::string>(who{}, std::chrono::seconds(5));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::handler_failed);
  // The router is still there.
  ASSERT_FALSE(router->tell(keyed{"a"}));
  EXPECT_TRUE(eventually([&] { return s.handled.load() == 1; }));
}

TEST(Router_Broadcast, ABroadcastReachesEveryRouteeWhateverTheStrategy) {
  worker::shared s;
  actor_system sys("router-bcast", {.workers = 4});
  ASSERT_TRUE(sys.start());
  auto rr = spawn_router<worker>(sys, "rr", with(routing::round_robin, 3), &s);
  ASSERT_TRUE(rr);
  ASSERT_FALSE(rr->tell(broadcast{work{7}}));
  ASSERT_TRUE(eventually([&] { return s.handled.load() == 3; }));
  {
    std::lock_guard<std::mutex> lock(s.mu);
    ASSERT_EQ(s.work.size(), 3u);
    for (auto& [name, values] : s.work) EXPECT_EQ(values, std::vector<long>{7}) << name;
  }
  // The round-robin cycle is not disturbed by the broadcast.
  ASSERT_FALSE(rr->tell(work{1}));
  ASSERT_TRUE(eventually([&] { return s.handled.load() == 4; }));
  std::lock_guard<std::mutex> lock(s.mu);
  EXPECT_EQ(s.work["routee-0"], (std::vector<long>{7, 1}));
}

TEST(Router_Broadcast, TheBroadcastStrategySendsEverythingToAll) {
  worker::shared s;
  actor_system sys("router-bcast-all", {.workers = 4});
  ASSERT_TRUE(sys.start());
  auto router = spawn_router<worker>(sys, "pool", with(routing::broadcast, 3), &s);
  ASSERT_TRUE(router);
  for (long i = 0; i < 5; ++i) ASSERT_FALSE(router->tell(work{i}));
  ASSERT_TRUE(eventually([&] { return s.handled.load() == 15; }));
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (auto& [name, values] : s.work) {
      EXPECT_EQ(values, (std::vector<long>{0, 1, 2, 3, 4})) << name;
    }
  }
  // An ask is answered once, by one of them.
  auto r = router->ask<std::string>(who{}, std::chrono::seconds(5));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->rfind("routee-", 0), 0u);
}

TEST(Router_Broadcast, ANonCopyableMessageIsRefused) {
  worker::shared s;
  actor_system sys("router-bcast-move", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto dls = dead_letters(sys);
  auto router = spawn_router<worker>(sys, "pool", with(routing::broadcast, 2), &s);
  ASSERT_TRUE(router);
  auto r = router->ask(move_only{std::make_unique<int>(1)}, std::chrono::seconds(5));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::invalid_argument);
  ASSERT_FALSE(router->tell(broadcast{move_only{std::make_unique<int>(2)}}));
  ASSERT_EQ(dls.wait_for(2), 2u);
  for (const auto& d : dls.items()) {
    EXPECT_EQ(d.reason, errc::invalid_argument);
    EXPECT_EQ(d.receiver, "pool");
    EXPECT_NE(d.type.find("move_only"), std::string::npos) << d.type;
  }
}

TEST(Router_ScatterGather, TheFirstReplyWinsAndLaterOnesAreDropped) {
  worker::shared s;
  s.mode.store(worker::defer);
  actor_system sys("router-scatter", {.workers = 4});
  ASSERT_TRUE(sys.start());
  auto dls = dead_letters(sys);
  auto o = with(routing::scatter_gather_first, 3);
  o.within = std::chrono::seconds(20);
  auto router = spawn_router<worker>(sys, "pool", o, &s);
  ASSERT_TRUE(router);
  auto asked = std::async(std::launch::async, [&] {
    return router->ask<std::string>(query{}, std::chrono::seconds(20));
  });
  // Every routee got the query; none has answered.
  ASSERT_TRUE(eventually([&] { return s.queries.load() == 3; }));
  answer(*router, "routee-2");
  ASSERT_EQ(asked.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto r = asked.get();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, "routee-2");
  // The others answer late: the router drops their replies (no dead letters either).
  answer(*router, "routee-0");
  answer(*router, "routee-1");
  s.mode.store(worker::answer);
  // A query afterwards gets a fresh answer (the router processed the late replies first).
  auto again = router->ask<std::string>(query{}, std::chrono::seconds(10));
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_EQ(dls.size(), 0u);
}

TEST(Router_ScatterGather, NoReplyInTimeIsARequestTimeout) {
  worker::shared s;
  s.mode.store(worker::defer);
  actor_system sys("router-scatter-timeout", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto o = with(routing::scatter_gather_first, 3);
  o.within = std::chrono::milliseconds(100);
  auto router = spawn_router<worker>(sys, "pool", o, &s);
  ASSERT_TRUE(router);
  auto r = router->ask<std::string>(query{}, std::chrono::seconds(20));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::request_timeout);
  EXPECT_EQ(s.queries.load(), 3);
}

TEST(Router_ScatterGather, AllFailingGivesTheLastError) {
  worker::shared s;
  s.mode.store(worker::unhandled_query);
  actor_system sys("router-scatter-fail", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto router = spawn_router<worker>(sys, "pool", with(routing::scatter_gather_first, 3), &s);
  ASSERT_TRUE(router);
  auto r = router->ask<std::string>(query{}, std::chrono::seconds(10));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::unhandled);
}

TEST(Router_ScatterGather, ASenderActorGetsTheReplyByTell) {
  worker::shared s;
  client::shared cs;
  actor_system sys("router-scatter-tell", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto router = spawn_router<worker>(sys, "pool", with(routing::scatter_gather_first, 2), &s);
  auto c = sys.spawn<client>("client", &cs);
  ASSERT_TRUE(router && c);
  ASSERT_FALSE(c->tell(ask_via{*router}));
  ASSERT_TRUE(eventually([&] { return cs.count.load() == 1; }));
  std::lock_guard<std::mutex> lock(cs.mu);
  ASSERT_EQ(cs.replies.size(), 1u);
  // Answered by one routee, delivered by the router.
  EXPECT_EQ(cs.replies[0].rfind("routee-", 0), 0u);
  EXPECT_NE(cs.replies[0].find(" from pool"), std::string::npos) << cs.replies[0];
}

TEST(Router_TailChopping, AsksTheNextRouteeEachIntervalUntilAReply) {
  worker::shared s;
  s.mode.store(worker::defer);
  actor_system sys("router-tail", {.workers = 4});
  ASSERT_TRUE(sys.start());
  auto o = with(routing::tail_chopping, 3);
  o.within = std::chrono::seconds(20);
  o.interval = std::chrono::milliseconds(20);
  auto router = spawn_router<worker>(sys, "pool", o, &s);
  ASSERT_TRUE(router);
  auto asked = std::async(std::launch::async, [&] {
    return router->ask<std::string>(query{}, std::chrono::seconds(20));
  });
  // Nobody answers, so each interval brings one more routee in, all three in the end, each
  // once.
  ASSERT_TRUE(eventually([&] { return s.queries.load() == 3; }));
  std::vector<std::string> order;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    order = s.queried;
  }
  ASSERT_EQ(std::set<std::string>(order.begin(), order.end()).size(), 3u);
  // The second one asked answers first: its reply wins.
  answer(*router, order[1]);
  ASSERT_EQ(asked.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto r = asked.get();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, order[1]);
  answer(*router, order[0]);
  answer(*router, order[2]);
  EXPECT_EQ(s.queries.load(), 3);
}

TEST(Router_TailChopping, StopsAtTheFirstReply) {
  worker::shared s;
  s.mode.store(worker::defer);
  // The interval runs on the virtual clock: no routee is asked for a timer until the test moves
  // the clock, however slowly the reply below comes back.
  actor_system sys("router-tail-stop", {.workers = 2, .manual_time = true});
  ASSERT_TRUE(sys.start());
  auto o = with(routing::tail_chopping, 3);
  o.within = std::chrono::seconds(20);
  o.interval = std::chrono::milliseconds(500);
  auto router = spawn_router<worker>(sys, "pool", o, &s);
  ASSERT_TRUE(router);
  auto asked = std::async(std::launch::async, [&] {
    return router->ask<std::string>(query{}, std::chrono::seconds(20));
  });
  ASSERT_TRUE(eventually([&] { return s.queries.load() == 1; }));
  std::string first;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    first = s.queried[0];
  }
  answer(*router, first);
  ASSERT_EQ(asked.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto r = asked.get();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, first);
  // Two intervals later (and every tick they brought handled), still nobody else was asked.
  ASSERT_TRUE(testkit::advance(sys, std::chrono::milliseconds(1000)));
  EXPECT_EQ(s.queries.load(), 1);
}

TEST(Router_TailChopping, AFailureAsksTheNextAtOnceAndAllFailingFails) {
  worker::shared s;
  s.mode.store(worker::unhandled_query);
  actor_system sys("router-tail-fail", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto o = with(routing::tail_chopping, 3);
  o.within = std::chrono::seconds(20);
  o.interval = std::chrono::seconds(10);  // longer than the test: only failures move it on
  auto router = spawn_router<worker>(sys, "pool", o, &s);
  ASSERT_TRUE(router);
  auto r = router->ask<std::string>(query{}, std::chrono::seconds(15));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::unhandled);
  EXPECT_EQ(s.queries.load(), 3);
}

TEST(Router_TailChopping, NoReplyWithinIsARequestTimeout) {
  worker::shared s;
  s.mode.store(worker::defer);
  actor_system sys("router-tail-timeout", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto o = with(routing::tail_chopping, 3);
  o.within = std::chrono::milliseconds(150);
  o.interval = std::chrono::milliseconds(20);
  auto router = spawn_router<worker>(sys, "pool", o, &s);
  ASSERT_TRUE(router);
  auto r = router->ask<std::string>(query{}, std::chrono::seconds(20));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::request_timeout);
  EXPECT_GE(s.queries.load(), 1);
}

TEST(Router_Supervision, AFailingRouteeIsRestartedAndStaysInThePool) {
  worker::shared s;
  actor_system sys("router-restart", {.workers = 2});
  ASSERT_TRUE(sys.start());
  collector<actor_restarted, std::string> restarts(
      sys, [](const actor_restarted& e) { return std::string(e.actor.name()); });
  auto router = spawn_router<worker>(sys, "pool", with(routing::round_robin, 2), &s);
  ASSERT_TRUE(router);
  const std::vector<pid> before = routees_of(*router);
  ASSERT_FALSE(router->tell(crash{}));  // routee-0 fails
  ASSERT_EQ(restarts.wait_for(1), 1u);
  EXPECT_EQ(restarts.items()[0], "routee-0");
  {
    std::lock_guard<std::mutex> lock(s.mu);
    EXPECT_EQ(s.pre_starts["routee-0"], 2);
    EXPECT_EQ(s.pre_starts["routee-1"], 1);
  }
  EXPECT_EQ(routees_of(*router), before);
  // The cycle goes on: routee-1, then the restarted routee-0.
  auto a = router->ask<std::string>(who{}, std::chrono::seconds(5));
  auto b = router->ask<std::string>(who{}, std::chrono::seconds(5));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, "routee-1");
  EXPECT_EQ(*b, "routee-0");
}

TEST(Router_Supervision, ARouteeSupervisorCanStopAFailingRoutee) {
  worker::shared s;
  actor_system sys("router-sup-stop", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto o = with(routing::round_robin, 2);
  o.routee_supervisor = supervisor().otherwise(directive::stop);
  auto router = spawn_router<worker>(sys, "pool", o, &s);
  ASSERT_TRUE(router);
  ASSERT_FALSE(router->tell(crash{}));
  ASSERT_TRUE(eventually([&] { return routees_of(*router).size() == 1; }));
  for (int i = 0; i < 3; ++i) {
    auto r = router->ask<std::string>(who{}, std::chrono::seconds(5));
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, "routee-1");
  }
}

TEST(Router_Pool, AStoppedRouteeLeavesThePool) {
  worker::shared s;
  actor_system sys("router-leave", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto router = spawn_router<worker>(sys, "pool", with(routing::round_robin, 3), &s);
  ASSERT_TRUE(router);
  std::vector<pid> routees = routees_of(*router);
  ASSERT_EQ(routees.size(), 3u);
  ASSERT_TRUE(sys.stop_actor(routees[1]));
  ASSERT_TRUE(eventually([&] { return routees_of(*router).size() == 2; }));
  std::vector<pid> left = routees_of(*router);
  EXPECT_EQ(left, (std::vector<pid>{routees[0], routees[2]}));
  std::set<std::string> answered;
  for (int i = 0; i < 4; ++i) {
    auto r = router->ask<std::string>(who{}, std::chrono::seconds(5));
    ASSERT_TRUE(r) << r.error().message();
    answered.insert(*r);
  }
  EXPECT_EQ(answered, (std::set<std::string>{"routee-0", "routee-2"}));
}

TEST(Router_Pool, AnEmptyPoolAnswersDead) {
  worker::shared s;
  actor_system sys("router-empty", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto dls = dead_letters(sys);
  for (routing strategy : {routing::round_robin, routing::random, routing::broadcast,
                           routing::scatter_gather_first, routing::tail_chopping}) {
    const std::string name = "pool-" + std::string(to_string(strategy));
    auto router = spawn_router<worker>(sys, name, with(strategy, 1), &s);
    ASSERT_TRUE(router) << name;
    std::vector<pid> routees = routees_of(*router);
    ASSERT_EQ(routees.size(), 1u);
    ASSERT_TRUE(sys.stop_actor(routees[0]));
    ASSERT_TRUE(eventually([&] { return routees_of(*router).empty(); }));
    auto r = router->ask<std::string>(who{}, std::chrono::seconds(5));
    ASSERT_FALSE(r) << name;
    EXPECT_EQ(r.error().code(), errc::dead) << name;
    EXPECT_TRUE(router->alive()) << name;
  }
  auto router = spawn_router<worker>(sys, "pool", hashed(1), &s);
  ASSERT_TRUE(router);
  ASSERT_TRUE(sys.stop_actor(routees_of(*router)[0]));
  ASSERT_TRUE(eventually([&] { return routees_of(*router).empty(); }));
  const std::size_t before = dls.size();
  ASSERT_FALSE(router->tell(keyed{"k"}));
  ASSERT_EQ(dls.wait_for(before + 1), before + 1);
  EXPECT_EQ(dls.items().back().reason, errc::dead);
  EXPECT_EQ(dls.items().back().receiver, "pool");
}

// ---- deferred replies ----

struct take {};  // defers the reply
struct give {
  long v;
};                // answers every deferred reply with v
struct drop {};   // drops the deferred replies unanswered
struct again {};  // responds through ctx after deferring
struct kick {
  pid to;
};

// Defers the reply to `take` (counting them in *taken) until told give or drop.
class deferrer : public akt::actor {
 public:
  explicit deferrer(std::atomic<int>* taken) : taken_(taken) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<take>()) {
      const bool asked = ctx.expects_reply();
      pending_.push_back(ctx.defer_reply());
      EXPECT_FALSE(ctx.expects_reply());
      EXPECT_EQ(pending_.back().expects_reply(), asked);
      taken_->fetch_add(1);
    } else if (auto* g = ctx.get_if<give>()) {
      for (auto& h : pending_) h.reply(g->v);
      pending_.clear();
    } else if (ctx.is<drop>()) {
      pending_.clear();
    } else if (ctx.is<again>()) {
      akt::reply_handle h = ctx.defer_reply();
      ctx.reply(1L);  // the reply was taken away: a dead letter for an ask
      h.reply(2L);
      h.reply(3L);  // a second reply: a dead letter
    } else {
      ctx.unhandled();
    }
  }

 private:
  std::atomic<int>* taken_;
  std::vector<akt::reply_handle> pending_;
};

TEST(ReplyHandle_Defer, AnAskIsAnsweredLater) {
  std::atomic<int> taken{0};
  actor_system sys("defer-later", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto d = sys.spawn<deferrer>("d", &taken);
  ASSERT_TRUE(d);
  auto asked = std::async(std::launch::async,
                          [&] { return d->ask<long>(take{}, std::chrono::seconds(20)); });
  ASSERT_TRUE(eventually([&] { return taken.load() == 1; }));
  EXPECT_EQ(asked.wait_for(std::chrono::milliseconds(20)), std::future_status::timeout)
      << "no reply until give";
  ASSERT_FALSE(d->tell(give{42}));
  ASSERT_EQ(asked.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto r = asked.get();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, 42);
}

TEST(ReplyHandle_Defer, ADroppedHandleAnswersNoReply) {
  std::atomic<int> taken{0};
  actor_system sys("defer-drop", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto d = sys.spawn<deferrer>("d", &taken);
  ASSERT_TRUE(d);
  auto asked = std::async(std::launch::async,
                          [&] { return d->ask<long>(take{}, std::chrono::seconds(20)); });
  ASSERT_TRUE(eventually([&] { return taken.load() == 1; }));
  ASSERT_FALSE(d->tell(drop{}));
  ASSERT_EQ(asked.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto r = asked.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::no_reply);
}

TEST(ReplyHandle_Defer, ExtraAndLateRepliesAreDeadLetters) {
  std::atomic<int> taken{0};
  actor_system sys("defer-extra", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto dls = dead_letters(sys);
  auto d = sys.spawn<deferrer>("d", &taken);
  ASSERT_TRUE(d);
  auto r = d->ask<long>(again{}, std::chrono::seconds(5));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, 2);
  ASSERT_EQ(dls.wait_for(2), 2u);
  // The asker gives up before the deferred reply comes (the deferrer takes the ask well before
  // its deadline: it is idle).
  auto late = std::async(std::launch::async,
                         [&] { return d->ask<long>(take{}, std::chrono::milliseconds(500)); });
  ASSERT_TRUE(eventually([&] { return taken.load() == 1; }));
  ASSERT_EQ(late.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto r2 = late.get();
  ASSERT_FALSE(r2);
  EXPECT_EQ(r2.error().code(), errc::request_timeout);
  ASSERT_FALSE(d->tell(give{9}));
  ASSERT_EQ(dls.wait_for(3), 3u);
  std::vector<long> values;
  for (const auto& dl : dls.items()) {
    EXPECT_EQ(dl.reason, errc::request_timeout);
    values.push_back(dl.value);
  }
  EXPECT_EQ(values, (std::vector<long>{1, 3, 9}));
}

// Tells `take` then `give` to a deferrer with itself as the sender, and records the reply.
class taker : public akt::actor {
 public:
  explicit taker(std::atomic<long>* got) : got_(got) {}
  void receive(akt::receive_context& ctx) override {
    if (auto* k = ctx.get_if<kick>()) {
      (void)ctx.tell(k->to, take{});
      (void)ctx.tell(k->to, give{5});
    } else if (auto* v = ctx.get_if<long>()) {
      got_->store(*v);
    }
  }

 private:
  std::atomic<long>* got_;
};

TEST(ReplyHandle_Defer, ASenderActorGetsTheReplyByTell) {
  std::atomic<int> taken{0};
  std::atomic<long> got{0};
  actor_system sys("defer-tell", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto d = sys.spawn<deferrer>("d", &taken);
  auto t = sys.spawn<taker>("t", &got);
  ASSERT_TRUE(d && t);
  ASSERT_FALSE(t->tell(kick{*d}));
  ASSERT_TRUE(eventually([&] { return got.load() == 5; }));
}

}  // namespace
}  // namespace akt::test
