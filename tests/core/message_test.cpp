// Tests for akt::message: inline storage for small values, heap boxing for large, over-aligned
// and throwing-move values, type checks without RTTI, move semantics, exact destruction counts,
// emplace/reset and try_clone.

#include <gtest/gtest.h>
#include <akt/core/message.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using akt::message;

// Counts every construction and destruction of the values it tracks, so a test can check that
// a message destroys what it holds exactly once and copies or moves only when it must.
struct counters {
  int constructed = 0;  // every constructor: value, copy and move
  int copies = 0;
  int moves = 0;
  int destroyed = 0;
  int live() const { return constructed - destroyed; }
};

// Small and nothrow-movable: stored inline.
struct counted {
  counted(counters* c, int v) : ctr(c), value(v) { ++ctr->constructed; }
  counted(const counted& o) : ctr(o.ctr), value(o.value) {
    ++ctr->constructed;
    ++ctr->copies;
  }
  counted(counted&& o) noexcept : ctr(o.ctr), value(o.value) {
    ++ctr->constructed;
    ++ctr->moves;
    o.value = -1;
  }
  counted& operator=(const counted&) = delete;
  counted& operator=(counted&&) = delete;
  ~counted() { ++ctr->destroyed; }

  counters* ctr;
  int value;
};

// Larger than the inline capacity: boxed.
struct big_counted {
  big_counted(counters* c, int v) : ctr(c), value(v) { ++ctr->constructed; }
  big_counted(const big_counted& o) : ctr(o.ctr), value(o.value) {
    ++ctr->constructed;
    ++ctr->copies;
  }
  big_counted(big_counted&& o) noexcept : ctr(o.ctr), value(o.value) {
    ++ctr->constructed;
    ++ctr->moves;
  }
  ~big_counted() { ++ctr->destroyed; }

  counters* ctr;
  int value;
  unsigned char pad[message::inline_capacity] = {};
};

// Small but its move constructor may throw: boxed (relocating it must not be able to throw).
struct throwing_move {
  throwing_move(counters* c, int v) : ctr(c), value(v) { ++ctr->constructed; }
  throwing_move(const throwing_move& o) : ctr(o.ctr), value(o.value) {
    ++ctr->constructed;
    ++ctr->copies;
  }
  throwing_move(throwing_move&& o) noexcept(false) : ctr(o.ctr), value(o.value) {
    ++ctr->constructed;
    ++ctr->moves;
  }
  ~throwing_move() { ++ctr->destroyed; }

  counters* ctr;
  int value;
};

struct alignas(16) over_aligned_16 {
  int value = 0;
};
struct alignas(64) over_aligned_64 {
  int value = 0;
};

struct exactly_inline {
  unsigned char bytes[message::inline_capacity];
};
struct one_byte_too_big {
  unsigned char bytes[message::inline_capacity + 1];
};

struct my_ping {
  int seq = 0;
};

// Whether p points into the bytes of the message object itself (inline storage).
bool inside(const message& m, const void* p) {
  const auto begin = reinterpret_cast<std::uintptr_t>(&m);
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  return at >= begin && at < begin + sizeof(message);
}

static_assert(!std::is_copy_constructible_v<message>);
static_assert(!std::is_copy_assignable_v<message>);
static_assert(std::is_nothrow_move_constructible_v<message>);
static_assert(std::is_nothrow_move_assignable_v<message>);
// Pointers are refused: a message must own what it carries.
static_assert(!std::is_constructible_v<message, int*>);
static_assert(!std::is_constructible_v<message, const char*>);

TEST(Message, SizeIsOneCacheLine) {
  EXPECT_EQ(sizeof(message), 64u);
  EXPECT_EQ(message::inline_capacity, 56u);
}

TEST(Message, DefaultConstructedIsEmpty) {
  message m;
  EXPECT_TRUE(m.empty());
  EXPECT_FALSE(static_cast<bool>(m));
  EXPECT_EQ(m.type_name(), "");
  EXPECT_FALSE(m.is<int>());
  EXPECT_EQ(m.get_if<int>(), nullptr);
  EXPECT_FALSE(m.copyable());
  EXPECT_FALSE(m.try_clone().has_value());
}

TEST(Message, SmallTypesAreStoredInline) {
  EXPECT_TRUE(message::stored_inline<int>());
  EXPECT_TRUE(message::stored_inline<long>());
  EXPECT_TRUE(message::stored_inline<double>());
  EXPECT_TRUE(message::stored_inline<my_ping>());
  EXPECT_TRUE(message::stored_inline<std::string>());
  EXPECT_TRUE(message::stored_inline<std::unique_ptr<int>>());
  EXPECT_TRUE(message::stored_inline<counted>());
  EXPECT_TRUE(message::stored_inline<exactly_inline>());
}

