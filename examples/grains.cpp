// Grains: bank accounts as virtual actors. An account is activated by its first message, loads its
// balance from a shared ledger, saves it when it is deactivated for being idle, and the next
// message activates it again with the saved balance. Quoted by docs/guide/04-grains.md.

#include <akt/akt.hpp>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

// [messages]
struct deposit {
  long amount;
};
struct withdraw {
  long amount;
};
struct transfer {
  akt::grain_identity to;
  long amount;
};
struct balance {};
// [/messages]

// [ledger]
// Where balances live between activations: a database client in a real program. One object,
// shared by every account through the kind's dependencies, so it must be thread-safe.
class ledger {
 public:
  long load(const std::string& account) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = balances_.find(account);
    return it == balances_.end() ? 0 : it->second;
  }
  void save(const std::string& account, long balance) {
    std::lock_guard<std::mutex> lock(mutex_);
    balances_[account] = balance;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, long> balances_;
};
// [/ledger]

// [account]
class account : public akt::grain {
 public:
  // The kind's stable name: the same on every node and in every build (akt::type_name).
  static constexpr std::string_view akt_type_name = "bank.account";

  akt::error on_activate(akt::grain_props& props) override {
    ledger_ = props.dependency<ledger>("ledger");
    if (!ledger_) return akt::error(akt::errc::invalid_argument, "no ledger");
    balance_ = ledger_->load(props.identity().name);  // the state of the last activation
    return {};
  }

  void on_receive(akt::grain_context& ctx) override {
    // One handler per message type; anything else is unhandled.
    akt::match(
        ctx,
        [&](const deposit& d, auto& c) {
          balance_ += d.amount;
          c.ack();  // an acknowledged tell returns ok
        },
        [&](const withdraw& w, auto& c) {
          if (w.amount > balance_) return c.reply_error(insufficient(w.amount));
          balance_ -= w.amount;
          c.ack();
        },
        [&](const transfer& t, auto& c) {
          if (t.amount > balance_) return c.reply_error(insufficient(t.amount));
          balance_ -= t.amount;
          // One-way, from inside: never blocks this grain; activates the target if needed.
          (void)c.tell_grain(t.to, deposit{t.amount});
          c.ack();
        },
        [&](const balance&, auto& c) { c.reply(balance_); });  // the reply to an ask
  }

  akt::error on_deactivate(akt::grain_props& props) override {
    ledger_->save(props.identity().name, balance_);
    return {};
  }

 private:
  akt::error insufficient(long asked) const {
    return akt::error(akt::errc::invalid_argument, "insufficient funds: balance " +
                                                       std::to_string(balance_) + ", asked " +
                                                       std::to_string(asked));
  }

  std::shared_ptr<ledger> ledger_;
  long balance_ = 0;  // only this activation touches it: no lock needed
};
// [/account]

int main() {
  using namespace std::chrono_literals;
  akt::actor_system sys("bank");
  if (!sys.start()) return 1;

  // [kind]
  auto store = std::make_shared<ledger>();
  auto deps = std::make_shared<akt::grain_dependencies>();
  deps->add("ledger", store);
  // Every account gets the ledger and is deactivated after 100 ms without a message.
  if (akt::with_grain_default_options<account>(sys,
                                               {.deactivate_after = 100ms, .dependencies = deps}))
    return 1;
  // [/kind]

  // [events]
  auto activated = sys.events().subscribe<akt::grain_activated>(
      [](const akt::grain_activated& e) { std::printf("  + %s\n", e.grain.str().c_str()); });
  auto deactivated = sys.events().subscribe<akt::grain_deactivated>(
      [](const akt::grain_deactivated& e) { std::printf("  - %s\n", e.grain.str().c_str()); });
  // [/events]

  // [use]
  // A ref names a grain; getting one activates nothing: the first message does.
  akt::result<akt::grain_ref<account>> alice = akt::get_grain<account>(sys, "alice");
  akt::result<akt::grain_ref<account>> bob = akt::get_grain<account>(sys, "bob");
  if (!alice || !bob) return 1;

  if (alice->tell(deposit{100})) return 1;  // waits until the account answered (ack)
  akt::error refused = alice->tell(withdraw{500});
  std::printf("withdraw 500: %s\n", refused.message().c_str());  // insufficient funds
  // One-way: returns once the message is queued; a failure would become a dead letter.
  (void)alice->tell_one_way(transfer{bob->identity(), 30});

  akt::result<long> a = alice->ask<long>(balance{}, 1s);
  akt::result<long> b = bob->ask<long>(balance{}, 1s);
  if (!a || !b) return 1;
  std::printf("alice %ld, bob %ld\n", *a, *b);  // alice 70, bob 30
  // [/use]

  // [passivation]
  // Idle for 100 ms (at most two idle periods): both accounts save and are deactivated.
  for (auto until = std::chrono::steady_clock::now() + 2s;
       !akt::active_grains(sys).empty() && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(10ms);
  std::printf("active grains: %zu, saved: alice %ld\n", akt::active_grains(sys).size(),
              store->load("alice"));
  // The next message activates alice again; on_activate reloads the saved balance.
  akt::result<long> again = alice->ask<long>(balance{}, 1s);
  if (!again || *again != 70) return 1;
  std::printf("alice after reactivation: %ld (activations so far: %llu)\n", *again,
              static_cast<unsigned long long>(akt::grain_activation_count(sys)));
  // [/passivation]

  // Stopping the system deactivates the grains still active (alice saves again).
  if (auto stopped = sys.stop(); !stopped) return 1;
  return store->load("alice") == 70 && store->load("bob") == 30 ? 0 : 1;
}
