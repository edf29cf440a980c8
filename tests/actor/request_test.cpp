// Requests from inside actors (non-blocking, continuation on the actor), forward, batches,
// pipe_to.

#include <gtest/gtest.h>

#include <akt/testkit/manual_time.hpp>

#include <algorithm>

#include "actor/actor_test_support.hpp"

namespace akt::test {
namespace {

struct go {
  pid target;
  long n;
  std::chrono::milliseconds timeout{std::chrono::seconds(5)};
  bool stash_others = false;
};
struct outcome {
  long value;
  errc code;
};

// Makes a request when told `go`, records the outcome of its continuation, and also counts
// other messages it processes (to check ordering around the continuation).
class requester : public akt::actor {
 public:
  struct shared {
    std::mutex mu;
    std::vector<std::string> events;
    std::atomic<int> done{0};
    std::atomic<std::thread::id> continuation_thread{};
    std::atomic<bool> concurrent{false};
  };
  explicit requester(shared* s) : s_(s) {}
  void receive(akt::receive_context& ctx) override {
    busy_guard guard(in_turn_, s_);
    if (auto* g = ctx.get_if<go>()) {
      ctx.request<long>(g->target, echo{g->n}, g->timeout,
                        [this](akt::receive_context&, akt::result<long> r) {
                          busy_guard inner(in_turn_, s_);
                          log(r ? "reply " + std::to_string(*r)
                                : std::string("error ") + std::string(to_string(r.code())));
                          s_->done.fetch_add(1);
                        },
                        {.stash_others = g->stash_others});
      log("sent");
    } else if (auto* n = ctx.get_if<int>()) {
      log("other " + std::to_string(*n));
    }
  }

 private:
  // Detects two overlapping handler runs on this actor.
  struct busy_guard {
    busy_guard(bool& flag, shared* s) : flag_(flag) {
      if (flag_) s->concurrent.store(true);
      was_ = flag_;
      flag_ = true;
    }
    ~busy_guard() { flag_ = was_; }
    bool& flag_;
    bool was_;
  };
  void log(std::string e) {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->events.push_back(std::move(e));
  }
  shared* s_;
  bool in_turn_ = false;
};

// Answers echo{n} with n + 1, but only when told answer_now: until then the request stays in
// flight while this actor is idle (unlike hold, which keeps a worker busy), so the system can
// become quiescent around it.
struct answer_now {};
class deferring_server : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    if (auto* e = ctx.get_if<echo>()) {
      pending_.emplace_back(ctx.defer_reply(), e->n + 1);
    } else if (ctx.is<answer_now>()) {
      for (auto& [h, v] : pending_) h.reply(v);
      pending_.clear();
    }
  }

 private:
  std::vector<std::pair<akt::reply_handle, long>> pending_;
};