TEST(Message, InlineValueLivesInsideTheMessage) {
  message a(42);
  ASSERT_NE(a.get_if<int>(), nullptr);
  EXPECT_TRUE(inside(a, a.get_if<int>()));

  message b(std::string("hello"));
  ASSERT_NE(b.get_if<std::string>(), nullptr);
  EXPECT_TRUE(inside(b, b.get_if<std::string>()));

  message c(exactly_inline{});
  ASSERT_NE(c.get_if<exactly_inline>(), nullptr);
  EXPECT_TRUE(inside(c, c.get_if<exactly_inline>()));
}

TEST(Message, EmplaceConstructsOnceInPlace) {
  counters c;
  {
    message m;
    counted& ref = m.emplace<counted>(&c, 7);
    EXPECT_EQ(ref.value, 7);
    EXPECT_EQ(&ref, m.get_if<counted>());
    EXPECT_TRUE(inside(m, &ref));
    EXPECT_EQ(c.constructed, 1);
    EXPECT_EQ(c.copies, 0);
    EXPECT_EQ(c.moves, 0);
    EXPECT_EQ(c.destroyed, 0);
  }
  EXPECT_EQ(c.destroyed, 1);
  EXPECT_EQ(c.live(), 0);
}

TEST(Message, ConstructFromRvalueMovesOnce) {
  counters c;
  {
    message m(counted(&c, 3));
    EXPECT_EQ(c.moves, 1);
    EXPECT_EQ(c.copies, 0);
    EXPECT_EQ(c.live(), 1);  // the temporary is gone, the stored value lives
    ASSERT_NE(m.get_if<counted>(), nullptr);
    EXPECT_EQ(m.get_if<counted>()->value, 3);
  }
  EXPECT_EQ(c.live(), 0);
}

TEST(Message, ConstructFromLvalueCopiesAndLeavesSource) {
  counters c;
  {
    counted src(&c, 11);
    message m(src);
    EXPECT_EQ(c.copies, 1);
    EXPECT_EQ(c.moves, 0);
    EXPECT_EQ(src.value, 11);
    ASSERT_NE(m.get_if<counted>(), nullptr);
    EXPECT_EQ(m.get_if<counted>()->value, 11);
    EXPECT_EQ(c.live(), 2);
  }
  EXPECT_EQ(c.live(), 0);
}

TEST(Message, LargeTypesAreBoxed) {
  EXPECT_FALSE(message::stored_inline<one_byte_too_big>());
  EXPECT_FALSE(message::stored_inline<big_counted>());
  EXPECT_FALSE((message::stored_inline<std::array<char, 1024>>()));

  message m(one_byte_too_big{});
  ASSERT_NE(m.get_if<one_byte_too_big>(), nullptr);
  EXPECT_FALSE(inside(m, m.get_if<one_byte_too_big>()));
}

TEST(Message, OverAlignedTypesAreBoxedAndAligned) {
  EXPECT_FALSE(message::stored_inline<over_aligned_16>());
  EXPECT_FALSE(message::stored_inline<over_aligned_64>());

  message a(over_aligned_16{5});
  ASSERT_NE(a.get_if<over_aligned_16>(), nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.get_if<over_aligned_16>()) % 16, 0u);
  EXPECT_EQ(a.get_if<over_aligned_16>()->value, 5);

  message b(over_aligned_64{9});
  ASSERT_NE(b.get_if<over_aligned_64>(), nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.get_if<over_aligned_64>()) % 64, 0u);
  EXPECT_EQ(b.get_if<over_aligned_64>()->value, 9);
}

TEST(Message, ThrowingMoveTypesAreBoxed) {
  static_assert(sizeof(throwing_move) <= message::inline_capacity);
  EXPECT_FALSE(message::stored_inline<throwing_move>());

  counters c;
  {
    message m;
    m.emplace<throwing_move>(&c, 4);
    ASSERT_NE(m.get_if<throwing_move>(), nullptr);
    EXPECT_FALSE(inside(m, m.get_if<throwing_move>()));
    // Moving the message moves the box, never the value (whose move could throw).
    message moved(std::move(m));
    EXPECT_EQ(c.moves, 0);
    ASSERT_NE(moved.get_if<throwing_move>(), nullptr);
    EXPECT_EQ(moved.get_if<throwing_move>()->value, 4);
  }
  EXPECT_EQ(c.constructed, 1);
  EXPECT_EQ(c.destroyed, 1);
}

TEST(Message, BoxedValueDestroyedExactlyOnce) {
  counters c;
  {
    message m;
    m.emplace<big_counted>(&c, 21);
    message n(std::move(m));
    message o;
    o = std::move(n);
    ASSERT_NE(o.get_if<big_counted>(), nullptr);
    EXPECT_EQ(o.get_if<big_counted>()->value, 21);
    EXPECT_EQ(c.constructed, 1);
    EXPECT_EQ(c.destroyed, 0);
  }
  EXPECT_EQ(c.destroyed, 1);
}

