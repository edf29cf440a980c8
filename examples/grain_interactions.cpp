// Grains that talk: an order grain reserves stock from an inventory grain with a non-blocking
// request (reentrancy), answers its caller from the request's continuation (defer_response),
// charges a card off its turn (pipe_to_self), and gives up on an unpaid order with an activation
// timer; the system restocks the inventory on a schedule. Quoted by docs/guide/04-grains.md.

#include <akt/akt.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

using namespace std::chrono_literals;

struct reserve {
  int quantity;
};
struct restock {
  int quantity;
};
struct stock {};
struct place {
  akt::grain_identity inventory;
  int quantity;
};
struct pay {};
struct paid {
  bool ok;
};
struct expire {};
struct status {};

class inventory : public akt::grain {
 public:
  void on_receive(akt::grain_context& ctx) override {
    if (auto* r = ctx.get_if<reserve>()) {
      if (r->quantity > available_)
        return ctx.reply_error(akt::error(akt::errc::invalid_argument, "out of stock"));
      available_ -= r->quantity;
      ctx.reply(available_);
    } else if (auto* s = ctx.get_if<restock>()) {
      available_ += s->quantity;
      ctx.ack();
    } else if (ctx.is<stock>()) {
      ctx.reply(available_);
    } else {
      ctx.unhandled();
    }
  }

 private:
  int available_ = 3;
};

// [order]
class order : public akt::grain {
 public:
  akt::error on_activate(akt::grain_props& props) override {
    // An order not paid within 200 ms is abandoned. The timer lives with this activation.
    auto t = props.schedule_once(expire{}, 200ms, {.reference = "expiry"});
    return t ? akt::error() : t.error();
  }

  void on_receive(akt::grain_context& ctx) override {
    if (auto* p = ctx.get_if<place>()) {
      // Ask the inventory without blocking this grain; answer our caller when it replies.
      auto reply = std::make_shared<akt::reply_handle>(ctx.defer_reply());
      auto sent = ctx.request_grain<int>(p->inventory, reserve{p->quantity},
                                         [this, reply](akt::grain_context&, akt::result<int> left) {
                                           if (!left) return reply->reply_error(left.error());
                                           state_ = "reserved";
                                           reply->reply(state_);
                                         });
      if (!sent) reply->reply_error(sent.error());
    } else if (ctx.is<pay>()) {
      // The card service is slow: run it off the grain's turn; its answer comes back as `paid`.
      (void)ctx.pipe_to_self([] {
        std::this_thread::sleep_for(10ms);
        return paid{true};
      });
      ctx.ack();
    } else if (auto* r = ctx.get_if<paid>()) {
      state_ = r->ok ? "paid" : "payment failed";
      (void)ctx.cancel_schedule("expiry");
    } else if (ctx.is<expire>()) {
      if (state_ != "paid") state_ = "expired";
    } else if (ctx.is<status>()) {
      ctx.reply(state_);
    } else {
      ctx.unhandled();
    }
  }

 private:
  std::string state_ = "new";
};
// [/order]

int main() {
  akt::actor_system sys("shop");
  if (!sys.start()) return 1;

  // [reentrancy]
  akt::grain_options reentrant;
  reentrant.reentrancy = akt::grain_reentrancy{akt::reentrancy_mode::allow_all, 16};
  (void)akt::with_grain_default_options<order>(sys, reentrant);
  (void)akt::register_grain_kind<inventory>(sys);
  // [/reentrancy]

  auto shelf = akt::activate_grain<inventory>(sys, "sku-1");
  auto first = akt::activate_grain<order>(sys, "order-1");
  auto second = akt::activate_grain<order>(sys, "order-2");
  if (!shelf || !first || !second) return 1;

  auto placed = akt::ask_grain<std::string>(sys, *first, place{*shelf, 2}, 1s);
  auto refused = akt::ask_grain<std::string>(sys, *second, place{*shelf, 2}, 1s);
  std::printf("order-1: %s; order-2: %s\n", placed ? placed->c_str() : "failed",
              refused ? "reserved" : refused.error().message().c_str());

  (void)akt::tell_grain(sys, *first, pay{});
  std::this_thread::sleep_for(300ms);  // order-1 is paid before its expiry; order-2 expires
  auto s1 = akt::ask_grain<std::string>(sys, *first, status{}, 1s);
  auto s2 = akt::ask_grain<std::string>(sys, *second, status{}, 1s);
  std::printf("order-1 is %s, order-2 is %s\n", s1 ? s1->c_str() : "?", s2 ? s2->c_str() : "?");

  // [schedule]
  // The system restocks the shelf every 20 ms until cancelled; a deactivated grain would be
  // activated again by the delivery.
  auto restocking = akt::schedule_grain(sys, *shelf, restock{1}, 20ms);
  std::this_thread::sleep_for(70ms);
  if (restocking) restocking->cancel();
  // [/schedule]
  auto left = akt::ask_grain<int>(sys, *shelf, stock{}, 1s);
  std::printf("stock after restocking: %d\n", left ? *left : -1);

  const bool ok =
      placed && !refused && s1 && *s1 == "paid" && s2 && *s2 == "expired" && left && *left >= 3;
  sys.stop();
  return ok ? 0 : 1;
}
