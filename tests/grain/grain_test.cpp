// Grains on one node: one test (or a few) per rule of shared/reference/goakt-grains.md that
// applies to a single node. Test names follow the rule they check.

#include <gtest/gtest.h>
#include <akt/akt.hpp>

#include <akt/testkit/manual_time.hpp>

#include "support/test_support.hpp"

#include <atomic>
#include <barrier>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using akt::errc;
using akt::grain_identity;

using akt::test::eventually;

// What the test grains report, shared through the kind's dependencies (grains are
// default-constructed by the framework, so this is how a test observes them).
struct probe {
  std::atomic<int> activations{0};
  std::atomic<int> deactivations{0};
  std::atomic<int> in_receive{0};
  std::atomic<int> overlaps{0};  // on_receive entered while another ran
  std::atomic<int> deactivate_in_receive{0};
  std::atomic<int> fail_activations{0};  // this many on_activate calls fail first
  std::atomic<bool> throw_on_activate{false};
  std::atomic<bool> fail_deactivate{false};
  std::atomic<bool> release{false};  // hold{} waits for it
  std::atomic<int> holding{0};
  std::atomic<bool> hold_activation{false};  // on_activate waits for release_activation
  std::atomic<bool> release_activation{false};
  std::atomic<int> in_activate{0};  // on_activate calls that reached the hold
  // With hold_deactivate, on_deactivate raises deactivating and waits for release_deactivate:
  // a test sends while the activation is deactivating.
  std::atomic<bool> hold_deactivate{false};
  std::atomic<bool> deactivating{false};
  std::atomic<bool> release_deactivate{false};
  std::mutex mutex;
  std::vector<long> seen;  // values of add{}, in handling order
};

struct add {
  long n;
};
struct get {};
struct hold {};
struct boom {};
struct fail_with {
  akt::errc code;
};
struct stranger {};
struct deadline_probe {
  std::chrono::milliseconds work;
};
struct ack_nothing {};

std::shared_ptr<probe> probe_of(akt::grain_props& props) {
  return props.dependency<probe>("probe");
}

// The workhorse grain: a running total, and hooks into the probe.
struct counter final : akt::grain {
  std::shared_ptr<probe> p;
  long total = 0;

  akt::error on_activate(akt::grain_props& props) override {
    p = probe_of(props);
    if (!p) return akt::error(errc::invalid_argument, "no probe dependency");
    p->activations++;
    if (p->hold_activation.load()) {
      p->in_activate++;
      while (!p->release_activation.load()) std::this_thread::sleep_for(100us);
    }
    if (p->throw_on_activate.load()) throw std::runtime_error("activation exploded");
    if (p->fail_activations.load() > 0) {
      p->fail_activations--;
      return akt::error(errc::init_failure, "storage unavailable");
    }
    return {};
  }
  akt::error on_deactivate(akt::grain_props&) override {
    if (p->in_receive.load() != 0) p->deactivate_in_receive++;
    p->deactivations++;
    if (p->hold_deactivate.load()) {
      p->deactivating = true;
      // A gate, not a delay: bounded so that a broken test cannot hang the suite.
      (void)eventually([&] { return p->release_deactivate.load(); });
    }
    if (p->fail_deactivate.load()) return akt::error(errc::handler_failed, "could not save");
    return {};
  }
  void on_receive(akt::grain_context& ctx) override {
    if (p->in_receive.fetch_add(1) != 0) p->overlaps++;
    struct leave {
      probe* p;
      ~leave() { p->in_receive--; }
    } guard{p.get()};
    if (auto* a = ctx.get_if<add>()) {
      total += a->n;
      {
        std::lock_guard<std::mutex> lock(p->mutex);
        p->seen.push_back(a->n);
      }
      ctx.ack();
    } else if (ctx.is<get>()) {
      ctx.reply(total);
    } else if (ctx.is<hold>()) {
      p->holding++;
      while (!p->release.load()) std::this_thread::sleep_for(100us);
      ctx.ack();
    } else if (ctx.is<boom>()) {
      throw std::runtime_error("kaboom in the handler");
    } else if (auto* f = ctx.get_if<fail_with>()) {
      ctx.reply_error(akt::error(f->code, "told to fail"));
    } else if (auto* d = ctx.get_if<deadline_probe>()) {
      auto dl = ctx.deadline();
      std::this_thread::sleep_for(d->work);
      ctx.reply(std::string(dl ? "deadline" : "none") + (ctx.cancelled() ? ",cancelled" : ""));
    } else if (ctx.is<ack_nothing>()) {
      // returns without answering
    } else {
      ctx.unhandled();
    }
  }
};

// A system on a manual clock (akt::testkit::advance) with the threaded dispatcher.
akt::system_config manual_time() {
  akt::system_config cfg;
  cfg.manual_time = true;
  return cfg;
}

struct fixture {
  std::shared_ptr<probe> p = std::make_shared<probe>();
  akt::actor_system sys;
  explicit fixture(const char* name, akt::grain_options opts = {}, akt::system_config cfg = {})
      : sys(name, cfg) {
    EXPECT_TRUE(sys.start());
    auto deps = std::make_shared<akt::grain_dependencies>();
    deps->add("probe", p);
    opts.dependencies = deps;
    EXPECT_FALSE(akt::with_grain_default_options<counter>(sys, opts));
  }
  grain_identity id(std::string name) {
    return {std::string(akt::detail::grain_kind_name<counter>()), std::move(name)};
  }
  // Whether the shutdown has begun for grains: a send is then refused before anything else is
  // looked at. The name is invalid, so before the shutdown the send is refused too (for its
  // name) and activates nothing.
  bool grain_shutdown_began() {
    return akt::tell_grain(sys, id("not a valid name!"), add{0}, {.one_way = true}).code() ==
           errc::system_shutting_down;
  }
};

