// actor_system lifecycle, spawning, names and lookup.

#include <gtest/gtest.h>

#include "actor/actor_test_support.hpp"

namespace akt::test {
namespace {

TEST(ActorSystem_Lifecycle, StartSpawnStop) {
  recorder::shared s;
  actor_system sys("lifecycle", {.workers = 2});
  EXPECT_FALSE(sys.running());
  ASSERT_TRUE(sys.start());
  EXPECT_TRUE(sys.running());
  EXPECT_TRUE(sys.start());  // idempotent
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  EXPECT_EQ(s.pre_starts.load(), 1);
  EXPECT_EQ(sys.stats().actors, 1u);
  ASSERT_TRUE(sys.stop());
  EXPECT_FALSE(sys.running());
  EXPECT_EQ(s.post_stops.load(), 1);
  EXPECT_EQ(sys.stats().actors, 0u);
  EXPECT_TRUE(sys.stop());  // idempotent
  EXPECT_EQ(sys.start().code(), errc::system_shutting_down);
}

TEST(ActorSystem_Spawn, RefusedBeforeStart) {
  recorder::shared s;
  actor_system sys("not-started", {.workers = 1});
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.code(), errc::system_not_started);
  EXPECT_EQ(s.pre_starts.load(), 0);
}

TEST(ActorSystem_Spawn, RefusedAfterStop) {
  recorder::shared s;
  actor_system sys("stopped", {.workers = 1});
  ASSERT_TRUE(sys.start());
  ASSERT_TRUE(sys.stop());
  EXPECT_EQ(sys.spawn<recorder>("r", &s).code(), errc::system_shutting_down);
}

TEST(ActorSystem_Names, InvalidNamesAreRefusedWithAReason) {
  recorder::shared s;
  actor_system sys("names", {.workers = 1});
  ASSERT_TRUE(sys.start());
  for (std::string bad : {std::string(""), std::string("-lead"), std::string("has space"),
                          std::string("slash/inside"), std::string(".dot"), std::string(256, 'a'),
                          std::string("tab\t")}) {
    auto p = sys.spawn<recorder>(bad, &s);
    ASSERT_FALSE(p) << "accepted '" << bad << "'";
    EXPECT_EQ(p.code(), errc::invalid_actor_name);
    EXPECT_FALSE(p.error().detail().empty());
  }
  for (std::string good :
       {std::string("a"), std::string("A-b_c.d9"), std::string(255, 'z'), std::string("0lead")}) {
    EXPECT_TRUE(sys.spawn<recorder>(good, &s)) << good;
  }
  EXPECT_EQ(s.pre_starts.load(), 4);
}

TEST(ActorSystem_Names, DuplicateNameIsRefusedAndTheFirstActorIsUntouched) {
  recorder::shared a;
  recorder::shared b;
  actor_system sys("dup", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto first = sys.spawn<recorder>("same", &a);
  ASSERT_TRUE(first);
  auto second = sys.spawn<recorder>("same", &b);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.code(), errc::actor_already_exists);
  EXPECT_EQ(b.pre_starts.load(), 0) << "pre_start of the refused actor must not run";
  ASSERT_FALSE(first->tell(add{5}));
  EXPECT_TRUE(eventually([&] { return a.total.load() == 5; }));
}

TEST(ActorSystem_Names, NameIsFreeAgainOnceStopped) {
  recorder::shared a;
  recorder::shared b;
  actor_system sys("reuse", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("worker", &a);
  ASSERT_TRUE(p);
  ASSERT_TRUE(sys.stop_actor(*p));
  EXPECT_FALSE(p->alive());
  EXPECT_EQ(sys.find("worker").code(), errc::actor_not_found);
  EXPECT_TRUE(sys.spawn<recorder>("worker", &b));
}

TEST(ActorSystem_Find, FindsLiveActorsByName) {
  recorder::shared s;
  actor_system sys("find", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("needle", &s);
  ASSERT_TRUE(p);
  auto found = sys.find("needle");
  ASSERT_TRUE(found);
  EXPECT_EQ(*found, *p);
  EXPECT_EQ(found->name(), "needle");
  EXPECT_EQ(found->path(), "akt://find/user/needle");
  auto missing = sys.find("haystack");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.code(), errc::actor_not_found);
}

TEST(ActorSystem_Spawn, ManyActorsWithDistinctNames) {
  recorder::shared s;
  actor_system sys("many", {.workers = 2});
  ASSERT_TRUE(sys.start());
  std::vector<pid> pids;
  for (int i = 0; i < 5000; ++i) {
    auto p = sys.spawn<recorder>("a" + std::to_string(i), &s);
    ASSERT_TRUE(p);
    pids.push_back(*p);
  }
  EXPECT_EQ(sys.stats().actors, 5000u);
  for (int i = 0; i < 5000; i += 7) {
    auto f = sys.find("a" + std::to_string(i));
    ASSERT_TRUE(f);
    EXPECT_EQ(*f, pids[i]);
  }
  for (auto& p : pids) ASSERT_FALSE(p.tell(add{1}));
  EXPECT_TRUE(eventually([&] { return s.count.load() == 5000; }));
  ASSERT_TRUE(sys.stop());
  EXPECT_EQ(s.post_stops.load(), 5000);
}

TEST(ActorSystem_Spawn, ConcurrentSpawnsOfOneNameYieldExactlyOneActor) {
  recorder::shared s;
  std::atomic<int> ok{0};
  std::atomic<int> exists{0};
  actor_system sys("race", {.workers = 2});
  ASSERT_TRUE(sys.start());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        auto p = sys.spawn<recorder>("n" + std::to_string(i), &s);
        if (p)
          ok.fetch_add(1);
        else if (p.code() == errc::actor_already_exists)
          exists.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 200);
  EXPECT_EQ(exists.load(), 600);
  EXPECT_EQ(s.pre_starts.load(), 200);
}

struct failing_start : akt::actor {
  explicit failing_start(std::atomic<int>* post_stops) : post_stops_(post_stops) {}
  akt::error pre_start(akt::actor_context&) override {
    return akt::error(errc::init_failure, "database unreachable");
  }
  void receive(akt::receive_context&) override {}
  void post_stop(akt::actor_context&) override { post_stops_->fetch_add(1); }
  std::atomic<int>* post_stops_;
};

struct throwing_start : akt::actor {
  akt::error pre_start(akt::actor_context&) override { throw std::runtime_error("no config"); }
  void receive(akt::receive_context&) override {}
};

struct throwing_constructor : akt::actor {
  throwing_constructor() { throw std::runtime_error("bad args"); }
  void receive(akt::receive_context&) override {}
};

TEST(ActorSystem_PreStart, FailureFailsTheSpawnAndFreesTheName) {
  std::atomic<int> post_stops{0};
  recorder::shared s;
  actor_system sys("prestart", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<failing_start>("x", &post_stops);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.code(), errc::init_failure);
  EXPECT_NE(p.error().message().find("database unreachable"), std::string::npos);
  EXPECT_EQ(post_stops.load(), 0) << "post_stop runs only for actors that started";
  EXPECT_EQ(sys.find("x").code(), errc::actor_not_found);
  EXPECT_TRUE(sys.spawn<recorder>("x", &s));
  EXPECT_EQ(sys.stats().actors, 1u);
}

TEST(ActorSystem_PreStart, ExceptionBecomesInitFailure) {
  actor_system sys("prestart-throw", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<throwing_start>("x");
  ASSERT_FALSE(p);
  EXPECT_EQ(p.code(), errc::init_failure);
  EXPECT_NE(p.error().message().find("no config"), std::string::npos);
  auto c = sys.spawn<throwing_constructor>("y");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.code(), errc::init_failure);
  EXPECT_NE(c.error().message().find("bad args"), std::string::npos);
  EXPECT_EQ(sys.find("y").code(), errc::actor_not_found);
}

TEST(ActorSystem_PostStop, RunsOnceWhenStopped) {
  recorder::shared s;
  actor_system sys("poststop", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  ASSERT_TRUE(sys.stop_actor(*p));
  EXPECT_EQ(s.post_stops.load(), 1);
  EXPECT_EQ(p->stop(), errc::ok);  // a pill to a dead actor is harmless
  ASSERT_TRUE(sys.stop());
  EXPECT_EQ(s.post_stops.load(), 1);
}

TEST(ActorSystem_Stats, CountsSpawnedAndLiveActors) {
  recorder::shared s;
  actor_system sys("stats", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto a = sys.spawn<recorder>("a", &s);
  auto b = sys.spawn<recorder>("b", &s);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(sys.stop_actor(*a));
  const auto st = sys.stats();
  EXPECT_EQ(st.spawned, 2u);
  EXPECT_EQ(st.actors, 1u);
}

TEST(ActorSystem_Workers, ConfiguredWorkerCount) {
  actor_system sys("workers", {.workers = 3});
  EXPECT_EQ(sys.worker_count(), 3u);
}

TEST(ActorSystem_Stop, ActorsStopAndTheirNamesAreReleased) {
  recorder::shared s;
  pid kept;
  {
    actor_system sys("scoped", {.workers = 2});
    ASSERT_TRUE(sys.start());
    auto p = sys.spawn<recorder>("r", &s);
    ASSERT_TRUE(p);
    kept = *p;
  }  // the destructor stops the system
  EXPECT_EQ(s.post_stops.load(), 1);
  EXPECT_FALSE(kept.alive());
  // The pid outlives its system: sending is refused, not a crash.
  EXPECT_EQ(kept.tell(add{1}), errc::system_shutting_down);
}

}  // namespace
}  // namespace akt::test
