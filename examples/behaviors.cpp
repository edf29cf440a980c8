// Stash and become: an actor that waits for its configuration before serving, keeping the requests
// that arrive too early. Quoted by docs/guide/02-mailboxes-and-failures.md.

#include <akt/akt.hpp>

#include <chrono>
#include <cstdio>
#include <string>

struct configure {
  std::string greeting;
};
struct hello {
  std::string name;
};

// [stash]
class greeter : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    if (auto* c = ctx.get_if<configure>()) {
      greeting_ = c->greeting;
      ctx.unstash_all();  // the early requests are processed next, in order
      ctx.become([this](akt::receive_context& c2) { serve(c2); });
    } else {
      ctx.stash();  // not configured yet: keep it (asks stay answerable)
    }
  }

 private:
  void serve(akt::receive_context& ctx) {
    if (auto* h = ctx.get_if<hello>()) {
      std::printf("%s, %s\n", greeting_.c_str(), h->name.c_str());
      if (ctx.expects_reply()) ctx.reply(greeting_ + ", " + h->name);
    }
  }
  std::string greeting_;
};
// [/stash]

int main() {
  akt::actor_system sys("behaviors");
  if (!sys.start()) return 1;
  auto g = sys.spawn<greeter>("greeter");
  if (!g) return 1;
  (void)g->tell(hello{"early bird"});  // stashed
  (void)g->tell(configure{"Good morning"});
  auto r = g->ask<std::string>(hello{"world"}, std::chrono::seconds(1));
  std::printf("reply: %s\n", r ? r->c_str() : r.error().message().c_str());
  (void)sys.stop();
  return 0;
}