template <class E>
struct collected {
  std::mutex mutex;
  std::vector<E> items;
  akt::subscription sub;
  explicit collected(akt::actor_system& sys)
      : sub(sys.events().subscribe<E>([this](const E& e) {
          std::lock_guard<std::mutex> lock(mutex);
          items.push_back(e);
        })) {}
  std::size_t size() {
    std::lock_guard<std::mutex> lock(mutex);
    return items.size();
  }
};

// Dead letters are not copyable (they own the message): keep what the tests look at.
struct dead_letter_seen {
  errc code;
  bool was_fail_with;
  std::string receiver_name;
  std::string receiver_path;
};
struct dead_letters {
  std::mutex mutex;
  std::vector<dead_letter_seen> items;
  akt::subscription sub;
  explicit dead_letters(akt::actor_system& sys)
      : sub(sys.events().subscribe<akt::dead_letter>([this](const akt::dead_letter& d) {
          std::lock_guard<std::mutex> lock(mutex);
          items.push_back({d.reason.code(), d.msg.is<fail_with>(), std::string(d.receiver.name()),
                           d.receiver.path()});
        })) {}
  std::size_t size() {
    std::lock_guard<std::mutex> lock(mutex);
    return items.size();
  }
};

// ---- the grain interface, identity ----

TEST(Grain_Interface, FirstMessageActivatesAndOnReceiveHandlesIt) {
  fixture f("g-first");
  const auto id = f.id("a");
  EXPECT_EQ(f.p->activations.load(), 0) << "nothing is activated before a message";
  ASSERT_FALSE(akt::tell_grain(f.sys, id, add{5}));
  EXPECT_EQ(f.p->activations.load(), 1);
  auto t = akt::ask_grain<long>(f.sys, id, get{}, 5s);
  ASSERT_TRUE(t) << t.error().message();
  EXPECT_EQ(*t, 5);
}

TEST(Grain_Identity, GrainOfDerivesTheKindFromTheTypeAndActivates) {
  fixture f("g-of");
  auto id = akt::activate_grain<counter>(f.sys, "user-123");
  ASSERT_TRUE(id) << id.error().message();
  EXPECT_EQ(id->kind, akt::detail::grain_kind_name<counter>());
  EXPECT_EQ(id->name, "user-123");
  EXPECT_EQ(id->str(), id->kind + "/user-123");
  EXPECT_EQ(f.p->activations.load(), 1) << "activate_grain activates the grain";
}

TEST(Grain_Identity, GrainOfOnAnActiveGrainActivatesNothing) {
  fixture f("g-of-active");
  ASSERT_TRUE(akt::activate_grain<counter>(f.sys, "x"));
  ASSERT_TRUE(akt::activate_grain<counter>(f.sys, "x"));
  ASSERT_FALSE(akt::tell_grain(f.sys, f.id("x"), add{1}));
  EXPECT_EQ(f.p->activations.load(), 1);
  EXPECT_EQ(akt::grain_activation_count(f.sys), 1u);
}

TEST(Grain_Identity, TheNameTellsGrainsOfOneKindApart) {
  fixture f("g-names");
  ASSERT_FALSE(akt::tell_grain(f.sys, f.id("one"), add{1}));
  ASSERT_FALSE(akt::tell_grain(f.sys, f.id("two"), add{10}));
  EXPECT_EQ(*akt::ask_grain<long>(f.sys, f.id("one"), get{}, 5s), 1);
  EXPECT_EQ(*akt::ask_grain<long>(f.sys, f.id("two"), get{}, 5s), 10);
  EXPECT_EQ(f.p->activations.load(), 2);
  EXPECT_EQ(akt::active_grains(f.sys).size(), 2u);
}

TEST(Grain_Identity, InvalidNamesAreRefused) {
  fixture f("g-bad-names");
  for (const char* bad : {"", "-lead", "has space", "slash/inside"}) {
    auto r = akt::activate_grain<counter>(f.sys, bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), errc::invalid_actor_name) << bad;
    EXPECT_EQ(akt::tell_grain(f.sys, f.id(bad), add{1}).code(), errc::invalid_actor_name);
  }
  EXPECT_EQ(f.p->activations.load(), 0);
}

TEST(Grain_Identity, AnUnknownKindIsRefused) {
  fixture f("g-unknown-kind");
  grain_identity id{"no-such-kind", "a"};
  EXPECT_EQ(akt::tell_grain(f.sys, id, add{1}).code(), errc::grain_kind_unknown);
  EXPECT_EQ(akt::ask_grain(f.sys, id, get{}, 1s).error().code(), errc::grain_kind_unknown);
}

TEST(Grain_Identity, AKindRegisteredByTypeCanBeReachedByABareSend) {
  akt::actor_system sys("g-register");
  ASSERT_TRUE(sys.start());
  struct plain final : akt::grain {
    void on_receive(akt::grain_context& ctx) override { ctx.reply(std::string("hi")); }
  };
  ASSERT_FALSE(akt::register_grain_kind<plain>(sys));
  grain_identity id{std::string(akt::detail::grain_kind_name<plain>()), "p"};
  auto r = akt::ask_grain<std::string>(sys, id, get{}, 5s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, "hi");
}

// ---- the grain context ----

TEST(GrainContext, SelfIsTheIdentity) {
  akt::actor_system sys("g-self");
  ASSERT_TRUE(sys.start());
  struct who final : akt::grain {
    void on_receive(akt::grain_context& ctx) override { ctx.reply(ctx.self().str()); }
  };
  auto id = akt::activate_grain<who>(sys, "me");
  ASSERT_TRUE(id);
  EXPECT_EQ(*akt::ask_grain<std::string>(sys, *id, get{}, 5s), id->str());
}

TEST(GrainContext, ErrReachesTheAskerAndTheAcknowledgedTeller) {
  fixture f("g-err");
  const auto id = f.id("e");
  auto r = akt::ask_grain(f.sys, id, fail_with{errc::invalid_argument}, 5s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::invalid_argument);
  EXPECT_EQ(akt::tell_grain(f.sys, id, fail_with{errc::actor_not_found}).code(),
            errc::actor_not_found);
}

