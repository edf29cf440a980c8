// A project outside the akt tree, built against the installed package.
#include <akt/akt.hpp>

#include <chrono>
#include <cstdio>

struct ping {
  int n;
};

struct ponger : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (auto* p = ctx.get_if<ping>()) ctx.reply(p->n + 1);
  }
};

int main() {
  akt::actor_system sys("consumer", {.workers = 1});
  if (!sys.start()) return 1;
  auto p = sys.spawn<ponger>("ponger");
  if (!p) return 2;
  auto r = p->ask<int>(ping{41}, std::chrono::seconds(5));
  if (!r) return 3;
  std::printf("pong %d\n", *r);
  return sys.stop() ? 0 : 4;
}
