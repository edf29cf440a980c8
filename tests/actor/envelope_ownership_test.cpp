// A send whose message throws while it is copied into its envelope loses nothing: the envelope
// goes back to its pool (detail::make_envelope owns it until delivery), the exception reaches
// the sender, and the system keeps working. Under ASan, LeakSanitizer checks at exit that no
// envelope was lost; here the actor must also still get the next message from each path.

#include <gtest/gtest.h>

#include <akt/akt.hpp>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>

#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;

// Copying throws; moving does not (a message must be movable into its envelope).
struct throws_on_copy {
  std::string text = "payload that owns heap memory, so a lost envelope leaks it visibly";
  throws_on_copy() = default;
  throws_on_copy(const throws_on_copy&) { throw std::runtime_error("copy failed"); }
  throws_on_copy(throws_on_copy&&) noexcept = default;
  throws_on_copy& operator=(const throws_on_copy&) = delete;
  throws_on_copy& operator=(throws_on_copy&&) noexcept = default;
};

struct go {};
struct done_word {
  int n;
};

struct counter final : akt::actor {
  explicit counter(std::atomic<int>* c) : count(c) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.get_if<done_word>() != nullptr) {
      count->fetch_add(1);
      if (ctx.expects_reply()) ctx.reply(1);
    }
  }
  std::atomic<int>* count;
};

// Tells, asks and requests a throws_on_copy from inside its turn, then a message that works.
struct thrower final : akt::actor {
  thrower(akt::pid t, std::atomic<int>* caught) : target(std::move(t)), caught(caught) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.get_if<go>() == nullptr) return;
    const throws_on_copy original;
    try {
      (void)ctx.tell(target, original);
    } catch (const std::runtime_error&) {
      caught->fetch_add(1);
    }
    try {
      (void)ctx.request<int>(target, original, 1s, [](akt::receive_context&, akt::result<int>) {});
    } catch (const std::runtime_error&) {
      caught->fetch_add(1);
    }
    (void)ctx.tell(target, done_word{1});
  }
  akt::pid target;
  std::atomic<int>* caught;
};

TEST(Envelope_Ownership, AMessageWhoseCopyThrowsLosesNoEnvelopeOnAnySendPath) {
  akt::actor_system sys("envelope-ownership", akt::system_config{});
  ASSERT_TRUE(sys.start());
  std::atomic<int> count{0};
  std::atomic<int> caught{0};
  auto target = sys.spawn<counter>("counter", &count);
  ASSERT_TRUE(target);

  const throws_on_copy original;
  EXPECT_THROW((void)target->tell(original), std::runtime_error);
  EXPECT_THROW((void)target->ask<int>(original, 5s), std::runtime_error);
  // The next messages on the same paths still arrive.
  EXPECT_FALSE(target->tell(done_word{1}));
  auto r = target->ask<int>(done_word{2}, 30s);
  ASSERT_TRUE(r);

  auto sender = sys.spawn<thrower>("thrower", *target, &caught);
  ASSERT_TRUE(sender);
  EXPECT_FALSE(sender->tell(go{}));
  EXPECT_TRUE(akt::test::eventually([&] { return count.load() == 3; }, 30s));
  EXPECT_EQ(caught.load(), 2);
  EXPECT_TRUE(sys.stop());
}

}  // namespace
