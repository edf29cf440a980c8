// Concurrency stress of the whole path: many producers, many actors, actor-to-actor traffic,
// actors stopping while messages are in flight. Bounded in time; every message accounted for.

#include <gtest/gtest.h>

#include "actor/actor_test_support.hpp"

namespace akt::test {
namespace {

// Forwards every long it receives to the next actor in a ring until the hop count runs out.
struct relay : akt::actor {
  std::vector<pid>* ring;
  std::size_t index;
  std::atomic<long>* finished;
  relay(std::vector<pid>* r, std::size_t i, std::atomic<long>* f)
      : ring(r), index(i), finished(f) {}
  void receive(akt::receive_context& ctx) override {
    if (auto* hops = ctx.get_if<long>()) {
      if (*hops == 0) {
        finished->fetch_add(1);
        return;
      }
      (void)ctx.tell((*ring)[(index + 1) % ring->size()], *hops - 1);
    }
  }
};

TEST(Stress_Relay, TokensCircleARingOfActors) {
  std::atomic<long> finished{0};
  actor_system sys("ring", {.workers = 2});
  ASSERT_TRUE(sys.start());
  std::vector<pid> ring;
  constexpr int k_actors = 32;
  // Spawn all first, then fill the ring vector before any message flows.
  std::vector<pid> spawned;
  ring.reserve(k_actors);
  for (int i = 0; i < k_actors; ++i) {
    auto p = sys.spawn<relay>("relay" + std::to_string(i), &ring, i, &finished);
    ASSERT_TRUE(p);
    ring.push_back(*p);
  }
  constexpr long k_tokens = 200;
  constexpr long k_hops = 500;
  for (long t = 0; t < k_tokens; ++t) ASSERT_FALSE(ring[t % k_actors].tell(k_hops));
  EXPECT_TRUE(eventually([&] { return finished.load() == k_tokens; }, std::chrono::seconds(60)));
}

TEST(Stress_Stop, StoppingActorsUnderLoadLosesNothing) {
  std::atomic<long> handled{0};
  std::atomic<long> dead{0};
  std::atomic<long> accepted{0};
  std::atomic<long> refused{0};
  struct count_actor : akt::actor {
    std::atomic<long>* handled;
    explicit count_actor(std::atomic<long>* h) : handled(h) {}
    void receive(akt::receive_context&) override { handled->fetch_add(1); }
  };
  actor_system sys("stop-load", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto sub = sys.events().subscribe<dead_letter>([&](const dead_letter&) { dead.fetch_add(1); });
  std::vector<pid> actors;
  for (int i = 0; i < 16; ++i) {
    auto p = sys.spawn<count_actor>("c" + std::to_string(i), &handled);
    ASSERT_TRUE(p);
    actors.push_back(*p);
  }
  std::vector<std::thread> producers;
  for (int t = 0; t < 3; ++t) {
    producers.emplace_back([&, t] {
      for (long i = 0; i < 20000; ++i) {
        if (actors[(t * 7 + i) % actors.size()].tell(i))
          refused.fetch_add(1);
        else
          accepted.fetch_add(1);
      }
    });
  }
  // Stop half of the actors while the producers run.
  for (int i = 0; i < 16; i += 2) {
    (void)actors[i].stop();
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  for (auto& th : producers) th.join();
  for (int i = 0; i < 16; i += 2) ASSERT_TRUE(sys.stop_actor(actors[i]));
  ASSERT_TRUE(
      eventually([&] { return handled.load() + dead.load() == accepted.load() + refused.load(); }));
  EXPECT_EQ(accepted.load() + refused.load(), 60000);
}

TEST(Stress_Ask, ConcurrentAskersEachGetTheirOwnReply) {
  recorder::shared s;
  std::atomic<int> wrong{0};
  actor_system sys("askers", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  std::vector<std::thread> askers;
  for (int t = 0; t < 4; ++t) {
    askers.emplace_back([&, t] {
      for (long i = 0; i < 2000; ++i) {
        const long n = t * 100000 + i;
        auto r = p->ask<long>(echo{n}, std::chrono::seconds(10));
        if (!r || *r != n + 1) wrong.fetch_add(1);
      }
    });
  }
  for (auto& th : askers) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Stress_Ask, TimeoutsAndLateRepliesUnderLoad) {
  // Asks with tiny timeouts against a busy actor: each one either returns the right reply or
  // request_timeout; late replies never reach a later ask of the same thread.
  std::atomic<int> wrong{0};
  std::atomic<int> timeouts{0};
  actor_system sys("ask-timeouts", {.workers = 2});
  ASSERT_TRUE(sys.start());
  struct jittery : akt::actor {
    long n = 0;
    void receive(akt::receive_context& ctx) override {
      if (auto* e = ctx.get_if<echo>()) {
        if (++n % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
        ctx.reply(e->n + 1);
      }
    }
  };
  auto p = sys.spawn<jittery>("j");
  ASSERT_TRUE(p);
  std::vector<std::thread> askers;
  for (int t = 0; t < 3; ++t) {
    askers.emplace_back([&, t] {
      for (long i = 0; i < 300; ++i) {
        const long n = t * 100000 + i;
        auto r = p->ask<long>(echo{n}, std::chrono::microseconds(200 + (i % 5) * 100));
        if (r) {
          if (*r != n + 1) wrong.fetch_add(1);
        } else if (r.code() == errc::request_timeout) {
          timeouts.fetch_add(1);
        } else {
          wrong.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : askers) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace akt::test
