// Tell and ask: ordering, replies, deadlines, refusals.

#include <gtest/gtest.h>

#include "actor/actor_test_support.hpp"

namespace akt::test {
namespace {

TEST(Tell_Ordering, MessagesFromOneSenderArriveInOrder) {
  recorder::shared s;
  actor_system sys("order", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  for (long i = 0; i < 20000; ++i) ASSERT_FALSE(p->tell(add{i}));
  ASSERT_TRUE(eventually([&] { return s.count.load() == 20000; }));
  std::lock_guard<std::mutex> lock(s.mutex);
  for (long i = 0; i < 20000; ++i) ASSERT_EQ(s.log[i], i);
}

TEST(Tell_Ordering, PerSenderOrderHoldsWithManySenders) {
  recorder::shared s;
  actor_system sys("order-many", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  constexpr int k_senders = 4;
  constexpr long k_each = 5000;
  std::vector<std::thread> senders;
  for (int t = 0; t < k_senders; ++t) {
    senders.emplace_back([&, t] {
      for (long i = 0; i < k_each; ++i) (void)p->tell(add{t * 1000000 + i});
    });
  }
  for (auto& th : senders) th.join();
  ASSERT_TRUE(eventually([&] { return s.count.load() == k_senders * k_each; }));
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<long> next(k_senders, 0);
  for (long v : s.log) {
    const int t = static_cast<int>(v / 1000000);
    ASSERT_EQ(v % 1000000, next[t]) << "sender " << t << " out of order";
    ++next[t];
  }
}

TEST(Tell_Handler, RunsOnAWorkerNeverConcurrently) {
  // recorder's log is guarded, but count and total are checked against each other: with
  // concurrent turns the per-message "count then total" pairs would interleave. TSan checks the
  // unguarded fields of this actor.
  struct plain_counter : akt::actor {
    long count = 0;  // deliberately not atomic: the runtime must serialise receive
    std::atomic<long>* out;
    explicit plain_counter(std::atomic<long>* o) : out(o) {}
    void receive(akt::receive_context&) override { out->store(++count); }
  };
  std::atomic<long> seen{0};
  actor_system sys("serial", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<plain_counter>("c", &seen);
  ASSERT_TRUE(p);
  std::vector<std::thread> senders;
  for (int t = 0; t < 4; ++t) {
    senders.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) (void)p->tell(1);
    });
  }
  for (auto& th : senders) th.join();
  EXPECT_TRUE(eventually([&] { return seen.load() == 20000; }));
}

TEST(Tell_Refusal, EmptyPidIsRefused) {
  pid nobody;
  EXPECT_EQ(nobody.tell(add{1}), errc::empty_pid);
  EXPECT_EQ(nobody.ask(add{1}, std::chrono::seconds(1)).code(), errc::empty_pid);
  EXPECT_EQ(nobody.name(), "");
  EXPECT_FALSE(nobody.alive());
}

TEST(Ask_Reply, TypedReply) {
  recorder::shared s;
  actor_system sys("ask", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  auto r = p->ask<long>(echo{41}, std::chrono::seconds(5));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, 42);
  auto untyped = p->ask(echo{1}, std::chrono::seconds(5));
  ASSERT_TRUE(untyped);
  ASSERT_NE(untyped->get_if<long>(), nullptr);
  EXPECT_EQ(*untyped->get_if<long>(), 2);
}

TEST(Ask_Reply, WrongReplyTypeIsReported) {
  recorder::shared s;
  actor_system sys("ask-type", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  auto r = p->ask<std::string>(echo{1}, std::chrono::seconds(5));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::unexpected_reply);
  EXPECT_NE(r.error().message().find("long"), std::string::npos);
}

TEST(Ask_Reply, HandlerThatDoesNotReplyGivesNoReply) {
  recorder::shared s;
  actor_system sys("ask-noreply", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  auto r = p->ask(add{3}, std::chrono::seconds(5));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::no_reply);
  EXPECT_EQ(s.total.load(), 3);
}

TEST(Ask_Reply, UnhandledMessageGivesUnhandledAndADeadLetter) {
  recorder::shared s;
  actor_system sys("ask-unhandled", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto dls = dead_letters(sys);
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  auto r = p->ask(std::string("what?"), std::chrono::seconds(5));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::unhandled);
  ASSERT_EQ(dls.wait_for(1), 1u);
  EXPECT_EQ(dls.items()[0].reason, errc::unhandled);
  EXPECT_EQ(dls.items()[0].receiver, "r");
}

TEST(Ask_Refusal, InvalidTimeout) {
  recorder::shared s;
  actor_system sys("ask-timeout-arg", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  auto dls = dead_letters(sys);
  EXPECT_EQ(p->ask(echo{1}, std::chrono::seconds(0)).code(), errc::invalid_timeout);
  EXPECT_EQ(p->ask(echo{1}, -std::chrono::seconds(1)).code(), errc::invalid_timeout);
  EXPECT_EQ(dls.wait_for(2), 2u) << "refused asks are published as dead letters";
}

TEST(Ask_Timeout, SlowHandlerTimesOut) {
  std::atomic<bool> release{false};
  actor_system sys("ask-slow", {.workers = 1});
  ASSERT_TRUE(sys.start());
  // The first ask's handler waits until the test has seen the ask time out, then replies late.
  struct slow : akt::actor {
    std::atomic<bool>* release;
    explicit slow(std::atomic<bool>* r) : release(r) {}
    void receive(akt::receive_context& ctx) override {
      while (!release->load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
      ctx.reply(1L);
    }
  };
  auto p = sys.spawn<slow>("s", &release);
  ASSERT_TRUE(p);
  auto r = p->ask(echo{1}, std::chrono::milliseconds(20));
  release.store(true);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::request_timeout);
  // The late reply does not disturb the next ask from this thread (its slot was abandoned).
  auto r2 = p->ask<long>(echo{1}, std::chrono::seconds(5));
  ASSERT_TRUE(r2) << r2.error().message();
  EXPECT_EQ(*r2, 1);
}

TEST(Ask_Deadline, AnAskThatExpiredInTheMailboxIsSkipped) {
  recorder::shared s;
  std::atomic<bool> release{false};
  actor_system sys("ask-expired", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto dls = dead_letters(sys);
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(hold{&release}));  // occupy the actor
  auto r = p->ask(add{7}, std::chrono::milliseconds(20));
  EXPECT_EQ(r.code(), errc::request_timeout);
  release.store(true);
  ASSERT_FALSE(p->tell(add{1}));
  ASSERT_TRUE(eventually([&] { return s.count.load() == 2; }));  // the hold and add{1}
  EXPECT_EQ(s.total.load(), 1) << "the expired ask reached the handler";
  ASSERT_GE(dls.wait_for(1), 1u);
  EXPECT_EQ(dls.items()[0].reason, errc::request_timeout);
  EXPECT_EQ(dls.items()[0].value, 7);
}

TEST(Ask_Deadline, HandlerSeesTheDeadline) {
  std::atomic<int> seen{0};
  actor_system sys("ask-deadline", {.workers = 1});
  ASSERT_TRUE(sys.start());
  struct deadline_reader : akt::actor {
    void receive(akt::receive_context& ctx) override {
      auto d = ctx.deadline();
      ctx.reply(d ? std::chrono::duration_cast<std::chrono::milliseconds>(
                        *d - std::chrono::steady_clock::now())
                        .count()
                  : -1L);
    }
  };
  auto p = sys.spawn<deadline_reader>("d");
  ASSERT_TRUE(p);
  auto r = p->ask<long>(1, std::chrono::seconds(10));
  ASSERT_TRUE(r);
  EXPECT_GT(*r, 5000);
  EXPECT_LE(*r, 10000);
  // A tell carries no deadline.
  struct tell_checker : akt::actor {
    std::atomic<int>* out;
    explicit tell_checker(std::atomic<int>* o) : out(o) {}
    void receive(akt::receive_context& ctx) override {
      out->store(ctx.deadline().has_value() ? 1 : 2);
    }
  };
  auto t = sys.spawn<tell_checker>("t", &seen);
  ASSERT_TRUE(t);
  ASSERT_FALSE(t->tell(1));
  ASSERT_TRUE(eventually([&] { return seen.load() != 0; }));
  EXPECT_EQ(seen.load(), 2);
}

TEST(Ask_FromWorker, BlockingAskOnAWorkerIsRefused) {
  recorder::shared s;
  std::atomic<int> code{-1};
  actor_system sys("ask-worker", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto target = sys.spawn<recorder>("target", &s);
  ASSERT_TRUE(target);
  struct asker : akt::actor {
    pid target;
    std::atomic<int>* out;
    asker(pid t, std::atomic<int>* o) : target(std::move(t)), out(o) {}
    void receive(akt::receive_context&) override {
      auto r = target.ask(echo{1}, std::chrono::seconds(5));
      out->store(static_cast<int>(r.code()));
    }
  };
  auto a = sys.spawn<asker>("asker", *target, &code);
  ASSERT_TRUE(a);
  ASSERT_FALSE(a->tell(1));
  ASSERT_TRUE(eventually([&] { return code.load() != -1; }));
  EXPECT_EQ(code.load(), static_cast<int>(errc::blocking_on_worker));
}

TEST(Respond, ReplyGoesToTheSendingActor) {
  recorder::shared s;
  std::atomic<long> got{0};
  actor_system sys("respond", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto echoer = sys.spawn<recorder>("echoer", &s);
  ASSERT_TRUE(echoer);
  // The client sends echo{n} as itself; the recorder's respond goes back to it as a long.
  struct client : akt::actor {
    pid server;
    std::atomic<long>* got;
    client(pid sv, std::atomic<long>* g) : server(std::move(sv)), got(g) {}
    void receive(akt::receive_context& ctx) override {
      if (auto* n = ctx.get_if<int>()) {
        (void)ctx.tell(server, echo{*n});
      } else if (auto* v = ctx.get_if<long>()) {
        EXPECT_EQ(ctx.sender(), server);
        got->store(*v);
      }
    }
  };
  auto c = sys.spawn<client>("client", *echoer, &got);
  ASSERT_TRUE(c);
  ASSERT_FALSE(c->tell(99));
  EXPECT_TRUE(eventually([&] { return got.load() == 100; }));
}

TEST(Respond, ReplyWithNobodyToReplyToIsADeadLetter) {
  recorder::shared s;
  actor_system sys("respond-none", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto dls = dead_letters(sys);
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(echo{5}));  // a tell from outside: the reply has no recipient
  ASSERT_EQ(dls.wait_for(1), 1u);
  EXPECT_EQ(dls.items()[0].reason, errc::empty_pid);
  EXPECT_EQ(dls.items()[0].value, 6);
}

TEST(Respond, SecondReplyToAnAskIsADeadLetter) {
  actor_system sys("respond-twice", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto dls = dead_letters(sys);
  struct twice : akt::actor {
    void receive(akt::receive_context& ctx) override {
      ctx.reply(1L);
      ctx.reply(2L);
    }
  };
  auto p = sys.spawn<twice>("t");
  ASSERT_TRUE(p);
  auto r = p->ask<long>(0, std::chrono::seconds(5));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, 1);
  ASSERT_EQ(dls.wait_for(1), 1u);
  EXPECT_EQ(dls.items()[0].value, 2);
}

TEST(Respond, RespondErrorReachesTheAsker) {
  actor_system sys("respond-error", {.workers = 1});
  ASSERT_TRUE(sys.start());
  struct refuser : akt::actor {
    void receive(akt::receive_context& ctx) override {
      ctx.reply_error(akt::error(errc::unhandled, "not today"));
    }
  };
  auto p = sys.spawn<refuser>("r");
  ASSERT_TRUE(p);
  auto r = p->ask(1, std::chrono::seconds(5));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::unhandled);
  EXPECT_EQ(r.error().detail(), "not today");
}

TEST(Message, MoveOnlyAndLargePayloadsTravel) {
  std::atomic<long> sum{0};
  actor_system sys("payloads", {.workers = 1});
  ASSERT_TRUE(sys.start());
  struct big {
    char bytes[512];
  };
  struct taker : akt::actor {
    std::atomic<long>* out;
    explicit taker(std::atomic<long>* o) : out(o) {}
    void receive(akt::receive_context& ctx) override {
      if (auto* u = ctx.get_if<std::unique_ptr<long>>()) out->fetch_add(**u);
      if (auto* b = ctx.get_if<big>()) out->fetch_add(b->bytes[511]);
    }
  };
  auto p = sys.spawn<taker>("t", &sum);
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(std::make_unique<long>(40)));
  big b{};
  b.bytes[511] = 2;
  ASSERT_FALSE(p->tell(b));
  EXPECT_TRUE(eventually([&] { return sum.load() == 42; }));
}

TEST(Stop, PoisonPillOvertakesQueuedMessagesWhichBecomeDeadLetters) {
  recorder::shared s;
  std::atomic<bool> release{false};
  actor_system sys("pill", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto dls = dead_letters(sys);
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(hold{&release}));
  ASSERT_TRUE(eventually([&] { return s.held.load(); }));
  for (long i = 0; i < 100; ++i) ASSERT_FALSE(p->tell(add{i}));
  ASSERT_FALSE(p->stop());
  release.store(true);
  ASSERT_TRUE(eventually([&] { return !p->alive() && s.post_stops.load() == 1; }));
  EXPECT_EQ(s.count.load(), 1) << "queued messages ran after the pill";
  EXPECT_EQ(dls.wait_for(100), 100u);
  for (const auto& d : dls.items()) EXPECT_EQ(d.reason, errc::dead);
}

TEST(Stop, TellToAStoppedActorIsDeadAndADeadLetter) {
  recorder::shared s;
  actor_system sys("dead", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto dls = dead_letters(sys);
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  ASSERT_TRUE(sys.stop_actor(*p));
  EXPECT_EQ(p->tell(add{9}), errc::dead);
  EXPECT_EQ(p->ask(echo{1}, std::chrono::seconds(1)).code(), errc::dead);
  ASSERT_EQ(dls.wait_for(2), 2u);
  EXPECT_EQ(dls.items()[0].reason, errc::dead);
  EXPECT_EQ(dls.items()[0].value, 9);
  EXPECT_EQ(dls.items()[0].receiver, "r");
}

TEST(Stop, StopSelfFromTheHandler) {
  actor_system sys("stop-self", {.workers = 1});
  ASSERT_TRUE(sys.start());
  struct quitter : akt::actor {
    void receive(akt::receive_context& ctx) override { ctx.stop_self(); }
  };
  auto p = sys.spawn<quitter>("q");
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(1));
  EXPECT_TRUE(eventually([&] { return !p->alive(); }));
  // alive() turns false as the stop begins; the name is released a moment later.
  EXPECT_TRUE(eventually([&] { return sys.find("q").code() == errc::actor_not_found; }));
}

}  // namespace
}  // namespace akt::test

namespace akt::test {
namespace {

TEST(Envelope_Lifetime, PayloadIsReleasedAsSoonAsItWasHandled) {
  // The handled envelope stays in the mailbox as its sentinel until the next message; what it
  // carried must not stay alive with it.
  std::atomic<int> handled{0};
  actor_system sys("release", {.workers = 1});
  ASSERT_TRUE(sys.start());
  struct holder_actor : akt::actor {
    std::atomic<int>* handled;
    explicit holder_actor(std::atomic<int>* h) : handled(h) {}
    void receive(akt::receive_context&) override { handled->fetch_add(1); }
  };
  auto p = sys.spawn<holder_actor>("h", &handled);
  ASSERT_TRUE(p);
  auto token = std::make_shared<int>(7);
  ASSERT_FALSE(p->tell(token));
  ASSERT_TRUE(eventually([&] { return handled.load() == 1; }));
  EXPECT_TRUE(eventually([&] { return token.use_count() == 1; }))
      << "the idle actor still holds its last payload";
}

}  // namespace
}  // namespace akt::test
