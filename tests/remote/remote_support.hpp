#pragma once
// Shared by the remote tests: nodes on loopback, serializable test messages, actors.

#include <akt/akt.hpp>
#include <akt/remote/remote.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "support/test_support.hpp"

namespace akt::remote_test {

using namespace std::chrono_literals;

// A small registered struct (plain, with an encode/decode pair).
struct ping {
  static constexpr std::string_view akt_type_name = "akt.test.ping";
  std::int64_t n = 0;
};
// Registered nowhere: sending it to another node is refused.
struct unregistered {
  int x = 0;
};

inline void register_test_messages() {
  static const bool done = [] {
    (void)akt::remote::register_message<ping>(
        [](const ping& p, akt::remote::byte_writer& w) -> akt::error {
          w.put_u64(static_cast<std::uint64_t>(p.n));
          return {};
        },
        [](akt::remote::byte_reader& r) -> akt::result<ping> {
          std::uint64_t v = 0;
          if (!r.get_u64(v)) return akt::error(akt::errc::decode_failed, "short ping");
          return ping{static_cast<std::int64_t>(v)};
        });
    return true;
  }();
  (void)done;
}

inline akt::system_config node_config(akt::remote_config rc = {}, bool manual_time = false) {
  akt::system_config cfg;
  cfg.manual_time = manual_time;
  cfg.workers = 2;
  cfg.shutdown_timeout = std::chrono::seconds(10);
  // Tests that lose a node keep these short; the others never reach them.
  rc.heartbeat_interval = 100ms;
  rc.heartbeat_misses = 5;
  rc.node_lost_after = 1s;
  rc.reconnect_min = 10ms;
  rc.reconnect_max = 200ms;
  cfg.remote = rc;
  return cfg;
}

// "127.0.0.1:<port>" of a started node.
inline std::string node_of(const akt::actor_system& sys) {
  const std::string a = sys.address();  // akt://name@host:port
  return a.substr(a.find('@') + 1);
}

// A node: a started system with remoting on loopback.
struct node {
  explicit node(const std::string& name, akt::remote_config rc = {}, bool manual_time = false)
      : sys(name, node_config(std::move(rc), manual_time)) {
    register_test_messages();
    started = sys.start();
  }
  akt::actor_system sys;
  akt::result<void> started;
  std::string where() const { return node_of(sys); }
};

// Records what it receives; answers pings with n + 1, strings with their upper case.
struct journal {
  std::mutex mutex;
  std::vector<std::int64_t> pings;
  std::vector<std::string> texts;
  std::atomic<int> received{0};
  void add(std::int64_t n) {
    std::lock_guard<std::mutex> lock(mutex);
    pings.push_back(n);
  }
  void add(std::string s) {
    std::lock_guard<std::mutex> lock(mutex);
    texts.push_back(std::move(s));
  }
  std::vector<std::int64_t> ping_list() {
    std::lock_guard<std::mutex> lock(mutex);
    return pings;
  }
};

class echo final : public akt::actor {
 public:
  explicit echo(std::shared_ptr<journal> j) : j_(std::move(j)) {}
  void receive(akt::receive_context& ctx) override {
    akt::match(
        ctx,
        [&](const ping& p, auto& c) {
          j_->add(p.n);
          j_->received++;
          if (c.expects_reply()) c.reply(ping{p.n + 1});
        },
        [&](const std::string& s, auto& c) {
          j_->add(s);
          j_->received++;
          if (s == "throw") throw std::runtime_error("the handler threw");
          if (s == "refuse") {
            c.reply_error(akt::error(akt::errc::system_shutting_down, "said the handler"));
            return;
          }
          if (s == "ignore") return;
          if (s == "reply-to-sender") {
            (void)c.tell(c.sender(), std::string("back"));
            return;
          }
          std::string up = s;
          for (char& ch : up) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
          if (c.expects_reply()) c.reply(up);
        });
  }

 private:
  std::shared_ptr<journal> j_;
};

}  // namespace akt::remote_test
