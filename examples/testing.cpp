// Testing actors with a probe, and publishing to topics. Quoted by
// docs/guide/03-requests-timers-and-routers.md and docs/guide/05-observability-and-testing.md.
//
// A plain program (no test framework): every probe expectation returns an akt::result, so
// any framework, or none, can check it.

#include <akt/akt.hpp>
#include <akt/testkit/probe.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

struct price_changed {
  std::string symbol;
  double price;
};
struct quote_request {
  std::string symbol;
};
struct quote {
  std::string symbol;
  double price;
};

// Remembers the last price of each symbol it hears about; answers quote requests.
class quoter : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    if (auto* p = ctx.get_if<price_changed>()) {
      last_ = *p;
    } else if (auto* q = ctx.get_if<quote_request>()) {
      ctx.reply(quote{q->symbol, q->symbol == last_.symbol ? last_.price : 0.0});
    } else {
      ctx.unhandled();
    }
  }

 private:
  price_changed last_;
};

int check(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  return ok ? 0 : 1;
}

int main() {
  akt::actor_system sys("testing");
  if (!sys.start()) return 1;
  int failures = 0;
  auto q = sys.spawn<quoter>("quoter");
  if (!q) return 1;

  // [topics]
  akt::topics& topics = sys.topics();
  if (topics.subscribe(*q, "prices")) return 1;  // any live actor of this system; twice is once

  akt::testkit::probe audit(sys);  // a probe is an actor too: it can subscribe
  if (topics.subscribe(audit.ref(), "prices")) return 1;

  // Every subscriber gets its own copy (the message must be copyable).
  akt::result<std::size_t> delivered = topics.publish("prices", price_changed{"ACME", 12.5});
  // delivered == 2. A subscriber that stops is removed on its own.
  // [/topics]
  failures += check(delivered && *delivered == 2, "published to two subscribers");

  // [probe]
  // The probe sends as itself, so the quoter's answer comes back to it.
  if (audit.send(*q, quote_request{"ACME"})) return 1;

  // The next message must be the copy of the publication, then the quote.
  akt::result<price_changed> seen = audit.expect<price_changed>();
  akt::result<quote> answer = audit.expect<quote>(std::chrono::seconds(1));
  if (!answer) std::printf("%s\n", answer.error().message().c_str());  // timeout or wrong type

  bool quiet = audit.expect_no_message(std::chrono::milliseconds(50));  // nothing else came

  // Watch an actor and wait for it to stop.
  if (q->stop()) return 1;
  akt::result<void> stopped = audit.expect_terminated(*q);
  // [/probe]
  failures += check(seen && seen->price == 12.5, "the probe saw the publication");
  failures += check(answer && answer->price == 12.5, "the quoter answered the probe");
  failures += check(quiet, "no other message");
  failures += check(stopped.has_value(), "the quoter stopped");
  // Removal follows the stop shortly (the watchers' notice may come first).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (topics.subscribers("prices") != 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  failures += check(topics.subscribers("prices") == 1, "the stopped quoter was unsubscribed");

  sys.stop();
  return failures == 0 ? 0 : 1;
}