TEST(GrainContext, UnhandledGivesUnhandledToTheCaller) {
  fixture f("g-unhandled");
  collected<akt::unhandled_message> unhandled(f.sys);
  auto r = akt::ask_grain(f.sys, f.id("u"), stranger{}, 5s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::unhandled);
  EXPECT_EQ(akt::tell_grain(f.sys, f.id("u"), stranger{}).code(), errc::unhandled);
  EXPECT_TRUE(eventually([&] { return unhandled.size() == 2; }));
}

TEST(GrainContext, ReturningWithoutAnsweringIsNoReplyAtOnce) {
  fixture f("g-noreply");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(akt::tell_grain(f.sys, f.id("n"), ack_nothing{}).code(), errc::no_reply);
  EXPECT_EQ(akt::ask_grain(f.sys, f.id("n"), ack_nothing{}, 5s).error().code(), errc::no_reply);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s) << "no waiting for the timeout";
}

TEST(GrainContext, TellActorReachesAnActor) {
  fixture f("g-tell-actor");
  struct sink final : akt::actor {
    std::atomic<int>* got;
    explicit sink(std::atomic<int>* g) : got(g) {}
    void receive(akt::receive_context& ctx) override {
      if (ctx.is<std::string>()) got->fetch_add(1);
    }
  };
  struct teller final : akt::grain {
    void on_receive(akt::grain_context& ctx) override {
      if (akt::error e = ctx.tell_actor("sink", std::string("from a grain")))
        ctx.reply_error(e);
      else
        ctx.ack();
    }
  };
  std::atomic<int> got{0};
  ASSERT_TRUE(f.sys.spawn<sink>("sink", &got));
  auto id = akt::activate_grain<teller>(f.sys, "t");
  ASSERT_TRUE(id);
  EXPECT_FALSE(akt::tell_grain(f.sys, *id, get{}));
  EXPECT_TRUE(eventually([&] { return got.load() == 1; }));
}

TEST(GrainContext, TellGrainFromInsideIsOneWayAndActivatesTheTarget) {
  fixture f("g-grain-to-grain");
  struct relay final : akt::grain {
    void on_receive(akt::grain_context& ctx) override {
      if (auto* a = ctx.get_if<add>()) {
        grain_identity to{std::string(akt::detail::grain_kind_name<counter>()), "target"};
        if (akt::error e = ctx.tell_grain(to, add{a->n * 2}))
          ctx.reply_error(e);
        else
          ctx.ack();
      }
    }
  };
  auto id = akt::activate_grain<relay>(f.sys, "r");
  ASSERT_TRUE(id);
  EXPECT_FALSE(akt::tell_grain(f.sys, *id, add{21}));
  EXPECT_TRUE(eventually([&] {
    auto t = akt::ask_grain<long>(f.sys, f.id("target"), get{}, 5s);
    return t && *t == 42;
  }));
}

// ---- sending: ask ----

TEST(Grain_Ask, TheTimeoutReachesTheGrainAsADeadline) {
  fixture f("g-ask-deadline");
  auto r = akt::ask_grain<std::string>(f.sys, f.id("d"), deadline_probe{0ms}, 5s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, "deadline");
}

TEST(Grain_Ask, TellsCarryNoDeadline) {
  fixture f("g-tell-nodeadline");
  struct check final : akt::grain {
    std::shared_ptr<probe> p;
    akt::error on_activate(akt::grain_props& props) override {
      p = probe_of(props);
      return {};
    }
    void on_receive(akt::grain_context& ctx) override {
      if (!ctx.deadline()) p->activations += 100;
      ctx.ack();
    }
  };
  auto deps = std::make_shared<akt::grain_dependencies>();
  deps->add("probe", f.p);
  ASSERT_FALSE(akt::with_grain_default_options<check>(f.sys, {.dependencies = deps}));
  grain_identity id{std::string(akt::detail::grain_kind_name<check>()), "c"};
  ASSERT_FALSE(akt::tell_grain(f.sys, id, add{1}));
  ASSERT_FALSE(akt::tell_grain(f.sys, id, add{1}, {.one_way = true}));
  EXPECT_TRUE(eventually([&] { return f.p->activations.load() == 200; }));
}

TEST(Grain_Ask, AnAskThatExpiredInTheMailboxIsSkipped) {
  fixture f("g-ask-skip");
  const auto id = f.id("s");
  ASSERT_FALSE(akt::tell_grain(f.sys, id, add{1}));  // activate
  std::thread holder([&] { (void)akt::tell_grain(f.sys, id, hold{}, {.timeout = 10s}); });
  ASSERT_TRUE(eventually([&] { return f.p->holding.load() == 1; }));
  auto r = akt::ask_grain(f.sys, id, add{1000}, 50ms);  // waits behind hold, expires
  EXPECT_EQ(r.error().code(), errc::request_timeout);
  f.p->release = true;
  holder.join();
  auto t = akt::ask_grain<long>(f.sys, id, get{}, 5s);
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, 1) << "the expired ask was handed to on_receive";
}

TEST(Grain_Ask, AHandlerExceptionNamesTheExceptionAndTheGrainKeepsServing) {
  fixture f("g-ask-throw");
  const auto id = f.id("t");
  ASSERT_FALSE(akt::tell_grain(f.sys, id, add{3}));
  auto r = akt::ask_grain(f.sys, id, boom{}, 5s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::handler_failed);
  EXPECT_NE(r.error().message().find("kaboom in the handler"), std::string::npos)
      << r.error().message();
  auto t = akt::ask_grain<long>(f.sys, id, get{}, 5s);
  ASSERT_TRUE(t) << t.error().message();
  EXPECT_EQ(*t, 3) << "state kept: the grain was not restarted";
  EXPECT_EQ(f.p->activations.load(), 1);
}

