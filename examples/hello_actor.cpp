// The smallest useful akt program: one actor, a tell and an ask. Quoted by docs/guide/01-actors.md.

#include <akt/akt.hpp>

#include <chrono>
#include <cstdio>
#include <string>

// [messages]
struct greet {
  std::string who;
};
struct count_greetings {};
// [/messages]

// [actor]
class greeter : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    // One handler per message type; a message none of them takes is unhandled.
    akt::match(
        ctx,
        [&](const greet& g) {
          ++greeted_;
          std::printf("hello, %s\n", g.who.c_str());
        },
        [&](const count_greetings&, auto& c) { c.reply(greeted_); });  // the reply to an ask
  }

 private:
  int greeted_ = 0;  // only this actor touches it: no lock needed
};
// [/actor]

int main() {
  // [system]
  akt::actor_system sys("hello");
  if (!sys.start()) return 1;

  akt::result<akt::pid> greeter_pid = sys.spawn<greeter>("greeter");
  if (!greeter_pid) {
    std::printf("spawn failed: %s\n", greeter_pid.error().message().c_str());
    return 1;
  }
  akt::pid g = *greeter_pid;

  // tell returns an akt::error: ok, or why it was refused (it is [[nodiscard]]).
  if (akt::error e = g.tell(greet{"world"})) std::printf("refused: %s\n", e.message().c_str());
  if (akt::error e = g.tell(greet{"akt"})) std::printf("refused: %s\n", e.message().c_str());

  akt::result<int> n = g.ask<int>(count_greetings{}, std::chrono::seconds(1));
  if (n)
    std::printf("greeted %d times\n", *n);
  else
    std::printf("ask failed: %s\n", n.error().message().c_str());

  sys.stop();
  // [/system]
  return 0;
}
