// akt::match in grains: the same helper as in actors, with unhandled as the fallback.

#include <gtest/gtest.h>
#include <akt/akt.hpp>

#include <chrono>

namespace {

using namespace std::chrono_literals;
using akt::errc;

struct deposit {
  long amount;
};
struct balance {};
struct other {};

struct wallet final : akt::grain {
  static constexpr std::string_view akt_type_name = "test.wallet";
  long total = 0;
  void on_receive(akt::grain_context& ctx) override {
    akt::match(
        ctx,
        [&](const deposit& d, akt::grain_context& c) {
          total += d.amount;
          c.ack();
        },
        [&](const balance&, auto& c) { c.reply(total); });
  }
};

TEST(GrainMatch, HandlersAnswerAndAnUnmatchedMessageIsUnhandled) {
  akt::actor_system sys("grain-match");
  ASSERT_TRUE(sys.start());
  auto id = akt::activate_grain<wallet>(sys, "w");
  ASSERT_TRUE(id);
  EXPECT_FALSE(akt::tell_grain(sys, *id, deposit{4}));
  EXPECT_FALSE(akt::tell_grain(sys, *id, deposit{6}));
  auto b = akt::ask_grain<long>(sys, *id, balance{}, 5s);
  ASSERT_TRUE(b) << b.error().message();
  EXPECT_EQ(*b, 10);
  EXPECT_EQ(akt::tell_grain(sys, *id, other{}).code(), errc::unhandled);
  EXPECT_EQ(akt::ask_grain(sys, *id, other{}, 5s).error().code(), errc::unhandled);
  EXPECT_TRUE(sys.stop());
}

}  // namespace
