// The showcase: spawns actors, tells and asks, watches a dead letter being published, and
// measures a short burst of tells. Run by the README's first command.
//
// Usage: example_showcase [burst]: the number of tells in the burst (default 2,000,000; the
// smoke test, Example_showcase, sends fewer to stay quick under the sanitizers).

#include <akt/akt.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

struct deposit {
  long amount;
};
struct balance {};
struct burst_item {
  long n;
};
struct gossip {
  std::string text;
};

// A bank account: serial by construction, no locks.
class account : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    if (auto* d = ctx.get_if<deposit>()) {
      total_ += d->amount;
    } else if (ctx.is<balance>()) {
      ctx.reply(total_);
    } else {
      ctx.unhandled();  // published as a dead letter; an asker gets errc::unhandled
    }
  }

 private:
  long total_ = 0;
};

// Counts a burst and says when it has seen all of it.
class counter : public akt::actor {
 public:
  counter(long expected, std::atomic<bool>* done) : expected_(expected), done_(done) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<burst_item>() && ++seen_ == expected_) done_->store(true);
  }

 private:
  long expected_;
  long seen_ = 0;
  std::atomic<bool>* done_;
};

}  // namespace

int main(int argc, char** argv) {
  const long burst = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 2'000'000;
  if (burst <= 0) {
    std::fprintf(stderr, "usage: %s [burst > 0]\n", argv[0]);
    return 2;
  }
  akt::actor_system sys("showcase");
  if (auto started = sys.start(); !started) {
    std::fprintf(stderr, "start failed: %s\n", started.error().message().c_str());
    return 1;
  }
  std::printf("akt showcase: %u dispatcher workers\n", sys.worker_count());

  // Dead letters are published on the event stream; nothing the runtime refuses vanishes.
  auto watch = sys.events().subscribe<akt::dead_letter>([](const akt::dead_letter& d) {
    std::printf("  dead letter: %s to '%s' (%s)\n", std::string(d.msg.type_name()).c_str(),
                std::string(d.receiver.name()).c_str(), d.reason.message().c_str());
  });

  auto alice = sys.spawn<account>("alice");
  if (!alice) return 1;
  for (int i = 1; i <= 10; ++i) (void)alice->tell(deposit{i * 10});
  auto total = alice->ask<long>(balance{}, std::chrono::seconds(1));
  std::printf("alice's balance after 10 deposits: %ld\n", total ? *total : -1L);

  auto dup = sys.spawn<account>("alice");
  std::printf("spawning a second 'alice': %s\n", dup ? "ok" : dup.error().message().c_str());

  std::printf("telling alice something she does not handle:\n");
  (void)alice->tell(gossip{"did you hear?"});
  (void)alice->ask<long>(balance{}, std::chrono::seconds(1));  // after the gossip, in order
  (void)sys.stop_actor(*alice);
  std::printf("telling alice after she stopped:\n");
  auto refused = alice->tell(deposit{1});
  std::printf("  tell returned: %s\n", refused.message().c_str());

  // A short throughput line: one producer thread, one actor.
  std::atomic<bool> done{false};
  auto sink = sys.spawn<counter>("counter", burst, &done);
  if (!sink) return 1;
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < burst; ++i) (void)sink->tell(burst_item{i});
  while (!done.load()) std::this_thread::yield();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("throughput: %ld tells to one actor in %.3f s = %.1f M msg/s\n", burst, secs,
              burst / secs / 1e6);

  watch.reset();
  auto stopped = sys.stop();
  std::printf("stopped: %s, dead letters published: %lu\n",
              stopped ? "ok" : stopped.error().message().c_str(),
              static_cast<unsigned long>(sys.stats().dead_letters));
  return stopped ? 0 : 1;
}
