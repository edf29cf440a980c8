// Grain kinds are named by akt::type_name: stable names given by the type, and two types that
// claim the same name refused at registration.

#include <gtest/gtest.h>
#include <akt/akt.hpp>

#include <string_view>

namespace {

using akt::errc;

struct ledger final : akt::grain {
  static constexpr std::string_view akt_type_name = "bank.ledger";
  void on_receive(akt::grain_context& ctx) override { ctx.ack(); }
};
// Another type that claims the same stable name.
struct impostor final : akt::grain {
  static constexpr std::string_view akt_type_name = "bank.ledger";
  void on_receive(akt::grain_context& ctx) override { ctx.unhandled(); }
};

TEST(GrainKind, AStableTypeNameNamesTheKind) {
  akt::actor_system sys("kind-stable");
  ASSERT_TRUE(sys.start());
  auto id = akt::activate_grain<ledger>(sys, "main");
  ASSERT_TRUE(id) << id.error().message();
  EXPECT_EQ(id->kind, "bank.ledger");
  EXPECT_EQ(id->str(), "bank.ledger/main");
  EXPECT_TRUE(sys.stop());
}

TEST(GrainKind, TwoTypesWithTheSameStableNameAreRefusedAtRegistration) {
  akt::actor_system sys("kind-duplicate");
  ASSERT_TRUE(sys.start());
  EXPECT_FALSE(akt::register_grain_kind<ledger>(sys));
  EXPECT_FALSE(akt::register_grain_kind<ledger>(sys)) << "the same type again is fine";
  const akt::error e = akt::register_grain_kind<impostor>(sys);
  EXPECT_EQ(e.code(), errc::duplicate_type_name);
  EXPECT_NE(e.message().find("bank.ledger"), std::string::npos) << e.message();
  auto id = akt::activate_grain<impostor>(sys, "x");
  ASSERT_FALSE(id);
  EXPECT_EQ(id.error().code(), errc::duplicate_type_name);
  EXPECT_EQ(akt::with_grain_default_options<impostor>(sys, {}).code(), errc::duplicate_type_name);
  EXPECT_TRUE(sys.stop());
}

}  // namespace
