// Tests for detail::compact_string, the 16-byte name holder of actor cells: every length around
// the inline limit reads back exactly, and long names live on the heap (ASan checks the free).

#include <gtest/gtest.h>
#include <akt/core/compact_string.hpp>

#include <string>
#include <string_view>

namespace {

using akt::detail::compact_string;

TEST(CompactString, EveryLengthUpToThirtyTwoReadsBack) {
  for (std::size_t n = 0; n <= 32; ++n) {
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s += static_cast<char>('a' + i % 26);
    const compact_string c(s);
    EXPECT_EQ(c.view(), s) << "length " << n;
    EXPECT_EQ(c.is_inline(), n <= compact_string::inline_capacity) << "length " << n;
  }
}

TEST(CompactString, KeepsEmbeddedZerosAndHighBytes) {
  const std::string s("a\0\xff/b", 5);
  const compact_string c(s);
  EXPECT_EQ(c.view(), std::string_view(s));
  const std::string longer = s + s + s + s;  // 20 bytes: heap
  const compact_string d(longer);
  EXPECT_FALSE(d.is_inline());
  EXPECT_EQ(d.view(), std::string_view(longer));
}

TEST(CompactString, CopiesItsSourceSoTheSourceMayDie) {
  auto* c = [] {
    std::string temp = "user/parent/child-with-a-long-name";
    auto* made = new compact_string(temp);
    temp.assign(temp.size(), 'x');
    return made;
  }();
  EXPECT_EQ(c->view(), "user/parent/child-with-a-long-name");
  delete c;
}

}  // namespace
