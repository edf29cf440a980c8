// Supervision and the actor hierarchy: a parent spawns workers, restarts them when they fail, and
// watches them. Quoted by docs/guide/02-mailboxes-and-failures.md.

#include <akt/akt.hpp>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

struct job {
  int id;
};
struct flaky_io : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct start_workers {
  int count;
};

// [worker]
class worker : public akt::actor {
 public:
  akt::error pre_start(akt::actor_context& ctx) override {
    std::printf("  %s starting\n", std::string(ctx.name()).c_str());
    return {};
  }
  void receive(akt::receive_context& ctx) override {
    if (auto* j = ctx.get_if<job>()) {
      if (j->id % 3 == 0) throw flaky_io("disk hiccup on job " + std::to_string(j->id));
      ++done_;  // lost on a restart: a fresh instance starts from zero
      ctx.reply(done_);
    }
  }

 private:
  int done_ = 0;
};
// [/worker]

// [supervisor]
class team_lead : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    if (auto* s = ctx.get_if<start_workers>()) {
      // Transient I/O errors restart the worker (at most 5 times a minute, with back-off);
      // anything else stops it.
      auto sup = akt::supervisor()
                     .on<flaky_io>(akt::directive::restart)
                     .otherwise(akt::directive::stop)
                     .with_retry(5, std::chrono::minutes(1))
                     .with_backoff(std::chrono::milliseconds(10), std::chrono::seconds(1));
      for (int i = 0; i < s->count; ++i) {
        auto w = ctx.spawn<worker>("worker-" + std::to_string(i), {.supervisor = sup});
        if (w) ctx.watch(*w);  // we get akt::terminated when it stops for good
      }
    } else if (auto* t = ctx.get_if<akt::terminated>()) {
      std::printf("  %s is gone\n", std::string(t->actor.path()).c_str());
    }
  }
};
// [/supervisor]

int main() {
  akt::actor_system sys("supervision");
  if (!sys.start()) return 1;
  auto restarts = sys.events().subscribe<akt::actor_restarted>([](const akt::actor_restarted& e) {
    std::printf("  %s restarted (%u)\n", std::string(e.actor.name()).c_str(), e.restarts);
  });

  auto lead = sys.spawn<team_lead>("lead");
  if (!lead) return 1;
  (void)lead->tell(start_workers{2});
  (void)lead->ask(0, std::chrono::seconds(1));  // the workers exist once this is answered

  auto w0 = sys.find("lead/worker-0");  // paths: parent/child
  if (!w0) return 1;
  for (int id = 1; id <= 4; ++id) {
    auto r = w0->ask<int>(job{id}, std::chrono::seconds(1));
    if (r)
      std::printf("job %d done (%d so far)\n", id, *r);
    else
      std::printf("job %d failed: %s\n", id, r.error().message().c_str());
  }
  std::printf("worker-0 figures: %llu messages, %u restarts\n",
              static_cast<unsigned long long>(sys.stats(*w0).processed), sys.stats(*w0).restarts);

  if (auto w1 = sys.find("lead/worker-1")) (void)sys.stop_actor(*w1);  // the lead is told
  (void)lead->ask(0, std::chrono::seconds(1));
  (void)sys.stop_actor(*lead);  // its remaining workers stop first
  return 0;
}