TEST(Grain_Ask, FromAWorkerThreadIsRefusedNotBlocking) {
  fixture f("g-ask-worker");
  struct asker final : akt::actor {
    grain_identity id;
    std::atomic<int>* code;
    asker(grain_identity i, std::atomic<int>* c) : id(std::move(i)), code(c) {}
    void receive(akt::receive_context& ctx) override {
      code->store(static_cast<int>(akt::ask_grain(ctx.system(), id, get{}, 1s).error().code()));
    }
  };
  std::atomic<int> code{-1};
  auto a = f.sys.spawn<asker>("asker", f.id("w"), &code);
  ASSERT_TRUE(a);
  ASSERT_FALSE(a->tell(1));
  ASSERT_TRUE(eventually([&] { return code.load() != -1; }));
  EXPECT_EQ(code.load(), static_cast<int>(errc::blocking_on_worker));
}

// ---- sending: tell ----

TEST(Grain_Tell, AcknowledgedTellReturnsAfterTheHandlerAnswered) {
  fixture f("g-tell-ack");
  ASSERT_FALSE(akt::tell_grain(f.sys, f.id("a"), add{7}));
  std::lock_guard<std::mutex> lock(f.p->mutex);
  ASSERT_EQ(f.p->seen.size(), 1u) << "the handler ran before tell_grain returned";
}

TEST(Grain_Tell, AcknowledgedTellIsBoundedByItsTimeout) {
  fixture f("g-tell-timeout");
  const auto id = f.id("slow");
  std::thread holder([&] { (void)akt::tell_grain(f.sys, id, hold{}, {.timeout = 10s}); });
  ASSERT_TRUE(eventually([&] { return f.p->holding.load() == 1; }));
  EXPECT_EQ(akt::tell_grain(f.sys, id, add{1}, {.timeout = 50ms}).code(), errc::request_timeout);
  f.p->release = true;
  holder.join();
  // A tell is handled even though its caller stopped waiting.
  EXPECT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(f.p->mutex);
    return f.p->seen.size() == 1;
  }));
}

TEST(Grain_Tell, OneWayReturnsAfterTheEnqueue) {
  fixture f("g-one-way");
  const auto id = f.id("o");
  std::thread holder([&] { (void)akt::tell_grain(f.sys, id, hold{}, {.timeout = 10s}); });
  ASSERT_TRUE(eventually([&] { return f.p->holding.load() == 1; }));
  for (long i = 0; i < 100; ++i)
    ASSERT_FALSE(akt::tell_grain(f.sys, id, add{i}, {.one_way = true}));
  {
    std::lock_guard<std::mutex> lock(f.p->mutex);
    EXPECT_TRUE(f.p->seen.empty()) << "one-way sends did not wait for the busy grain";
  }
  f.p->release = true;
  holder.join();
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(f.p->mutex);
    return f.p->seen.size() == 100;
  }));
  std::lock_guard<std::mutex> lock(f.p->mutex);
  for (long i = 0; i < 100; ++i) EXPECT_EQ(f.p->seen[i], i) << "mailbox order";
}

TEST(Grain_Tell, OneWayHandlerFailuresAreDeadLettersNamingTheGrain) {
  fixture f("g-one-way-dl");
  dead_letters dls(f.sys);
  const auto id = f.id("d");
  ASSERT_FALSE(akt::tell_grain(f.sys, id, fail_with{errc::invalid_argument}, {.one_way = true}));
  ASSERT_FALSE(akt::tell_grain(f.sys, id, stranger{}, {.one_way = true}));
  ASSERT_FALSE(akt::tell_grain(f.sys, id, boom{}, {.one_way = true}));
  ASSERT_TRUE(eventually([&] { return dls.size() == 3; }));
  std::lock_guard<std::mutex> lock(dls.mutex);
  EXPECT_EQ(dls.items[0].code, errc::invalid_argument);
  EXPECT_TRUE(dls.items[0].was_fail_with) << "the dead letter carries the message";
  EXPECT_EQ(dls.items[1].code, errc::unhandled);
  EXPECT_EQ(dls.items[2].code, errc::handler_failed);
  for (const auto& d : dls.items) {
    EXPECT_EQ(d.receiver_name, id.str()) << "the receiver is named kind/name";
    EXPECT_NE(d.receiver_path.find("/grain/"), std::string::npos) << d.receiver_path;
  }
}

TEST(Grain_Tell, OneWayCallersGetErrorsBeforeTheEnqueue) {
  fixture f("g-one-way-errors", {.mailbox_capacity = 1});
  // invalid identity
  EXPECT_EQ(akt::tell_grain(f.sys, f.id("bad name"), add{1}, {.one_way = true}).code(),
            errc::invalid_actor_name);
  // activation failure
  f.p->fail_activations = 1;
  EXPECT_EQ(akt::tell_grain(f.sys, f.id("x"), add{1}, {.one_way = true}).code(),
            errc::init_failure);
  // full mailbox
  const auto id = f.id("full");
  std::thread holder([&] { (void)akt::tell_grain(f.sys, id, hold{}, {.timeout = 10s}); });
  ASSERT_TRUE(eventually([&] { return f.p->holding.load() == 1; }));
  ASSERT_FALSE(akt::tell_grain(f.sys, id, add{1}, {.one_way = true}));
  EXPECT_EQ(akt::tell_grain(f.sys, id, add{2}, {.one_way = true}).code(), errc::mailbox_full);
  EXPECT_EQ(akt::ask_grain(f.sys, id, get{}, 1s).error().code(), errc::mailbox_full);
  f.p->release = true;
  holder.join();
  // stopped system
  ASSERT_TRUE(f.sys.stop());
  EXPECT_EQ(akt::tell_grain(f.sys, f.id("y"), add{1}, {.one_way = true}).code(),
            errc::system_shutting_down);
}

// ---- options per kind ----

TEST(Grain_Options, DependenciesReachOnActivate) {
  fixture f("g-deps");
  ASSERT_FALSE(akt::tell_grain(f.sys, f.id("d"), add{1}));
  EXPECT_EQ(f.p->activations.load(), 1) << "counter found its probe through the dependencies";
}

