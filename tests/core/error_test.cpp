// Tests for akt::errc, akt::error, the std::error_code integration, akt::result<T> and
// akt::result<void>.

#include <gtest/gtest.h>
#include <akt/core/error.hpp>
#include <akt/core/result.hpp>

#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using akt::errc;
using akt::error;
using akt::result;

// Every code with its expected stable name. Keep in the enum's order: the last entry is the
// highest value, used to check that the table covers the whole enum.
const std::vector<std::pair<errc, std::string_view>>& all_codes() {
  static const std::vector<std::pair<errc, std::string_view>> codes = {
      {errc::ok, "ok"},
      {errc::dead, "dead"},
      {errc::request_timeout, "request_timeout"},
      {errc::mailbox_full, "mailbox_full"},
      {errc::system_shutting_down, "system_shutting_down"},
      {errc::system_not_started, "system_not_started"},
      {errc::actor_already_exists, "actor_already_exists"},
      {errc::invalid_actor_name, "invalid_actor_name"},
      {errc::actor_not_found, "actor_not_found"},
      {errc::unhandled, "unhandled"},
      {errc::no_reply, "no_reply"},
      {errc::invalid_timeout, "invalid_timeout"},
      {errc::init_failure, "init_failure"},
      {errc::handler_failed, "handler_failed"},
      {errc::blocking_on_worker, "blocking_on_worker"},
      {errc::empty_pid, "empty_pid"},
      {errc::unexpected_reply, "unexpected_reply"},
      {errc::mailbox_disposed, "mailbox_disposed"},
      {errc::invalid_cron, "invalid_cron"},
      {errc::invalid_time_zone, "invalid_time_zone"},
      {errc::invalid_argument, "invalid_argument"},
      {errc::schedule_not_found, "schedule_not_found"},
      {errc::request_canceled, "request_canceled"},
      {errc::retry_limit_exceeded, "retry_limit_exceeded"},
      {errc::grain_kind_unknown, "grain_kind_unknown"},
      {errc::reentrancy_disabled, "reentrancy_disabled"},
      {errc::reentrancy_in_flight_limit, "reentrancy_in_flight_limit"},
      {errc::grain_timers_stopped, "grain_timers_stopped"},
      {errc::duplicate_type_name, "duplicate_type_name"},
      {errc::not_serializable, "not_serializable"},
      {errc::decode_failed, "decode_failed"},
      {errc::type_id_collision, "type_id_collision"},
      {errc::invalid_address, "invalid_address"},
      {errc::remoting_disabled, "remoting_disabled"},
      {errc::unreachable, "unreachable"},
      {errc::connection_lost, "connection_lost"},
      {errc::node_lost, "node_lost"},
      {errc::window_full, "window_full"},
      {errc::protocol_error, "protocol_error"},
      {errc::message_too_large, "message_too_large"},
      {errc::cluster_registry_timeout, "cluster_registry_timeout"},
      {errc::cluster_unavailable, "cluster_unavailable"},
      {errc::not_owner, "not_owner"},
      {errc::cluster_compacted, "cluster_compacted"},
      {errc::lease_not_found, "lease_not_found"},
      {errc::invalid_cluster_config, "invalid_cluster_config"},
      {errc::cluster_quorum_timeout, "cluster_quorum_timeout"},
  };
  return codes;
}

// Counts constructions and destructions of a value held by a result.
struct tracked {
  explicit tracked(int* live, int v) : live_(live), value(v) { ++*live_; }
  tracked(const tracked& o) : live_(o.live_), value(o.value) { ++*live_; }
  tracked(tracked&& o) noexcept : live_(o.live_), value(o.value) {
    ++*live_;
    o.value = -1;
  }
  tracked& operator=(const tracked&) = delete;
  ~tracked() { --*live_; }

  int* live_;
  int value;
};

TEST(Errc, ToStringNamesEveryCode) {
  for (const auto& [code, name] : all_codes()) {
    EXPECT_EQ(akt::to_string(code), name) << static_cast<int>(code);
  }
}

TEST(Errc, ToStringNamesAreDistinct) {
  std::set<std::string_view> names;
  for (const auto& [code, name] : all_codes()) {
    const std::string_view s = akt::to_string(code);
    EXPECT_NE(s, "unknown") << static_cast<int>(code);
    EXPECT_FALSE(s.empty());
    EXPECT_TRUE(names.insert(s).second) << "duplicate name " << s;
  }
}

TEST(Errc, TableCoversTheWholeEnum) {
  // The values are dense from ok: the table above has one entry per value, no gaps.
  const auto& codes = all_codes();
  for (std::size_t i = 0; i < codes.size(); ++i) {
    EXPECT_EQ(static_cast<std::size_t>(codes[i].first), i);
  }
  // The value after the last known one is not a code.
  const auto past_end = static_cast<errc>(static_cast<int>(codes.back().first) + 1);
  EXPECT_EQ(akt::to_string(past_end), "unknown");
}

