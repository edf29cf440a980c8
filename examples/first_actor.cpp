// The README's first program: one actor, one tell. Quoted by README.md.

// [program]
#include <akt/akt.hpp>

struct greet {
  std::string who;
};

class greeter : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    akt::match(ctx, [](const greet& g) { std::printf("hello, %s\n", g.who.c_str()); });
  }  // any other message: unhandled (a dead letter; an asker gets errc::unhandled)
};

int main() {
  akt::actor_system sys("hello");
  if (!sys.start()) return 1;
  auto g = sys.spawn<greeter>("greeter");  // akt::result<akt::pid>
  if (!g) return 1;
  if (akt::error e = g->tell(greet{"world"}))  // [[nodiscard]]: ok, or why it was refused
    std::printf("refused: %s\n", e.message().c_str());
  return sys.stop() ? 0 : 1;
}
// [/program]