TEST(Grain_Options, GrainOfOptionsBelongToThatActivationAndABareSendUsesTheKindDefaults) {
  fixture f("g-opts", {.deactivate_after = std::chrono::hours(1)}, manual_time());
  auto deps = std::make_shared<akt::grain_dependencies>();
  deps->add("probe", f.p);
  auto id =
      akt::activate_grain<counter>(f.sys, "o", {.deactivate_after = 30ms, .dependencies = deps});
  ASSERT_TRUE(id);
  // With the per-call 30 ms it passivates, at 30 ms...
  ASSERT_TRUE(akt::testkit::advance(f.sys, 29ms));
  EXPECT_EQ(f.p->deactivations.load(), 0);
  ASSERT_TRUE(akt::testkit::advance(f.sys, 1ms));
  EXPECT_EQ(f.p->deactivations.load(), 1);
  // ...and a bare send reactivates it with the kind's 1 hour: it stays. (The deactivation has
  // finished when advance returns, so the send cannot meet the closing activation.)
  ASSERT_FALSE(akt::tell_grain(f.sys, *id, add{1}));
  ASSERT_TRUE(akt::testkit::advance(f.sys, 90min));
  EXPECT_EQ(f.p->deactivations.load(), 1);
  EXPECT_EQ(f.p->activations.load(), 2);
  // The add{} kept it busy through its first hour: it goes one idle hour after that.
  ASSERT_TRUE(akt::testkit::advance(f.sys, 30min));
  EXPECT_EQ(f.p->deactivations.load(), 2);
}

TEST(Grain_Reactivation, AFreshActivationInPlaceGetsTheKindsOptionsNotThoseOfTheCallThatMadeIt) {
  // The kind's dependencies hold f.p; activate_grain's own hold q. A message that arrives while the
  // first activation deactivates keeps the cell and activates a fresh instance in place: that
  // activation must see the kind's options (f.p), not activate_grain's (q).
  fixture f("g-fresh-in-place", {.deactivate_after = std::chrono::hours(1)});
  auto q = std::make_shared<probe>();
  q->hold_deactivate = true;
  auto deps = std::make_shared<akt::grain_dependencies>();
  deps->add("probe", q);
  auto id =
      akt::activate_grain<counter>(f.sys, "r", {.deactivate_after = 20ms, .dependencies = deps});
  ASSERT_TRUE(id);
  ASSERT_TRUE(eventually([&] { return q->deactivating.load(); }));
  ASSERT_FALSE(akt::tell_grain(f.sys, *id, add{7}, {.one_way = true}));  // during on_deactivate
  q->release_deactivate = true;
  auto total = akt::ask_grain<long>(f.sys, *id, get{}, 5s);
  ASSERT_TRUE(total) << total.error().message();
  EXPECT_EQ(*total, 7) << "the message reached the fresh activation";
  EXPECT_EQ(q->activations.load(), 1) << "activate_grain's options served its own activation only";
  EXPECT_EQ(f.p->activations.load(), 1) << "the fresh activation got the kind's options";
  EXPECT_EQ(akt::grain_activation_count(f.sys), 2u);
}

TEST(Grain_Options, ActivationIsTriedUpToItsAttempts) {
  fixture f("g-attempts", {.activation_attempts = 3});
  f.p->fail_activations = 2;
  ASSERT_FALSE(akt::tell_grain(f.sys, f.id("a"), add{1}));
  EXPECT_EQ(f.p->activations.load(), 3);
}

// ---- activation failures ----

TEST(Grain_Activation, AFailedActivationReachesTheCallerRegistersNothingAndTheNextMessageRetries) {
  fixture f("g-act-fail");
  collected<akt::grain_activation_failed> failed(f.sys);
  f.p->fail_activations = 1;
  const auto id = f.id("f");
  auto r = akt::ask_grain(f.sys, id, get{}, 5s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::init_failure);
  EXPECT_EQ(r.error().detail(), "storage unavailable") << "on_activate's own error";
  EXPECT_TRUE(akt::active_grains(f.sys).empty()) << "nothing stays registered";
  EXPECT_EQ(failed.size(), 1u);
  auto t = akt::ask_grain<long>(f.sys, id, get{}, 5s);
  ASSERT_TRUE(t) << "the next message tries again: " << t.error().message();
  EXPECT_EQ(f.p->activations.load(), 2);
}

TEST(Grain_Activation, AThrowingOnActivateIsAnActivationError) {
  fixture f("g-act-throw");
  f.p->throw_on_activate = true;
  auto r = akt::tell_grain(f.sys, f.id("t"), add{1});
  ASSERT_TRUE(r);
  EXPECT_NE(r.message().find("activation exploded"), std::string::npos) << r.message();
  EXPECT_TRUE(akt::active_grains(f.sys).empty());
}

// ---- lifecycle promises ----

TEST(Grain_Lifecycle, AtMostOneActivationPerIdentityUnderConcurrentFirstMessages) {
  fixture f("g-one-activation");
  const auto id = f.id("hot");
  constexpr int k_threads = 8;
  constexpr int k_each = 200;
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int t = 0; t < k_threads; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < k_each; ++i) {
        if (akt::tell_grain(f.sys, id, add{1}, {.one_way = (i % 2) == 0})) failures++;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
  auto total = akt::ask_grain<long>(f.sys, id, get{}, 5s);
  ASSERT_TRUE(total);
  EXPECT_EQ(*total, k_threads * k_each);
  EXPECT_EQ(f.p->activations.load(), 1);
  EXPECT_EQ(f.p->overlaps.load(), 0) << "one message at a time";
}

