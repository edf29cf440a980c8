// Routers: a pool of workers behind one pid, and the routing strategies. Quoted by
// docs/guide/03-requests-timers-and-routers.md.

#include <akt/akt.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

struct job {
  int id;
};
struct whoami {};

class worker : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    const std::string name(ctx.self().name());
    if (auto* j = ctx.get_if<job>()) {
      std::printf("%s took job %d\n", name.c_str(), j->id);
    } else if (ctx.is<whoami>()) {
      ctx.reply(name);
    } else {
      ctx.unhandled();
    }
  }
};

int main() {
  akt::actor_system sys("routers");
  if (!sys.start()) return 1;

  // [router]
  akt::router_options options;
  options.strategy = akt::routing::round_robin;  // or random, consistent_hash, broadcast, ...
  options.pool_size = 3;                         // three worker children, restarted on failure
  akt::result<akt::pid> pool = akt::spawn_router<worker>(sys, "workers", options);
  if (!pool) {
    std::printf("spawn failed: %s\n", pool.error().message().c_str());
    return 1;
  }
  for (int i = 0; i < 6; ++i)
    if (pool->tell(job{i})) return 1;                 // routee-0, 1, 2, 0, 1, 2
  if (pool->tell(akt::broadcast{job{99}})) return 1;  // every worker gets job 99

  // An ask through the router is answered by the worker it reached.
  akt::result<std::string> who = pool->ask<std::string>(whoami{}, std::chrono::seconds(1));
  if (who) std::printf("answered by %s\n", who->c_str());

  // Scatter-gather: every worker is asked, the first reply answers.
  akt::router_options fastest;
  fastest.strategy = akt::routing::scatter_gather_first;
  fastest.pool_size = 3;
  fastest.within = std::chrono::milliseconds(500);
  auto replicas = akt::spawn_router<worker>(sys, "replicas", fastest);
  if (replicas) {
    auto first = replicas->ask<std::string>(whoami{}, std::chrono::seconds(1));
    if (first) std::printf("first answer from %s\n", first->c_str());
  }
  // [/router]

  auto routees = pool->ask<std::vector<akt::pid>>(akt::get_routees{}, std::chrono::seconds(1));
  if (routees) std::printf("%zu workers in the pool\n", routees->size());
  sys.stop();
  return 0;
}
