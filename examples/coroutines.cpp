// Coroutine handlers: an actor and a grain that co_await requests and a delay without blocking
// their worker, and answer their caller afterwards. Quoted by
// docs/guide/03-requests-timers-and-routers.md and docs/guide/04-grains.md.

#include <akt/akt.hpp>

#include <chrono>
#include <cstdio>
#include <string>

using namespace std::chrono_literals;

struct price_query {
  std::string item;
};
struct stock_query {
  std::string item;
};
struct offer {  // answered with the price of `count` items, if in stock
  std::string item;
  int count;
};

class prices : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    if (auto* q = ctx.get_if<price_query>()) ctx.reply(q->item == "coffee" ? 3.5 : 1.0);
  }
};

class stock : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    if (auto* q = ctx.get_if<stock_query>()) ctx.reply(q->item == "coffee" ? 12 : 0);
  }
};

// [actor]
class shop : public akt::actor {
 public:
  shop(akt::pid prices, akt::pid stock) : prices_(std::move(prices)), stock_(std::move(stock)) {}

  void receive(akt::receive_context& ctx) override {
    // The coroutine's first part runs now; the rest later, on this actor's turns.
    if (auto* o = ctx.get_if<offer>()) akt::run(quote(akt::async_context(ctx), *o));
  }

 private:
  // The context by value (it lives in the coroutine's frame), the message copied out of ctx.
  akt::task<> quote(akt::async_context ctx, offer o) {
    // Messages as named locals (a braced temporary in a co_await trips a GCC 12 bug).
    const stock_query in_stock{o.item};
    const price_query price_of{o.item};
    akt::result<int> left = co_await ctx.ask<int>(stock_, in_stock, 1s);
    if (!left) co_return ctx.reply_error(left.error());
    if (*left < o.count) {
      co_await ctx.delay(10ms);  // a restock is due: look once more, later
      left = co_await ctx.ask<int>(stock_, in_stock, 1s);
      if (!left || *left < o.count) co_return ctx.reply(std::string("out of stock"));
    }
    akt::result<double> price = co_await ctx.ask<double>(prices_, price_of, 1s);
    if (!price) co_return ctx.reply_error(price.error());
    ctx.reply(std::to_string(*price * o.count));  // the ask is answered after three awaits
  }

  akt::pid prices_;
  akt::pid stock_;
};
// [/actor]

struct reserve {
  int quantity;
};
struct place {
  akt::grain_identity inventory;
  int quantity;
};

class inventory : public akt::grain {
 public:
  void on_receive(akt::grain_context& ctx) override {
    if (auto* r = ctx.get_if<reserve>()) {
      left_ -= r->quantity;
      ctx.reply(left_);
    }
  }

 private:
  int left_ = 10;
};

// [grain]
class order : public akt::grain {
 public:
  void on_receive(akt::grain_context& ctx) override {
    if (auto* p = ctx.get_if<place>()) akt::run(reserve_stock(akt::grain_async_context(ctx), *p));
  }

 private:
  akt::task<> reserve_stock(akt::grain_async_context ctx, place p) {
    // A request: the kind's reentrancy mode decides what this grain does while it waits.
    akt::result<int> left = co_await ctx.ask_grain<int>(p.inventory, reserve{p.quantity});
    if (!left) co_return ctx.reply_error(left.error());
    ctx.reply("reserved, " + std::to_string(*left) + " left");
  }
};
// [/grain]

int main() {
  akt::actor_system sys("coroutines");
  if (!sys.start()) return 1;
  auto p = sys.spawn<prices>("prices");
  auto s = sys.spawn<stock>("stock");
  if (!p || !s) return 1;
  auto front = sys.spawn<shop>("shop", *p, *s);
  if (!front) return 1;
  for (const offer& o : {offer{"coffee", 2}, offer{"tea", 1}}) {
    auto answer = front->ask<std::string>(o, 2s);
    std::printf("%s x%d: %s\n", o.item.c_str(), o.count,
                answer ? answer->c_str() : answer.error().message().c_str());
  }

  akt::grain_options reentrant;
  reentrant.reentrancy = akt::grain_reentrancy{akt::reentrancy_mode::stash_non_reentrant, 0};
  (void)akt::with_grain_default_options<order>(sys, reentrant);
  (void)akt::register_grain_kind<inventory>(sys);
  const akt::grain_identity shelf{std::string(akt::detail::grain_kind_name<inventory>()), "A1"};
  const akt::grain_identity o1{std::string(akt::detail::grain_kind_name<order>()), "o-1"};
  auto placed = akt::ask_grain<std::string>(sys, o1, place{shelf, 3}, 2s);
  std::printf("order: %s\n", placed ? placed->c_str() : placed.error().message().c_str());
  (void)sys.stop();
  return 0;
}