TEST(Grain_Lifecycle, PassivationAfterTheIdleTimeoutRunsOnDeactivateAndTheNextMessageReactivates) {
  fixture f("g-passivate", {.deactivate_after = 30ms});
  collected<akt::grain_deactivated> deactivated(f.sys);
  const auto id = f.id("p");
  ASSERT_FALSE(akt::tell_grain(f.sys, id, add{5}));
  ASSERT_TRUE(eventually([&] { return f.p->deactivations.load() == 1; }));
  EXPECT_TRUE(eventually([&] { return akt::active_grains(f.sys).empty(); }));
  EXPECT_EQ(deactivated.size(), 1u);
  auto t = akt::ask_grain<long>(f.sys, id, get{}, 5s);
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, 0) << "a new instance after reactivation";
  EXPECT_EQ(f.p->activations.load(), 2);
}

TEST(Grain_Lifecycle, PassivationWaitsForTheMessageInProgress) {
  fixture f("g-passivate-wait", {.deactivate_after = 20ms}, manual_time());
  const auto id = f.id("w");
  std::thread holder([&] { (void)akt::tell_grain(f.sys, id, hold{}, {.timeout = 10s}); });
  ASSERT_TRUE(eventually([&] { return f.p->holding.load() == 1; }));
  // Several idle periods pass while it works. The system cannot settle meanwhile (the grain is
  // in its turn), so advance reports that after its bounded wait; the idle check is queued.
  auto busy = akt::testkit::advance(f.sys, 100ms, 200ms);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code(), errc::request_timeout);
  EXPECT_EQ(f.p->deactivations.load(), 0);
  f.p->release = true;
  holder.join();
  // The queued check finds it was busy and waits a full period from now (100 ms).
  ASSERT_TRUE(akt::testkit::advance(f.sys, 19ms));
  EXPECT_EQ(f.p->deactivations.load(), 0);
  ASSERT_TRUE(akt::testkit::advance(f.sys, 1ms));
  EXPECT_EQ(f.p->deactivations.load(), 1);
  EXPECT_EQ(f.p->deactivate_in_receive.load(), 0) << "on_deactivate never during on_receive";
}

TEST(Grain_Lifecycle, PassivationIsSkippedWhileMessagesKeepComing) {
  fixture f("g-passivate-busy", {.deactivate_after = 50ms}, manual_time());
  const auto id = f.id("b");
  for (int i = 0; i < 60; ++i) {  // 300 ms, a message every 5 ms
    ASSERT_FALSE(akt::tell_grain(f.sys, id, add{1}));
    ASSERT_TRUE(akt::testkit::advance(f.sys, 5ms));
  }
  EXPECT_EQ(f.p->deactivations.load(), 0);
  EXPECT_EQ(f.p->activations.load(), 1);
  // Once the messages stop it goes within two periods (the check armed before the last one
  // finds it busy and waits one more).
  ASSERT_TRUE(akt::testkit::advance(f.sys, 100ms));
  EXPECT_EQ(f.p->deactivations.load(), 1);
}

TEST(Grain_Lifecycle, MessagesArrivingDuringDeactivationReachAFreshActivationInOrder) {
  // on_deactivate is slow (it waits for release), and messages arrive meanwhile: they must be
  // handled by a fresh activation after on_deactivate finished, in arrival order.
  struct slow_bye final : akt::grain {
    std::shared_ptr<probe> p;
    akt::error on_activate(akt::grain_props& props) override {
      p = probe_of(props);
      p->activations++;
      return {};
    }
    akt::error on_deactivate(akt::grain_props&) override {
      p->holding++;  // "deactivating now"
      while (!p->release.load()) std::this_thread::sleep_for(100us);
      p->deactivations++;
      return {};
    }
    void on_receive(akt::grain_context& ctx) override {
      if (auto* a = ctx.get_if<add>()) {
        std::lock_guard<std::mutex> lock(p->mutex);
        p->seen.push_back(a->n * 100 + p->activations.load());
      }
      ctx.ack();
    }
  };
  // On virtual time: the idle period starts only when the test moves the clock. (On real time,
  // a loaded machine could let it pass between the activation and the first message's enqueue;
  // the deactivation then waited for a release that only comes after that message's ack.)
  fixture f("g-handoff", {}, manual_time());
  auto deps = std::make_shared<akt::grain_dependencies>();
  deps->add("probe", f.p);
  ASSERT_FALSE(akt::with_grain_default_options<slow_bye>(
      f.sys, {.deactivate_after = 20ms, .dependencies = deps}));
  grain_identity id{std::string(akt::detail::grain_kind_name<slow_bye>()), "h"};
  ASSERT_FALSE(akt::tell_grain(f.sys, id, add{0}));
  // Two idle periods (the first check finds add{0} handled since it was armed, and waits one
  // more); on_deactivate then holds its worker, so the system never settles: the advance gives
  // up waiting for that after a short while, which is expected here.
  (void)akt::testkit::advance(f.sys, 40ms, 50ms);
  ASSERT_TRUE(eventually([&] { return f.p->holding.load() == 1; }));  // deactivating
  for (long i = 1; i <= 20; ++i)
    ASSERT_FALSE(akt::tell_grain(f.sys, id, add{i}, {.one_way = true}));
  f.p->release = true;
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(f.p->mutex);
    return f.p->seen.size() == 21;
  }));
  std::lock_guard<std::mutex> lock(f.p->mutex);
  EXPECT_EQ(f.p->seen[0], 1) << "first message, first activation";
  for (long i = 1; i <= 20; ++i)
    EXPECT_EQ(f.p->seen[i], i * 100 + 2) << "handled by the second activation, in order";
  EXPECT_EQ(f.p->deactivations.load(), 1);
}

