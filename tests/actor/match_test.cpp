// akt::match / akt::handlers: dispatch by overload in actors, with unhandled as the fallback.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "actor/actor_test_support.hpp"

namespace akt::test {
namespace {

struct deposit {
  long amount;
};
struct balance {};
struct rename_to {
  std::string name;
};
struct nobody_handles_this {};

class account : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    akt::match(
        ctx, [&](const deposit& d) { total_ += d.amount; },
        [&](const balance&, auto& c) { c.reply(total_); },
        // Takes the message by rvalue: the handler may move out of it.
        [&](rename_to&& r, akt::receive_context& c) {
          name_ = std::move(r.name);
          c.reply(name_);
        });
  }

 private:
  long total_ = 0;
  std::string name_;
};

TEST(Match, RunsTheHandlerOfTheMessagesTypeWithOrWithoutTheContext) {
  actor_system sys("match");
  ASSERT_TRUE(sys.start());
  auto a = sys.spawn<account>("a");
  ASSERT_TRUE(a);
  ASSERT_FALSE(a->tell(deposit{5}));
  ASSERT_FALSE(a->tell(deposit{7}));
  auto b = a->ask<long>(balance{}, 5s);
  ASSERT_TRUE(b) << b.error().message();
  EXPECT_EQ(*b, 12);
  auto n = a->ask<std::string>(rename_to{"savings"}, 5s);
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, "savings");
  ASSERT_TRUE(sys.stop());
}

TEST(Match, NoMatchingHandlerIsUnhandled) {
  actor_system sys("match-unhandled");
  ASSERT_TRUE(sys.start());
  collector<akt::unhandled_message, std::string> seen(
      sys, [](const akt::unhandled_message& u) { return u.message_type; });
  auto a = sys.spawn<account>("a");
  ASSERT_TRUE(a);
  auto r = a->ask(nobody_handles_this{}, 5s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::unhandled);
  EXPECT_GE(seen.wait_for(1), 1u);
  ASSERT_TRUE(sys.stop());
}

TEST(Match, TheFirstMatchingHandlerWins) {
  auto order = std::make_shared<std::string>();
  struct first_wins : akt::actor {
    std::shared_ptr<std::string> order;
    explicit first_wins(std::shared_ptr<std::string> o) : order(std::move(o)) {}
    void receive(akt::receive_context& ctx) override {
      const bool handled = akt::match(
          ctx, [&](const deposit&) { *order += "first"; },
          [&](const deposit&, auto& c) {
            *order += "second";
            c.reply(0L);
          });
      if (handled) ctx.reply(1L);
    }
  };
  actor_system sys("match-order");
  ASSERT_TRUE(sys.start());
  auto a = sys.spawn<first_wins>("a", order);
  ASSERT_TRUE(a);
  auto r = a->ask<long>(deposit{1}, 5s);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, 1) << "match returned true";
  ASSERT_TRUE(sys.stop());
  EXPECT_EQ(*order, "first");
}

TEST(Match, HandlersKeptAsAnObjectDispatchTheSameWay) {
  struct with_member : akt::actor {
    long total = 0;
    akt::handlers<std::function<void(const deposit&)>,
                  std::function<void(const balance&, akt::receive_context&)>>
        on{[this](const deposit& d) { total += d.amount; },
           [this](const balance&, akt::receive_context& c) { c.reply(total); }};
    void receive(akt::receive_context& ctx) override { on(ctx); }
  };
  actor_system sys("match-object");
  ASSERT_TRUE(sys.start());
  auto a = sys.spawn<with_member>("a");
  ASSERT_TRUE(a);
  ASSERT_FALSE(a->tell(deposit{3}));
  auto r = a->ask<long>(balance{}, 5s);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, 3);
  EXPECT_EQ(a->ask(nobody_handles_this{}, 5s).error().code(), errc::unhandled);
  ASSERT_TRUE(sys.stop());
}

}  // namespace
}  // namespace akt::test