TEST(Message, MoveKeepsTheSameBox) {
  message m(one_byte_too_big{});
  const one_byte_too_big* box = m.get_if<one_byte_too_big>();
  ASSERT_NE(box, nullptr);
  message n(std::move(m));
  EXPECT_EQ(n.get_if<one_byte_too_big>(), box);
  EXPECT_TRUE(m.empty());  // NOLINT(bugprone-use-after-move): the contract under test
}

TEST(Message, GetIfWrongTypeReturnsNull) {
  message m(42);
  EXPECT_TRUE(m.is<int>());
  EXPECT_FALSE(m.is<long>());
  EXPECT_FALSE(m.is<unsigned>());
  EXPECT_FALSE(m.is<my_ping>());
  EXPECT_EQ(m.get_if<long>(), nullptr);
  EXPECT_EQ(m.get_if<unsigned>(), nullptr);
  EXPECT_EQ(m.get_if<my_ping>(), nullptr);
  EXPECT_EQ(m.get_if<std::string>(), nullptr);
  ASSERT_NE(m.get_if<int>(), nullptr);
  EXPECT_EQ(*m.get_if<int>(), 42);

  const message& cm = m;
  EXPECT_EQ(cm.get_if<long>(), nullptr);
  ASSERT_NE(cm.get_if<int>(), nullptr);
  EXPECT_EQ(*cm.get_if<int>(), 42);
}

TEST(Message, GetIfGivesMutableAccess) {
  message m(my_ping{1});
  m.get_if<my_ping>()->seq = 77;
  EXPECT_EQ(m.get_if<my_ping>()->seq, 77);
}

TEST(Message, TypeNameContainsStructName) {
  message m(my_ping{});
  EXPECT_NE(m.type_name().find("my_ping"), std::string_view::npos) << m.type_name();
  message i(5);
  EXPECT_NE(i.type_name().find("int"), std::string_view::npos) << i.type_name();
  message b(one_byte_too_big{});
  EXPECT_NE(b.type_name().find("one_byte_too_big"), std::string_view::npos) << b.type_name();
  // Different types have different names.
  EXPECT_NE(m.type_name(), b.type_name());
}

TEST(Message, MoveConstructionLeavesSourceEmpty) {
  counters c;
  {
    message m(counted(&c, 5));
    const int moves_before = c.moves;
    message n(std::move(m));
    EXPECT_TRUE(m.empty());  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(m.get_if<counted>(), nullptr);
    ASSERT_NE(n.get_if<counted>(), nullptr);
    EXPECT_EQ(n.get_if<counted>()->value, 5);
    EXPECT_TRUE(inside(n, n.get_if<counted>()));
    // Inline relocation: one move into the new storage, the old value destroyed.
    EXPECT_EQ(c.moves, moves_before + 1);
    EXPECT_EQ(c.live(), 1);
  }
  EXPECT_EQ(c.live(), 0);
}

TEST(Message, MoveAssignmentDestroysOldValueAndLeavesSourceEmpty) {
  counters old_c;
  counters new_c;
  {
    message dst;
    dst.emplace<counted>(&old_c, 1);
    message src;
    src.emplace<counted>(&new_c, 2);
    dst = std::move(src);
    EXPECT_EQ(old_c.live(), 0);  // the previous value is destroyed
    EXPECT_EQ(old_c.destroyed, 1);
    EXPECT_EQ(new_c.live(), 1);
    EXPECT_TRUE(src.empty());  // NOLINT(bugprone-use-after-move)
    ASSERT_NE(dst.get_if<counted>(), nullptr);
    EXPECT_EQ(dst.get_if<counted>()->value, 2);
  }
  EXPECT_EQ(new_c.live(), 0);
  EXPECT_EQ(old_c.live(), 0);
}

TEST(Message, MoveAssignFromEmptyEmptiesTarget) {
  counters c;
  message dst;
  dst.emplace<counted>(&c, 1);
  message src;
  dst = std::move(src);
  EXPECT_TRUE(dst.empty());
  EXPECT_EQ(c.live(), 0);
}

TEST(Message, SelfMoveAssignmentKeepsValue) {
  counters c;
  {
    message m;
    m.emplace<counted>(&c, 8);
    message& alias = m;
    m = std::move(alias);
    ASSERT_NE(m.get_if<counted>(), nullptr);
    EXPECT_EQ(m.get_if<counted>()->value, 8);
    EXPECT_EQ(c.live(), 1);
  }
  EXPECT_EQ(c.live(), 0);
}