TEST(Grain_Lifecycle, AcknowledgedSendsRacingIdleDeactivationsAreAllHandled) {
  // Deactivations every millisecond of idleness, and a bounded mailbox, so every send takes a
  // reservation on the host of an activation that may be going. The reservation must be taken
  // while the directory still holds that host (a pid keeps the cell alive, not the host): this
  // test crashed, or failed under ASan, when it was taken after the directory's lock.
  fixture f("g-ack-vs-idle", {.mailbox_capacity = 64, .deactivate_after = 1ms});
  const auto id = f.id("racy");
  constexpr int k_threads = 3;
  constexpr int k_each = 300;
  std::atomic<int> acknowledged{0};
  std::atomic<int> unexpected{0};
  std::barrier gap(k_threads);
  std::vector<std::thread> ts;
  for (int t = 0; t < k_threads; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < k_each; ++i) {
        akt::error e = akt::tell_grain(f.sys, id, add{1}, {.timeout = 10s});
        if (!e) {
          acknowledged++;
        } else if (e.code() != errc::mailbox_full) {
          unexpected++;
        }
        // Every eight sends all senders pause together, so the grain goes idle and its
        // deactivation races the burst that follows.
        if (i % 8 == 7) {
          gap.arrive_and_wait();
          std::this_thread::sleep_for(4ms);
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(unexpected.load(), 0) << "a grain is always reachable: no send meets a closed cell";
  std::lock_guard<std::mutex> lock(f.p->mutex);
  EXPECT_EQ(static_cast<int>(f.p->seen.size()), acknowledged.load())
      << "every acknowledged add was handled, and nothing else";
  EXPECT_GT(f.p->deactivations.load(), 0) << "the race was exercised";
}

// ---- shutdown ----

TEST(Grain_Shutdown, ActiveGrainsHandleTheirMailboxThenDeactivate) {
  auto f = std::make_unique<fixture>("g-shutdown");
  const auto id = f->id("s");
  std::thread holder([&] { (void)akt::tell_grain(f->sys, id, hold{}, {.timeout = 10s}); });
  ASSERT_TRUE(eventually([&] { return f->p->holding.load() == 1; }));
  for (long i = 0; i < 50; ++i)
    ASSERT_FALSE(akt::tell_grain(f->sys, id, add{i}, {.one_way = true}));
  std::thread stopper([&] { EXPECT_TRUE(f->sys.stop()); });
  ASSERT_TRUE(eventually([&] { return f->grain_shutdown_began(); }));  // while it still works
  f->p->release = true;
  stopper.join();
  holder.join();
  std::lock_guard<std::mutex> lock(f->p->mutex);
  EXPECT_EQ(f->p->seen.size(), 50u) << "queued messages were handled before deactivation";
  EXPECT_EQ(f->p->deactivations.load(), 1);
  EXPECT_EQ(f->p->deactivate_in_receive.load(), 0);
}

TEST(Grain_Shutdown, AFullBoundedMailboxIsStillDrainedAndDeactivated) {
  fixture f("g-shutdown-full", {.mailbox_capacity = 3});
  const auto id = f.id("full");
  std::thread holder([&] { (void)akt::tell_grain(f.sys, id, hold{}, {.timeout = 10s}); });
  ASSERT_TRUE(eventually([&] { return f.p->holding.load() == 1; }));
  for (long i = 0; i < 3; ++i) ASSERT_FALSE(akt::tell_grain(f.sys, id, add{i}, {.one_way = true}));
  ASSERT_EQ(akt::tell_grain(f.sys, id, add{9}, {.one_way = true}).code(), errc::mailbox_full);
  std::thread stopper([&] { EXPECT_TRUE(f.sys.stop()); });
  ASSERT_TRUE(eventually([&] { return f.grain_shutdown_began(); }));  // while it still works
  f.p->release = true;
  stopper.join();
  holder.join();
  EXPECT_EQ(f.p->deactivations.load(), 1);
  std::lock_guard<std::mutex> lock(f.p->mutex);
  EXPECT_EQ(f.p->seen.size(), 3u);
}

TEST(Grain_Shutdown, NoActivationAfterShutdownBegan) {
  fixture f("g-shutdown-noact");
  ASSERT_FALSE(akt::tell_grain(f.sys, f.id("a"), add{1}));
  ASSERT_TRUE(f.sys.stop());
  EXPECT_EQ(akt::tell_grain(f.sys, f.id("b"), add{1}).code(), errc::system_shutting_down);
  EXPECT_EQ(akt::ask_grain(f.sys, f.id("a"), get{}, 1s).error().code(), errc::system_shutting_down);
  EXPECT_EQ(akt::activate_grain<counter>(f.sys, "c").error().code(), errc::system_shutting_down);
  EXPECT_EQ(f.p->activations.load(), 1);
}

TEST(Grain_Shutdown, AFailingOnDeactivateIsNamedInTheStopError) {
  fixture f("g-shutdown-fail");
  f.p->fail_deactivate = true;
  const auto id = f.id("bad-save");
  ASSERT_FALSE(akt::tell_grain(f.sys, id, add{1}));
  auto r = f.sys.stop();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find(id.str()), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("could not save"), std::string::npos);
}

TEST(Grain_Shutdown, AGrainStillBusyAtTheTimeoutIsAbandonedWithoutOnDeactivate) {
  fixture f("g-shutdown-abandon", {}, {.shutdown_timeout = 200ms});
  const auto id = f.id("stuck");
  std::thread holder([&] { (void)akt::tell_grain(f.sys, id, hold{}, {.timeout = 10s}); });
  ASSERT_TRUE(eventually([&] { return f.p->holding.load() == 1; }));
  auto r = f.sys.stop();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::request_timeout);
  EXPECT_NE(r.error().message().find(id.str()), std::string::npos) << r.error().message();
  f.p->release = true;
  holder.join();
  // The hold returned: the turn that could still run on_deactivate is over once the grain's
  // cell is gone (an abandoned grain is stopped when its turn ends).
  EXPECT_TRUE(eventually([&] { return akt::active_grains(f.sys).empty(); }));
  EXPECT_EQ(f.p->deactivations.load(), 0) << "abandoned: on_deactivate never ran";
}

// A grain kind that does nothing, used to observe that the shutdown began (its sends are
// refused) without touching the probe of the grain under test.
struct bystander final : akt::grain {
  void on_receive(akt::grain_context& ctx) override { ctx.ack(); }
};

