// The README's grain: an account addressed by its identity and activated by its first message.
// Quoted by README.md.

#include <akt/akt.hpp>

#include <chrono>
#include <cstdio>

struct deposit {
  long amount;
};
struct get_balance {};

// [account]
struct account : akt::grain {
  static constexpr std::string_view akt_type_name = "bank.account";  // stable kind name
  long balance = 0;
  void on_receive(akt::grain_context& ctx) override {
    akt::match(
        ctx,
        [&](const deposit& d, auto& c) {
          balance += d.amount;
          c.ack();
        },
        [&](const get_balance&, auto& c) { c.reply(balance); });
  }
};
// [/account]

int main() {
  akt::actor_system sys("bank");
  if (!sys.start()) return 1;
  // [use]
  auto acct = akt::get_grain<account>(sys, "acct-42");  // activates nothing yet
  (void)acct->tell_one_way(deposit{10});                // activates it, returns once queued
  akt::result<long> b = acct->ask<long>(get_balance{}, std::chrono::seconds(1));
  // [/use]
  std::printf("acct-42: %ld\n", b ? *b : -1L);
  if (!sys.stop()) return 1;
  return b && *b == 10 ? 0 : 1;
}