TEST(Request_Reply, ContinuationRunsOnTheActorWithTheReply) {
  recorder::shared rs;
  requester::shared qs;
  actor_system sys("request", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto server = sys.spawn<recorder>("server", &rs);
  auto client = sys.spawn<requester>("client", &qs);
  ASSERT_TRUE(server && client);
  ASSERT_FALSE(client->tell(go{*server, 41}));
  ASSERT_TRUE(eventually([&] { return qs.done.load() == 1; }));
  std::lock_guard<std::mutex> lock(qs.mu);
  ASSERT_EQ(qs.events.size(), 2u);
  EXPECT_EQ(qs.events[0], "sent") << "request returns at once";
  EXPECT_EQ(qs.events[1], "reply 42");
  EXPECT_FALSE(qs.concurrent.load());
}

TEST(Request_Errors, TimeoutDeadAndUnhandledReachTheContinuation) {
  recorder::shared rs;
  requester::shared qs;
  actor_system sys("request-errors", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto server = sys.spawn<recorder>("server", &rs);
  auto client = sys.spawn<requester>("client", &qs);
  ASSERT_TRUE(server && client);
  // Timeout: the server is held.
  std::atomic<bool> release{false};
  ASSERT_FALSE(server->tell(hold{&release}));
  ASSERT_FALSE(client->tell(go{*server, 1, std::chrono::milliseconds(30)}));
  ASSERT_TRUE(eventually([&] { return qs.done.load() == 1; }));
  release.store(true);
  // Dead target.
  recorder::shared gone_s;
  auto gone = sys.spawn<recorder>("gone", &gone_s);
  ASSERT_TRUE(gone);
  ASSERT_TRUE(sys.stop_actor(*gone));
  ASSERT_FALSE(client->tell(go{*gone, 1}));
  ASSERT_TRUE(eventually([&] { return qs.done.load() == 2; }));
  // Empty pid.
  ASSERT_FALSE(client->tell(go{pid(), 1}));
  ASSERT_TRUE(eventually([&] { return qs.done.load() == 3; }));
  std::lock_guard<std::mutex> lock(qs.mu);
  std::vector<std::string> errors;
  for (const auto& e : qs.events) {
    if (e.rfind("error", 0) == 0) errors.push_back(e);
  }
  EXPECT_EQ(errors,
            (std::vector<std::string>{"error request_timeout", "error dead", "error empty_pid"}));
}

TEST(Request_Stash, OtherMessagesWaitUntilTheReply) {
  requester::shared qs;
  // Manual time: the request's timeout cannot run out, and testkit::settle waits until nothing
  // is ready or running.
  actor_system sys("request-stash", {.workers = 2, .manual_time = true});
  ASSERT_TRUE(sys.start());
  auto server = sys.spawn<deferring_server>("server");
  auto client = sys.spawn<requester>("client", &qs);
  ASSERT_TRUE(server && client);
  go g{*server, 9};
  g.stash_others = true;
  ASSERT_FALSE(client->tell(g));
  ASSERT_FALSE(client->tell(1));
  ASSERT_FALSE(client->tell(2));
  // Quiescent with the request in flight: whatever the client could run, it has run.
  ASSERT_TRUE(testkit::settle(sys));
  {
    std::lock_guard<std::mutex> lock(qs.mu);
    EXPECT_EQ(qs.events, (std::vector<std::string>{"sent"})) << "others ran before the reply";
  }
  ASSERT_FALSE(server->tell(answer_now{}));
  ASSERT_TRUE(testkit::settle(sys));
  std::lock_guard<std::mutex> lock(qs.mu);
  EXPECT_EQ(qs.events, (std::vector<std::string>{"sent", "reply 10", "other 1", "other 2"}));
  EXPECT_FALSE(qs.concurrent.load());
}

TEST(Request_Concurrency, OtherMessagesRunWhileARequestIsPending) {
  recorder::shared rs;
  requester::shared qs;
  actor_system sys("request-reentrant", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto server = sys.spawn<recorder>("server", &rs);
  auto client = sys.spawn<requester>("client", &qs);
  ASSERT_TRUE(server && client);
  std::atomic<bool> release{false};
  ASSERT_FALSE(server->tell(hold{&release}));
  ASSERT_FALSE(client->tell(go{*server, 1}));
  ASSERT_FALSE(client->tell(7));
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(qs.mu);
    return qs.events.size() == 2;
  }));
  release.store(true);
  ASSERT_TRUE(eventually([&] { return qs.done.load() == 1; }));
  std::lock_guard<std::mutex> lock(qs.mu);
  EXPECT_EQ(qs.events, (std::vector<std::string>{"sent", "other 7", "reply 2"}));
}