TEST(Grain_Shutdown, AnActivationThatFinishesAfterTheShutdownBeganIsRolledBack) {
  // goakt-grains.md: on a clean shutdown every active grain is deactivated, and an activation
  // that finishes after the shutdown began is rolled back. stop() waits for it.
  fixture f("g-shutdown-activating");
  f.p->hold_activation = true;
  std::atomic<int> refused{-1};
  std::thread sender(
      [&] { refused = static_cast<int>(akt::tell_grain(f.sys, f.id("late"), add{1}).code()); });
  ASSERT_TRUE(eventually([&] { return f.p->in_activate.load() == 1; }));
  std::atomic<bool> stop_returned{false};
  std::thread stopper([&] {
    EXPECT_TRUE(f.sys.stop());
    stop_returned = true;
  });
  int n = 0;
  ASSERT_TRUE(eventually([&] {
    auto id = akt::activate_grain<bystander>(f.sys, "b" + std::to_string(n++));
    return !id && id.error().code() == errc::system_shutting_down;
  })) << "the shutdown began";
  EXPECT_FALSE(stop_returned.load()) << "stop waits for the activation in progress";
  f.p->release_activation = true;
  stopper.join();
  sender.join();
  EXPECT_EQ(f.p->activations.load(), 1);
  EXPECT_EQ(f.p->deactivations.load(), 1) << "rolled back with on_deactivate";
  EXPECT_EQ(refused.load(), static_cast<int>(errc::system_shutting_down))
      << "its message is refused";
  std::lock_guard<std::mutex> lock(f.p->mutex);
  EXPECT_TRUE(f.p->seen.empty()) << "on_receive never ran for the rolled-back activation";
}

TEST(Grain_Shutdown, AnActivationThatFailsWhileTheShutdownWaitsEndsTheWait) {
  fixture f("g-shutdown-activating-fails", {}, {.shutdown_timeout = 30s});
  f.p->hold_activation = true;
  f.p->fail_activations = 1;
  std::thread sender([&] { (void)akt::tell_grain(f.sys, f.id("doomed"), add{1}); });
  ASSERT_TRUE(eventually([&] { return f.p->in_activate.load() == 1; }));
  std::atomic<bool> stop_returned{false};
  std::thread stopper([&] {
    EXPECT_TRUE(f.sys.stop()) << "nothing was left to deactivate";
    stop_returned = true;
  });
  int n = 0;
  ASSERT_TRUE(eventually([&] {
    auto id = akt::activate_grain<bystander>(f.sys, "b" + std::to_string(n++));
    return !id && id.error().code() == errc::system_shutting_down;
  }));
  f.p->release_activation = true;
  // Well before the 30 s shutdown timeout: the failed activation woke the waiting stop.
  EXPECT_TRUE(eventually([&] { return stop_returned.load(); }, 10s));
  stopper.join();
  sender.join();
  EXPECT_EQ(f.p->deactivations.load(), 0);
}

TEST(Grain_Shutdown, ADeactivatedActivationEndsWhenItsLastQueuedMessageIsAnIdleCheck) {
  // The rule: whichever message is the last one an activation without an instance handles, the
  // activation then goes. Here the idle check comes in behind the shutdown marker: the marker
  // deactivates the grain but cannot stop it (the check is still queued), so the check must.
  // Before the fix the check returned early, the cell left the directory without ever stopping,
  // and stop() ran into its timeout ("1 actors did not stop"). Under load this was the 1-in-8
  // hang of three one-way senders against a grain with deactivate_after = 1 ms.
  constexpr auto idle_after = 300ms;
  fixture f("g-shutdown-idle-check", {.deactivate_after = idle_after},
            {.workers = 2, .shutdown_timeout = 3s});
  const auto id = f.id("ic");
  std::thread holder([&] { (void)akt::tell_grain(f.sys, id, hold{}, {.timeout = 10s}); });
  ASSERT_TRUE(eventually([&] { return f.p->holding.load() == 1; }));
  // Activated (and its idle timer armed) before holding was seen: the check is due by then.
  const auto check_due = std::chrono::steady_clock::now() + idle_after;
  akt::result<void> stopped;
  std::chrono::steady_clock::duration took{};
  std::thread stopper([&] {
    const auto t0 = std::chrono::steady_clock::now();
    stopped = f.sys.stop();  // posts the marker now, well before the check is due
    took = std::chrono::steady_clock::now() - t0;
  });
  // Mailbox: [marker, idle check] once the timer fired; then let the grain go on.
  std::this_thread::sleep_until(check_due + 200ms);
  f.p->release = true;
  stopper.join();
  holder.join();
  EXPECT_TRUE(stopped) << (stopped ? "" : stopped.error().message());
  EXPECT_LT(took, 2s) << "the stop waited for an activation that never ended";
  EXPECT_EQ(f.p->deactivations.load(), 1);
  EXPECT_TRUE(akt::active_grains(f.sys).empty());
}

// ---- inspection ----

TEST(Grain_Inspection, ActiveGrainsCountsAndFiguresAndEvents) {
  fixture f("g-inspect");
  collected<akt::grain_activated> activated(f.sys);
  ASSERT_FALSE(akt::tell_grain(f.sys, f.id("a"), add{1}));
  ASSERT_FALSE(akt::tell_grain(f.sys, f.id("a"), add{1}));
  ASSERT_FALSE(akt::tell_grain(f.sys, f.id("b"), add{1}));
  auto active = akt::active_grains(f.sys);
  ASSERT_EQ(active.size(), 2u);
  EXPECT_EQ(akt::grain_activation_count(f.sys), 2u);
  EXPECT_EQ(activated.size(), 2u);
  EXPECT_TRUE(eventually([&] { return akt::stats_of(f.sys, f.id("a")).processed == 2; }));
  EXPECT_TRUE(akt::stats_of(f.sys, f.id("a")).active);
  EXPECT_FALSE(akt::stats_of(f.sys, f.id("zzz")).active);
}

}  // namespace
