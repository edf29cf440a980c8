// akt::type_name<T>: stable names by member or specialisation, the compiler's as the fallback.

#include <gtest/gtest.h>
#include <akt/core/message.hpp>
#include <akt/core/type_name.hpp>

#include <string_view>

namespace names_test {
struct with_member {
  static constexpr std::string_view akt_type_name = "test.with_member";
  int v = 0;
};
struct with_specialisation {
  int v = 0;
};
struct with_both {
  static constexpr std::string_view akt_type_name = "test.member_loses";
};
struct without {};
}  // namespace names_test

AKT_TYPE_NAME(names_test::with_specialisation, "test.with_specialisation")
AKT_TYPE_NAME(names_test::with_both, "test.specialisation_wins")

namespace {

using namespace names_test;

TEST(TypeName, AMemberGivesTheStableName) {
  static_assert(akt::type_name<with_member>() == "test.with_member");
  static_assert(akt::has_stable_type_name_v<with_member>);
  EXPECT_EQ(akt::type_name<const with_member>(), "test.with_member");
}

TEST(TypeName, ASpecialisationGivesTheStableNameAndWinsOverAMember) {
  static_assert(akt::type_name<with_specialisation>() == "test.with_specialisation");
  static_assert(akt::type_name<with_both>() == "test.specialisation_wins");
  static_assert(akt::has_stable_type_name_v<with_specialisation>);
}

TEST(TypeName, WithoutOneTheCompilersNameIsTheFallback) {
  static_assert(!akt::has_stable_type_name_v<without>);
  EXPECT_EQ(akt::type_name<without>(), "names_test::without");
  EXPECT_EQ(akt::type_name<int>(), "int");
}

TEST(TypeName, AMessageReportsItsValuesStableName) {
  akt::message m(with_member{});
  EXPECT_EQ(m.type_name(), "test.with_member");
  m.emplace<with_specialisation>();
  EXPECT_EQ(m.type_name(), "test.with_specialisation");
}

}  // namespace