TEST(Request_Cancel, ACancelledRequestsContinuationNeverRuns) {
  recorder::shared rs;
  actor_system sys("request-cancel", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto server = sys.spawn<recorder>("server", &rs);
  ASSERT_TRUE(server);
  std::atomic<int> ran{0};
  std::atomic<int> cancelled{-1};
  struct canceller : akt::actor {
    pid server;
    std::atomic<int>* ran;
    std::atomic<int>* cancelled;
    canceller(pid s, std::atomic<int>* r, std::atomic<int>* c)
        : server(std::move(s)), ran(r), cancelled(c) {}
    void receive(akt::receive_context& ctx) override {
      auto h = ctx.request(
          server, echo{1}, std::chrono::seconds(5),
          [this](akt::receive_context&, akt::result<akt::message>) { ran->fetch_add(1); });
      cancelled->store(h.cancel() ? 1 : 0);
    }
  };
  auto c = sys.spawn<canceller>("c", *server, &ran, &cancelled);
  ASSERT_TRUE(c);
  ASSERT_FALSE(c->tell(1));
  ASSERT_TRUE(eventually([&] { return cancelled.load() != -1; }));
  EXPECT_EQ(cancelled.load(), 1);
  ASSERT_TRUE(server->ask<long>(echo{0}, std::chrono::seconds(5)));
  (void)c->ask(2, std::chrono::seconds(5));  // the late reply has been dropped by now
  EXPECT_EQ(ran.load(), 0);
}

TEST(Forward, TheAskerGetsTheReplyFromTheFinalActor) {
  recorder::shared rs;
  actor_system sys("forward", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto final_actor = sys.spawn<recorder>("final", &rs);
  ASSERT_TRUE(final_actor);
  struct relay_actor : akt::actor {
    pid to;
    explicit relay_actor(pid t) : to(std::move(t)) {}
    void receive(akt::receive_context& ctx) override { (void)ctx.forward(to); }
  };
  auto relay = sys.spawn<relay_actor>("relay", *final_actor);
  ASSERT_TRUE(relay);
  auto r = relay->ask<long>(echo{99}, std::chrono::seconds(5));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, 100);
}

TEST(Batch, TellBatchAndAskBatchKeepOrder) {
  recorder::shared rs;
  actor_system sys("batch", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("r", &rs);
  ASSERT_TRUE(p);
  std::vector<message> tells;
  for (long i = 0; i < 10; ++i) tells.emplace_back(add{i});
  ASSERT_FALSE(p->tell_batch(std::move(tells)));
  std::vector<message> asks;
  for (long i = 0; i < 5; ++i) asks.emplace_back(echo{i});
  auto replies = p->ask_batch(std::move(asks), std::chrono::seconds(5));
  ASSERT_EQ(replies.size(), 5u);
  for (long i = 0; i < 5; ++i) {
    ASSERT_TRUE(replies[i]) << replies[i].error().message();
    EXPECT_EQ(*replies[i]->get_if<long>(), i + 1);
  }
  std::lock_guard<std::mutex> lock(rs.mutex);
  EXPECT_EQ(rs.log, (std::vector<long>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

struct pipe_result {
  std::string text;
};

TEST(PipeTo, ResultFailureAndTimeoutAreDelivered) {
  struct sink : akt::actor {
    std::mutex* mu;
    std::vector<std::string>* got;
    sink(std::mutex* m, std::vector<std::string>* g) : mu(m), got(g) {}
    void receive(akt::receive_context& ctx) override {
      std::lock_guard<std::mutex> lock(*mu);
      if (auto* r = ctx.get_if<pipe_result>()) got->push_back(r->text);
      if (auto* f = ctx.get_if<status_failure>())
        got->push_back(std::string(to_string(f->reason.code())));
    }
  };
  std::mutex mu;
  std::vector<std::string> got;
  actor_system sys("pipe", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto dls = dead_letters(sys);
  auto s = sys.spawn<sink>("sink", &mu, &got);
  ASSERT_TRUE(s);
  ASSERT_FALSE(sys.pipe_to(*s, [] { return pipe_result{"computed"}; }));
  ASSERT_FALSE(sys.pipe_to(*s, []() -> result<pipe_result> { return errc::unhandled; }));
  ASSERT_FALSE(sys.pipe_to(*s, []() -> pipe_result { throw std::runtime_error("io"); }));
  // Late for sure: it returns only once the sink has handled its timeout (bounded, in case the
  // timeout never comes; the count below then fails).
  const auto timed_out = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return std::find(got.begin(), got.end(), "request_timeout") != got.end();
  };
  ASSERT_FALSE(sys.pipe_to(
      *s,
      [&] {
        (void)eventually(timed_out);
        return pipe_result{"late"};
      },
      std::chrono::milliseconds(20)));
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return got.size() == 4;
  }));
  {
    std::lock_guard<std::mutex> lock(mu);
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, (std::vector<std::string>{"computed", "handler_failed", "request_timeout",
                                             "unhandled"}));
  }
  EXPECT_GE(dls.wait_for(1), 1u) << "the late result is a dead letter";
  EXPECT_EQ(sys.pipe_to(pid(), [] { return 1; }), errc::empty_pid);
}

TEST(PipeTo, FromAnActorTheSenderIsTheActor) {
  std::atomic<int> ok{0};
  struct origin : akt::actor {
    std::atomic<int>* ok;
    explicit origin(std::atomic<int>* o) : ok(o) {}
    void receive(akt::receive_context& ctx) override {
      if (ctx.is<int>()) {
        (void)ctx.pipe_to(ctx.self(), [] { return std::string("done"); });
      } else if (ctx.is<std::string>() && ctx.sender() == ctx.self()) {
        ok->store(1);
      }
    }
  };
  actor_system sys("pipe-self", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto o = sys.spawn<origin>("o", &ok);
  ASSERT_TRUE(o);
  ASSERT_FALSE(o->tell(1));
  EXPECT_TRUE(eventually([&] { return ok.load() == 1; }));
}

// A request made while handling an ask inherits the ask's deadline when it is the earlier one:
// nobody waits for its answer once the asker gave up.
TEST(Request_Deadline, ARequestMadeWhileHandlingAnAskInheritsTheEarlierDeadline) {
  system_config cfg;
  cfg.manual_time = true;
  actor_system sys("nested-deadline", cfg);
  ASSERT_TRUE(sys.start());
  struct silent final : actor {
    std::vector<reply_handle> owed;  // answers nothing while the test runs
    void receive(receive_context& ctx) override { owed.push_back(ctx.defer_reply()); }
  };
  struct middle final : actor {
    pid to;
    std::atomic<int>* outcome;
    reply_handle owed;
    middle(pid t, std::atomic<int>* o) : to(std::move(t)), outcome(o) {}
    void receive(receive_context& ctx) override {
      if (!ctx.is<long>()) return;
      owed = ctx.defer_reply();  // the asker's answer is not the point here
      ctx.request(to, 1L, std::chrono::hours(1),
                  [o = outcome](receive_context&, result<message> r) {
                    o->store(r ? 1 : static_cast<int>(r.code()));
                  });
    }
  };
  auto s = sys.spawn<silent>("silent");
  ASSERT_TRUE(s);
  std::atomic<int> outcome{0};
  auto m = sys.spawn<middle>("middle", *s, &outcome);
  ASSERT_TRUE(m);
  // The outside ask gives the message a 50 ms deadline (virtual time); it times out in real time.
  std::thread asker([&] { (void)m->ask(1L, std::chrono::milliseconds(50)); });
  asker.join();
  ASSERT_TRUE(testkit::settle(sys));
  EXPECT_EQ(outcome.load(), 0) << "nothing expired before the clock moved";
  ASSERT_TRUE(testkit::advance(sys, std::chrono::milliseconds(50)));
  EXPECT_EQ(outcome.load(), static_cast<int>(errc::request_timeout))
      << "the request kept its own hour instead of the ask's 50 ms";
}
}  // namespace
}  // namespace akt::test