TEST(Error, DefaultIsOk) {
  error e;
  EXPECT_EQ(e.code(), errc::ok);
  EXPECT_FALSE(static_cast<bool>(e));
  EXPECT_EQ(e.detail(), "");
  EXPECT_EQ(e.message(), "ok");
  EXPECT_TRUE(e == errc::ok);
}

TEST(Error, FromCodeIsTruthyWithoutDetail) {
  error e = errc::mailbox_full;
  EXPECT_TRUE(static_cast<bool>(e));
  EXPECT_EQ(e.code(), errc::mailbox_full);
  EXPECT_EQ(e.detail(), "");
  EXPECT_EQ(e.message(), "mailbox_full");
}

TEST(Error, MessageIsCodeColonDetail) {
  error e(errc::dead, "actor worker-1 stopped");
  EXPECT_EQ(e.code(), errc::dead);
  EXPECT_EQ(e.detail(), "actor worker-1 stopped");
  EXPECT_EQ(e.message(), "dead: actor worker-1 stopped");
}

TEST(Error, EmptyDetailGivesBareCode) {
  error e(errc::request_timeout, "");
  EXPECT_EQ(e.message(), "request_timeout");
}

TEST(Error, MessageForEveryCode) {
  for (const auto& [code, name] : all_codes()) {
    EXPECT_EQ(error(code).message(), name);
    EXPECT_EQ(error(code, "d").message(), std::string(name) + ": d");
  }
}

TEST(Error, EqualityComparesCodes) {
  const error a(errc::dead, "one");
  const error b(errc::dead, "two");
  const error c(errc::mailbox_full);
  EXPECT_TRUE(a == b);  // the detail is not part of the identity
  EXPECT_FALSE(a == c);
  EXPECT_TRUE(a != c);
  EXPECT_TRUE(a == errc::dead);
  EXPECT_FALSE(a == errc::mailbox_full);
  EXPECT_TRUE(errc::dead == a);  // reversed operand (C++20 rewritten comparison)
  EXPECT_TRUE(c != errc::dead);
}

TEST(Error, CopyAndMoveKeepCodeAndDetail) {
  const error a(errc::init_failure, "pre_start threw");
  error copy = a;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_EQ(copy.code(), errc::init_failure);
  EXPECT_EQ(copy.detail(), "pre_start threw");
  EXPECT_EQ(a.detail(), "pre_start threw");

  error moved = std::move(copy);
  EXPECT_EQ(moved.code(), errc::init_failure);
  EXPECT_EQ(moved.message(), "init_failure: pre_start threw");

  error assigned;
  assigned = moved;
  EXPECT_EQ(assigned.message(), "init_failure: pre_start threw");
}

TEST(ErrorCode, ConvertsImplicitly) {
  static_assert(std::is_error_code_enum_v<errc>);
  const std::error_code ec = errc::dead;
  EXPECT_EQ(ec.value(), static_cast<int>(errc::dead));
  EXPECT_EQ(&ec.category(), &akt::error_category());
  EXPECT_TRUE(ec == errc::dead);
  EXPECT_FALSE(ec == errc::mailbox_full);
  EXPECT_TRUE(static_cast<bool>(ec));
}

TEST(ErrorCode, CategoryNameIsAkt) {
  EXPECT_STREQ(akt::error_category().name(), "akt");
  EXPECT_EQ(akt::make_error_code(errc::mailbox_full).category().name(), std::string("akt"));
}

TEST(ErrorCode, MessageMatchesToString) {
  for (const auto& [code, name] : all_codes()) {
    const std::error_code ec = akt::make_error_code(code);
    EXPECT_EQ(ec.message(), name);
    EXPECT_EQ(ec.value(), static_cast<int>(code));
  }
}

TEST(ErrorCode, OkIsFalsy) {
  const std::error_code ec = errc::ok;
  EXPECT_FALSE(static_cast<bool>(ec));
}

TEST(ErrorCode, DistinctFromGenericCategory) {
  // Same integer value, different category: not equal.
  const std::error_code ours = errc::dead;  // value 1
  const std::error_code generic(1, std::generic_category());
  EXPECT_NE(ours, generic);
}

TEST(Result, HoldsValue) {
  result<int> r = 42;
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(r.value(), 42);
  EXPECT_EQ(*r, 42);
  EXPECT_EQ(r.code(), errc::ok);
  EXPECT_EQ(r.error_or_ok().code(), errc::ok);
  EXPECT_FALSE(static_cast<bool>(r.error_or_ok()));
}

TEST(Result, HoldsErrorFromCode) {
  result<int> r = errc::mailbox_full;
  EXPECT_FALSE(r.has_value());
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.code(), errc::mailbox_full);
  EXPECT_EQ(r.error().code(), errc::mailbox_full);
  EXPECT_EQ(r.error_or_ok().code(), errc::mailbox_full);
}

