// Talking between actors without blocking: request with a continuation, forward, pipe_to, scheduled
// messages. Quoted by docs/guide/03-requests-timers-and-routers.md.

#include <akt/akt.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

struct price_query {
  std::string item;
};
struct quote {
  std::string item;
};
struct report {};
struct tick {};

class price_service : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    if (auto* q = ctx.get_if<price_query>()) ctx.reply(q->item == "coffee" ? 3.5 : 1.0);
  }
};

// [request]
class shop : public akt::actor {
 public:
  explicit shop(akt::pid prices) : prices_(std::move(prices)) {}
  void receive(akt::receive_context& ctx) override {
    if (auto* q = ctx.get_if<quote>()) {
      // Returns at once; the continuation runs later on this actor, like a message.
      ctx.request<double>(prices_, price_query{q->item}, std::chrono::seconds(1),
                          [item = q->item](akt::receive_context&, akt::result<double> price) {
                            if (price)
                              std::printf("%s costs %.2f\n", item.c_str(), *price);
                            else
                              std::printf("no price: %s\n", price.error().message().c_str());
                          });
    } else if (ctx.is<price_query>()) {
      (void)ctx.forward(prices_);  // the asker gets its answer from the price service
    } else if (ctx.is<report>()) {
      // Blocking work goes to the blocking pool; its result comes back as a message.
      (void)ctx.pipe_to(ctx.self(), [] {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a slow report query
        return std::string("report ready");
      });
    } else if (auto* s = ctx.get_if<std::string>()) {
      std::printf("%s\n", s->c_str());
    } else if (ctx.is<tick>()) {
      std::printf("tick\n");
    }
  }

 private:
  akt::pid prices_;
};
// [/request]

int main() {
  akt::actor_system sys("requests");
  if (!sys.start()) return 1;
  auto prices = sys.spawn<price_service>("prices");
  if (!prices) return 1;
  auto s = sys.spawn<shop>("shop", *prices);
  if (!s) return 1;
  (void)s->tell(quote{"coffee"});
  auto forwarded = s->ask<double>(price_query{"tea"}, std::chrono::seconds(1));
  std::printf("tea via the shop: %.2f\n", forwarded ? *forwarded : -1.0);
  (void)s->tell(report{});

  // [schedule]
  auto every = sys.schedule(*s, tick{}, std::chrono::milliseconds(20));
  auto nightly = sys.schedule_with_cron(*s, report{}, "30 2 * * *", "Europe/Paris");
  if (!nightly) std::printf("cron: %s\n", nightly.error().message().c_str());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (every) every->cancel();
  for (const auto& info : sys.schedules()) std::printf("scheduled: %s\n", info.spec.c_str());
  // [/schedule]
  (void)sys.stop();
  return 0;
}