TEST(Message, UniquePtrRoundTrips) {
  auto p = std::make_unique<int>(99);
  int* raw = p.get();
  message m(std::move(p));
  EXPECT_TRUE(m.is<std::unique_ptr<int>>());
  EXPECT_FALSE(m.copyable());
  EXPECT_FALSE(m.try_clone().has_value());

  message n(std::move(m));
  auto* held = n.get_if<std::unique_ptr<int>>();
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->get(), raw);
  std::unique_ptr<int> out = std::move(*held);
  EXPECT_EQ(*out, 99);
}

TEST(Message, DestructorCalledExactlyOnce) {
  counters c;
  {
    message m;
    m.emplace<counted>(&c, 1);
    std::vector<message> v;
    v.push_back(std::move(m));
    v.reserve(64);  // reallocation relocates the messages
    v.emplace_back(std::move(v.front()));
  }
  EXPECT_EQ(c.live(), 0);
  // Every value constructed was destroyed once, no more.
  EXPECT_EQ(c.destroyed, c.constructed);
}

TEST(Message, EmplaceReplacesPreviousValue) {
  counters first;
  counters second;
  message m;
  m.emplace<counted>(&first, 1);
  counted& ref = m.emplace<counted>(&second, 2);
  EXPECT_EQ(first.live(), 0);
  EXPECT_EQ(second.live(), 1);
  EXPECT_EQ(ref.value, 2);

  std::string& s = m.emplace<std::string>(3, 'x');
  EXPECT_EQ(second.live(), 0);
  EXPECT_EQ(s, "xxx");
  EXPECT_TRUE(m.is<std::string>());
}

TEST(Message, ResetDestroysAndEmpties) {
  counters c;
  message m;
  m.emplace<counted>(&c, 1);
  m.reset();
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.get_if<counted>(), nullptr);
  EXPECT_EQ(c.destroyed, 1);
  m.reset();  // idempotent
  EXPECT_EQ(c.destroyed, 1);

  counters bc;
  m.emplace<big_counted>(&bc, 1);
  m.reset();
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(bc.live(), 0);
}

TEST(Message, ResetOfTriviallyDestructibleValueEmpties) {
  message m(my_ping{3});
  m.reset();
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.get_if<my_ping>(), nullptr);
  m.emplace<my_ping>().seq = 4;
  ASSERT_NE(m.get_if<my_ping>(), nullptr);
  EXPECT_EQ(m.get_if<my_ping>()->seq, 4);
  message n(std::move(m));
  EXPECT_TRUE(m.empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(n.get_if<my_ping>()->seq, 4);
  n = message(7);
  EXPECT_TRUE(n.is<int>());
}

TEST(Message, TryCloneCopiesInlineValue) {
  counters c;
  {
    message m;
    m.emplace<counted>(&c, 12);
    EXPECT_TRUE(m.copyable());
    std::optional<message> copy = m.try_clone();
    ASSERT_TRUE(copy.has_value());
    EXPECT_EQ(c.copies, 1);
    ASSERT_NE(copy->get_if<counted>(), nullptr);
    EXPECT_EQ(copy->get_if<counted>()->value, 12);
    EXPECT_NE(copy->get_if<counted>(), m.get_if<counted>());
    // The source is untouched.
    ASSERT_NE(m.get_if<counted>(), nullptr);
    EXPECT_EQ(m.get_if<counted>()->value, 12);
    // Independent: changing the copy does not change the source.
    copy->get_if<counted>()->value = 13;
    EXPECT_EQ(m.get_if<counted>()->value, 12);
  }
  EXPECT_EQ(c.live(), 0);
}

TEST(Message, TryCloneCopiesBoxedValue) {
  counters c;
  {
    message m;
    m.emplace<big_counted>(&c, 30);
    std::optional<message> copy = m.try_clone();
    ASSERT_TRUE(copy.has_value());
    EXPECT_EQ(c.copies, 1);
    ASSERT_NE(copy->get_if<big_counted>(), nullptr);
    EXPECT_NE(copy->get_if<big_counted>(), m.get_if<big_counted>());
    EXPECT_EQ(copy->get_if<big_counted>()->value, 30);
    EXPECT_EQ(c.live(), 2);
  }
  EXPECT_EQ(c.live(), 0);
}

TEST(Message, TryCloneOfMoveOnlyIsEmpty) {
  message m(std::make_unique<int>(1));
  EXPECT_FALSE(m.copyable());
  EXPECT_FALSE(m.try_clone().has_value());
  // The source keeps its value.
  ASSERT_NE(m.get_if<std::unique_ptr<int>>(), nullptr);
  EXPECT_EQ(**m.get_if<std::unique_ptr<int>>(), 1);
}

}  // namespace