TEST(Result, HoldsErrorWithDetail) {
  result<std::string> r = error(errc::unexpected_reply, "expected int, got long");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message(), "unexpected_reply: expected int, got long");
  EXPECT_EQ(r.error_or_ok().detail(), "expected int, got long");
}

TEST(Result, ConvertingConstructorBuildsValue) {
  result<std::string> r = "hello";
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, "hello");
  EXPECT_EQ(r->size(), 5u);
}

TEST(Result, ArrowAndMutation) {
  result<std::string> r = std::string("ab");
  r->push_back('c');
  EXPECT_EQ(r.value(), "abc");
  r.value() += "d";
  EXPECT_EQ(*r, "abcd");
}

TEST(Result, ValueOr) {
  const result<int> ok = 5;
  const result<int> bad = errc::dead;
  EXPECT_EQ(ok.value_or(9), 5);
  EXPECT_EQ(bad.value_or(9), 9);

  const result<std::string> s = errc::no_reply;
  EXPECT_EQ(s.value_or("fallback"), "fallback");
}

TEST(Result, CopyValueAndError) {
  const result<std::string> v = std::string("x");
  result<std::string> vc = v;  // NOLINT(performance-unnecessary-copy-initialization)
  ASSERT_TRUE(vc.has_value());
  EXPECT_EQ(*vc, "x");
  EXPECT_EQ(*v, "x");

  const result<std::string> e = error(errc::dead, "gone");
  result<std::string> ec = e;  // NOLINT(performance-unnecessary-copy-initialization)
  ASSERT_FALSE(ec.has_value());
  EXPECT_EQ(ec.error().message(), "dead: gone");
  EXPECT_EQ(e.error().message(), "dead: gone");
}

TEST(Result, MoveValue) {
  result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  result<std::unique_ptr<int>> m = std::move(r);
  ASSERT_TRUE(m.has_value());
  ASSERT_NE(*m, nullptr);
  EXPECT_EQ(**m, 7);
  std::unique_ptr<int> out = std::move(m).value();
  EXPECT_EQ(*out, 7);
}

TEST(Result, MoveError) {
  result<std::unique_ptr<int>> r = error(errc::handler_failed, "boom");
  result<std::unique_ptr<int>> m = std::move(r);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.error().message(), "handler_failed: boom");
}

TEST(Result, AssignmentSwitchesBetweenValueAndError) {
  int live = 0;
  {
    result<tracked> r = tracked(&live, 1);
    EXPECT_EQ(live, 1);
    r = errc::dead;
    EXPECT_EQ(live, 0);  // the value was destroyed
    EXPECT_EQ(r.code(), errc::dead);
    r = tracked(&live, 2);
    EXPECT_EQ(live, 1);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->value, 2);
    r = tracked(&live, 3);
    EXPECT_EQ(live, 1);
    EXPECT_EQ(r->value, 3);
  }
  EXPECT_EQ(live, 0);
}

TEST(Result, DestroysValueExactlyOnce) {
  int live = 0;
  {
    result<tracked> a = tracked(&live, 1);
    result<tracked> b = a;
    result<tracked> c = std::move(a);
    EXPECT_EQ(live, 3);
    EXPECT_EQ(c->value, 1);
    EXPECT_EQ(b->value, 1);
  }
  EXPECT_EQ(live, 0);
}

TEST(Result, MoveOnlyValueOfRvalueResult) {
  auto make = [] { return result<std::unique_ptr<int>>(std::make_unique<int>(3)); };
  std::unique_ptr<int> p = *make();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 3);
}

TEST(ResultVoid, DefaultIsSuccess) {
  result<void> r;
  EXPECT_TRUE(r.has_value());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(r.code(), errc::ok);
  EXPECT_FALSE(static_cast<bool>(r.error()));
  r.value();  // no-op on success
}

TEST(ResultVoid, HoldsError) {
  result<void> r = errc::system_shutting_down;
  EXPECT_FALSE(r.has_value());
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.code(), errc::system_shutting_down);
  EXPECT_EQ(r.error().code(), errc::system_shutting_down);

  result<void> d = error(errc::invalid_timeout, "zero");
  EXPECT_EQ(d.error().message(), "invalid_timeout: zero");
}

TEST(ResultVoid, CopyAndAssign) {
  result<void> a = errc::dead;
  result<void> b = a;
  EXPECT_EQ(b.code(), errc::dead);
  b = result<void>();
  EXPECT_TRUE(b.has_value());
  EXPECT_EQ(a.code(), errc::dead);
}

#if !defined(NDEBUG) || defined(AKT_ENABLE_ASSERTS)
TEST(ResultDeathTest, ValueOfErrorAsserts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  result<int> r = errc::dead;
  EXPECT_DEATH((void)r.value(), "assertion failed");
}

TEST(ResultDeathTest, ErrorOfValueAsserts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  result<int> r = 1;
  EXPECT_DEATH((void)r.error(), "assertion failed");
}

TEST(ResultDeathTest, OkIsNotAnError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)result<int>(error()), "assertion failed");
}
#endif

}  // namespace
