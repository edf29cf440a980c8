#pragma once
// Actors and helpers shared by the actor tests.

#include <akt/akt.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/test_support.hpp"

namespace akt::test {

struct add {
  long n;
};
struct get_total {};
struct echo {
  long n;
};
struct sleep_for {
  std::chrono::milliseconds d;
};
struct boom {
  std::string why;
};
// Occupies the actor until *release turns true (tests use it instead of sleeps, so that what
// they check does not depend on timing). The actor sets `held` when it starts holding.
struct hold {
  std::atomic<bool>* release;
};

// Keeps a running total and a log of the values it saw, in order; answers get_total with the
// total and echo with n + 1.
class recorder : public akt::actor {
 public:
  struct shared {
    std::atomic<long> total{0};
    std::atomic<long> count{0};
    std::mutex mutex;
    std::vector<long> log;
    std::atomic<int> pre_starts{0};
    std::atomic<int> post_stops{0};
    std::atomic<std::thread::id> last_thread{};
    std::atomic<bool> held{false};
  };
  explicit recorder(shared* s) : s_(s) {}

  akt::error pre_start(akt::actor_context&) override {
    s_->pre_starts.fetch_add(1);
    return {};
  }
  void post_stop(akt::actor_context&) override { s_->post_stops.fetch_add(1); }

  void receive(akt::receive_context& ctx) override {
    s_->last_thread.store(std::this_thread::get_id());
    if (auto* a = ctx.get_if<add>()) {
      {
        std::lock_guard<std::mutex> lock(s_->mutex);
        s_->log.push_back(a->n);
      }
      s_->total.fetch_add(a->n);
      s_->count.fetch_add(1);
    } else if (ctx.is<get_total>()) {
      ctx.reply(s_->total.load());
    } else if (auto* e = ctx.get_if<echo>()) {
      ctx.reply(e->n + 1);
    } else if (auto* s = ctx.get_if<sleep_for>()) {
      std::this_thread::sleep_for(s->d);
      s_->count.fetch_add(1);
    } else if (auto* h = ctx.get_if<hold>()) {
      s_->held.store(true);
      while (!h->release->load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
      s_->count.fetch_add(1);
    } else if (auto* b = ctx.get_if<boom>()) {
      throw std::runtime_error(b->why);
    } else {
      ctx.unhandled();
    }
  }

 private:
  shared* s_;
};

inline collector<akt::dead_letter, dead_letter_info> dead_letters(akt::actor_system& sys) {
  return collector<akt::dead_letter, dead_letter_info>(sys, [](const akt::dead_letter& d) {
    dead_letter_info i;
    i.type = std::string(d.msg.type_name());
    i.reason = d.reason.code();
    i.receiver = std::string(d.receiver.name());
    if (auto* v = d.msg.get_if<long>()) i.value = *v;
    if (auto* v = d.msg.get_if<int>()) i.value = *v;
    if (auto* v = d.msg.get_if<add>()) i.value = v->n;
    return i;
  });
}

}  // namespace akt::test
