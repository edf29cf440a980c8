#pragma once
// The rules of grains across the nodes of a cluster (goakt-grains.md "Activation guarantee",
// "During shutdown"), each a function named after the rule, run by tests on the in-process
// store (tests/cluster/cluster_grains_test.cpp) and on etcd (tests/etcd/etcd_grains_test.cpp):
// a grain_backend says which store the cluster's nodes use.
#include <gtest/gtest.h>

#include <akt/testkit/local_cluster.hpp>

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "cluster/cluster_support.hpp"

namespace akt::grain_rules {

using namespace akt::cluster_test;
using akt::errc;
using akt::grain_identity;
using akt::test::eventually;

// What every activation of the test's grains did, across the nodes of one process.
struct ledger {
  std::mutex mutex;
  std::map<std::string, int> active;          // identity -> activations running now
  std::map<std::string, int> activations;     // identity -> on_activate calls that succeeded
  std::map<std::string, std::string> where;   // identity -> node of its last activation
  std::map<std::string, std::int64_t> token;  // identity -> last activation's fencing token
  int most_at_once = 0;                       // the most activations of one identity at once
  // A grain named hold-* waits in on_deactivate until release_hold (bounded).
  std::atomic<bool> holding{false}, release_hold{false};
  void reset() {
    holding = false;
    release_hold = false;
    std::lock_guard<std::mutex> lock(mutex);
    active.clear();
    activations.clear();
    where.clear();
    token.clear();
    most_at_once = 0;
  }
  int count(const std::string& id) {
    std::lock_guard<std::mutex> lock(mutex);
    return activations[id];
  }
  std::string node_of(const std::string& id) {
    std::lock_guard<std::mutex> lock(mutex);
    return where[id];
  }
};
inline ledger g_ledger;

// Answers an int32 with the running sum (int64) of what it was sent in this activation.
struct tally final : akt::grain {
  static constexpr std::string_view akt_type_name = "test.tally";
  std::int64_t sum = 0;
  akt::error on_activate(akt::grain_props& props) override {
    const std::string id = props.identity().str();
    if (props.identity().name.rfind("fail", 0) == 0)
      return akt::error(errc::invalid_argument, "this grain refuses to activate");
    std::lock_guard<std::mutex> lock(g_ledger.mutex);
    const int now = ++g_ledger.active[id];
    g_ledger.most_at_once = std::max(g_ledger.most_at_once, now);
    ++g_ledger.activations[id];
    g_ledger.where[id] = props.system().name();
    g_ledger.token[id] = props.fencing_token();
    return {};
  }
  akt::error on_deactivate(akt::grain_props& props) override {
    if (props.identity().name.rfind("hold", 0) == 0) {
      g_ledger.holding = true;
      (void)eventually([] { return g_ledger.release_hold.load(); }, 10s);
    }
    std::lock_guard<std::mutex> lock(g_ledger.mutex);
    --g_ledger.active[props.identity().str()];
    return {};
  }
  void on_receive(akt::grain_context& ctx) override {
    if (const auto* v = ctx.get_if<std::int32_t>()) {
      sum += *v;
      ctx.reply(sum);
    } else if (ctx.is<std::string>()) {
      ctx.reply(ctx.fencing_token());
    } else {
      ctx.unhandled();
    }
  }
};

inline akt::testkit::local_cluster_options options(std::chrono::milliseconds idle = 10min,
                                                   std::chrono::seconds ttl = 2s) {
  akt::testkit::local_cluster_options o;
  o.lease_ttl = ttl;
  o.prepare = [idle](akt::actor_system& s, std::size_t) {
    akt::grain_options g;
    g.deactivate_after = idle;
    (void)akt::with_grain_default_options<tally>(s, g);
  };
  return o;
}

inline grain_identity tally_id(std::string name) { return {"test.tally", std::move(name)}; }

// Which store the nodes of a test use: the local_cluster's own in-process store (provider null),
// or another (etcd), under a cluster name of its own.
struct grain_backend {
  std::shared_ptr<akt::cluster::store_provider> provider;
  std::string cluster = "test";
  akt::testkit::local_cluster_options apply(akt::testkit::local_cluster_options o) const {
    o.store = provider;
    o.cluster = cluster;
    return o;
  }
  std::unique_ptr<akt::cluster::store> open(akt::testkit::local_cluster& c,
                                            const std::string& who) const {
    auto s = provider ? provider->open_store(who) : c.store().open_store(who);
    EXPECT_TRUE(s) << s.error().message();
    return s ? std::move(*s) : nullptr;
  }
  std::string claim_key(const grain_identity& id) const {
    return "/akt/" + cluster + "/v1/grains/" + id.kind + "/" + id.name;
  }
};

inline akt::result<akt::cluster::range_result> read_key(const grain_backend& b,
                                                        akt::testkit::local_cluster& c,
                                                        const std::string& key) {
  auto client = b.open(c, "test-reader");
  if (!client) return errc::cluster_unavailable;
  std::promise<akt::result<akt::cluster::range_result>> p;
  client->get(key, [&p](akt::result<akt::cluster::range_result> r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}

// The claim of id as the store holds it now (create_revision 0: none).
inline akt::cluster::key_value claim_of(const grain_backend& b, akt::testkit::local_cluster& c,
                                        const grain_identity& id) {
  auto r = read_key(b, c, b.claim_key(id));
  if (!r || r->kvs.empty()) return {};
  return r->kvs.front();
}

// The store's revision now (every write raises it).
inline akt::cluster::revision store_revision(const grain_backend& b,
                                             akt::testkit::local_cluster& c) {
  auto r = read_key(b, c, "/akt/" + b.cluster + "/v1/none");
  return r ? r->header_revision : -1;
}

inline bool owner_is(const akt::cluster::key_value& kv, const std::string& node) {
  return kv.create_revision != 0 && kv.value.find("owner=" + node + "\n") != std::string::npos;
}

// Nodes that list the kind in their records, with roles (node 2: "vault", the others: "front"),
// and the kind's placement options; hosts(i) says which nodes register it.
inline akt::testkit::local_cluster_options placed(
    akt::grain_placement_strategy strategy, std::string role = "",
    std::function<bool(std::size_t)> hosts = nullptr) {
  akt::testkit::local_cluster_options o;
  o.lease_ttl = 10s;
  o.prepare = [strategy, role, hosts](akt::actor_system& s, std::size_t i) {
    if (hosts && !hosts(i)) return;
    akt::grain_options g;
    g.placement = strategy;
    if (!role.empty()) g.role = role;
    (void)akt::with_grain_default_options<tally>(s, g);
  };
  o.configure = [](akt::cluster_config& cc, std::size_t i) {
    cc.grain_kinds = {"test.tally"};
    cc.roles = {i == 2 ? "vault" : "front"};
  };
  return o;
}

inline void AGrainIsClaimedInTheRegistryBeforeItActivatesAndItsTokenIsTheClaimRevision(
    const grain_backend& b) {
  g_ledger.reset();
  akt::testkit::local_cluster c(2, b.apply(options()));
  ASSERT_TRUE(c.start());
  const grain_identity id = tally_id("claimed");
  auto token = akt::ask_grain<std::int64_t>(c.node(0), id, std::string("token"), 5s);
  ASSERT_TRUE(token) << token.error().message();
  const akt::cluster::key_value kv = claim_of(b, c, id);
  ASSERT_TRUE(owner_is(kv, "node-0")) << kv.value;
  EXPECT_EQ(*token, kv.create_revision) << "the context's token is the claim's create revision";
  EXPECT_EQ(g_ledger.token[id.str()], kv.create_revision) << "and so is on_activate's";
  EXPECT_NE(kv.lease, 0) << "on the owner's lease: it vanishes with it";
  EXPECT_EQ(kv.lease, akt::cluster::self(c.node(0))->epoch);
}

inline void AMessageFromAnyNodeReachesTheOneActivationOfItsIdentity(const grain_backend& b) {
  g_ledger.reset();
  akt::testkit::local_cluster c(3, b.apply(options()));
  ASSERT_TRUE(c.start());
  constexpr int k_grains = 12;
  std::atomic<int> failures{0};
  std::vector<std::thread> callers;
  for (std::size_t n = 0; n < 3; ++n) {
    callers.emplace_back([&, n] {
      for (int round = 0; round < 5; ++round) {
        for (int g = 0; g < k_grains; ++g) {
          auto r = akt::ask_grain<std::int64_t>(c.node(n), tally_id("g" + std::to_string(g)),
                                                std::int32_t{1}, 10s);
          if (!r) {
            ++failures;
            ADD_FAILURE() << "node " << n << ": " << r.error().message();
          }
        }
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(g_ledger.most_at_once, 1) << "never two activations of one identity at once";
  for (int g = 0; g < k_grains; ++g) {
    const grain_identity id = tally_id("g" + std::to_string(g));
    EXPECT_EQ(g_ledger.count(id.str()), 1) << id.str() << " activated once in the cluster";
    // Every message reached that activation: its sum counts all fifteen.
    auto sum = akt::ask_grain<std::int64_t>(c.node(g % 3), id, std::int32_t{0}, 5s);
    ASSERT_TRUE(sum) << sum.error().message();
    EXPECT_EQ(*sum, 15) << id.str();
  }
}

inline void AKnownOwnerIsReachedWithoutWritingToTheRegistry(const grain_backend& b) {
  g_ledger.reset();
  akt::testkit::local_cluster c(2, b.apply(options()));
  ASSERT_TRUE(c.start());
  const grain_identity id = tally_id("known");
  ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(0), id, std::int32_t{1}, 5s));
  ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(1), id, std::int32_t{1}, 5s));  // learns it
  const akt::cluster::revision before = store_revision(b, c);
  for (int i = 0; i < 50; ++i)
    ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(1), id, std::int32_t{1}, 5s));
  ASSERT_TRUE(akt::tell_grain(c.node(1), id, std::int32_t{1}, {.one_way = true}) == akt::error());
  EXPECT_EQ(store_revision(b, c), before) << "no claim was written for a known owner";
  EXPECT_EQ(g_ledger.node_of(id.str()), "node-0");
  EXPECT_EQ(g_ledger.count(id.str()), 1);
}

inline void AnActivationThatFailsRollsBackItsClaimAndTheCallerGetsTheError(const grain_backend& b) {
  g_ledger.reset();
  akt::testkit::local_cluster c(2, b.apply(options()));
  ASSERT_TRUE(c.start());
  const grain_identity id = tally_id("fail-once");
  auto r = akt::ask_grain<std::int64_t>(c.node(0), id, std::int32_t{1}, 5s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::invalid_argument) << r.error().message();
  EXPECT_TRUE(eventually([&] { return claim_of(b, c, id).create_revision == 0; }))
      << "the claim is released when on_activate failed";
  auto other = akt::ask_grain<std::int64_t>(c.node(1), id, std::int32_t{1}, 5s);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.code(), errc::invalid_argument) << "the other node may claim it and try";
}

inline void PassivationReleasesTheClaimAndTheNextActivationHasAGreaterToken(
    const grain_backend& b) {
  g_ledger.reset();
  akt::testkit::local_cluster c(2, b.apply(options(100ms)));
  ASSERT_TRUE(c.start());
  const grain_identity id = tally_id("idle");
  ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(0), id, std::int32_t{1}, 5s));
  const std::int64_t first = claim_of(b, c, id).create_revision;
  ASSERT_NE(first, 0);
  ASSERT_TRUE(eventually([&] { return claim_of(b, c, id).create_revision == 0; }, 10s))
      << "the idle deactivation released the claim";
  // Free now: the next message activates it where it is sent from (placement is local).
  auto r = akt::ask_grain<std::int64_t>(c.node(1), id, std::int32_t{1}, 5s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, 1) << "a fresh activation";
  const akt::cluster::key_value kv = claim_of(b, c, id);
  EXPECT_TRUE(owner_is(kv, "node-1")) << kv.value;
  EXPECT_GT(kv.create_revision, first) << "fencing tokens grow with every claim of an identity";
  EXPECT_EQ(g_ledger.most_at_once, 1);
}

inline void ACleanStopReleasesItsGrainsAndTheNextCallActivatesThemOnTheCaller(
    const grain_backend& b) {
  g_ledger.reset();
  akt::testkit::local_cluster c(2, b.apply(options(10min, 60s)));  // only the stop can free them
  ASSERT_TRUE(c.start());
  for (int g = 0; g < 5; ++g)
    ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(0), tally_id("s" + std::to_string(g)),
                                             std::int32_t{1}, 5s));
  for (int g = 0; g < 5; ++g)  // node 1 learns the owner
    ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(1), tally_id("s" + std::to_string(g)),
                                             std::int32_t{1}, 5s));
  ASSERT_TRUE(c.stop(0));
  for (int g = 0; g < 5; ++g) {
    const grain_identity id = tally_id("s" + std::to_string(g));
    auto r = akt::ask_grain<std::int64_t>(c.node(1), id, std::int32_t{1}, 5s);
    ASSERT_TRUE(r) << id.str() << ": " << r.error().message();
    EXPECT_EQ(g_ledger.node_of(id.str()), "node-1");
  }
  EXPECT_EQ(g_ledger.most_at_once, 1);
}

inline void DuringARollingRestartCallersSeeNoError(const grain_backend& b) {
  // Each node in turn stops cleanly and comes back while callers on the others keep asking:
  // a refusal by a stopping owner (marked) releases its entry and the message goes once more.
  g_ledger.reset();
  akt::testkit::local_cluster c(3, b.apply(options(10min, 60s)));
  ASSERT_TRUE(c.start());
  constexpr int k_grains = 6;
  std::atomic<bool> done{false};
  std::atomic<int> calls{0};
  std::mutex errors_mutex;
  std::vector<std::string> errors;
  auto caller = [&](std::size_t node) {
    while (!done.load()) {
      for (int g = 0; g < k_grains && !done.load(); ++g) {
        auto r = akt::ask_grain<std::int64_t>(c.node(node), tally_id("r" + std::to_string(g)),
                                              std::int32_t{1}, 10s);
        ++calls;
        if (!r) {
          std::lock_guard<std::mutex> lock(errors_mutex);
          errors.push_back("node-" + std::to_string(node) + ": " + r.error().message());
        }
      }
    }
  };
  // The grains live on nodes 0 and 1, which restart in turn; node 2 is the caller that stays.
  for (int g = 0; g < k_grains; ++g) {
    const grain_identity id = tally_id("r" + std::to_string(g));
    ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(g % 2), id, std::int32_t{1}, 5s));
    ASSERT_EQ(g_ledger.node_of(id.str()), akt::testkit::local_cluster::name(g % 2));
  }
  std::thread t(caller, 2);
  for (std::size_t n = 0; n < 2; ++n) {
    const int before = calls.load();
    ASSERT_TRUE(eventually([&] { return calls.load() > before + 2 * k_grains; }, 20s));
    ASSERT_TRUE(c.stop(n));
    ASSERT_TRUE(c.restart(n));
  }
  const int before = calls.load();
  EXPECT_TRUE(eventually([&] { return calls.load() > before + 2 * k_grains; }, 20s));
  done = true;
  t.join();
  std::lock_guard<std::mutex> lock(errors_mutex);
  EXPECT_TRUE(errors.empty()) << errors.size() << " errors, the first: " << errors.front();
  EXPECT_EQ(g_ledger.most_at_once, 1);
  int moved = 0;
  for (int g = 0; g < k_grains; ++g)
    moved += g_ledger.count(tally_id("r" + std::to_string(g)).str()) > 1 ? 1 : 0;
  EXPECT_EQ(moved, k_grains) << "every grain was activated again after its owner stopped";
}

inline void ACrashedOwnersGrainsActivateElsewhereOnceMembershipDroppedIt(const grain_backend& b) {
  g_ledger.reset();
  akt::testkit::local_cluster c(2, b.apply(options()));
  ASSERT_TRUE(c.start());
  const grain_identity id = tally_id("crash");
  ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(0), id, std::int32_t{1}, 5s));
  ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(1), id, std::int32_t{1}, 5s));
  ASSERT_TRUE(c.crash(0));
  // Until membership drops node 0 (its lease expires), calls fail with the transport error and
  // its entry is kept; once dropped, the next call activates the grain on the caller.
  akt::result<std::int64_t> r = errc::request_timeout;
  ASSERT_TRUE(eventually(
      [&] {
        r = akt::ask_grain<std::int64_t>(c.node(1), id, std::int32_t{1}, 2s);
        if (!r) {
          EXPECT_TRUE(r.code() == errc::unreachable || r.code() == errc::connection_lost ||
                      r.code() == errc::dead || r.code() == errc::request_timeout)
              << r.error().message();
        }
        return r.has_value();
      },
      20s));
  EXPECT_EQ(*r, 1) << "a fresh activation";
  EXPECT_EQ(g_ledger.node_of(id.str()), "node-1");
  EXPECT_TRUE(owner_is(claim_of(b, c, id), "node-1"));
}

inline void AClaimRecordThatDoesNotDecodeIsTreatedAsAForeignClaim(const grain_backend& b) {
  g_ledger.reset();
  akt::testkit::local_cluster c(1, b.apply(options()));
  ASSERT_TRUE(c.start());
  const grain_identity id = tally_id("garbled");
  auto client = b.open(c, "vandal");
  std::promise<akt::result<akt::cluster::op_outcome>> p;
  client->put_if_absent(b.claim_key(id), "not a claim record\x01", 0,
                        [&p](akt::result<akt::cluster::op_outcome> r) { p.set_value(r); });
  ASSERT_TRUE(p.get_future().get());
  auto r = akt::ask_grain<std::int64_t>(c.node(0), id, std::int32_t{1}, 5s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::not_owner) << r.error().message();
  EXPECT_EQ(g_ledger.count(id.str()), 0) << "never activated over somebody else's claim";
  ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(0), tally_id("fine"), std::int32_t{1}, 5s))
      << "the node keeps working";
}

inline void ANodeThatDoesNotHostTheKindRoutesToItsOwnerAndNeverHostsIt(const grain_backend& b) {
  g_ledger.reset();
  akt::testkit::local_cluster_options o = b.apply(options());
  o.prepare = [](akt::actor_system& s, std::size_t i) {
    if (i == 0) (void)akt::register_grain_kind<tally>(s);
  };
  akt::testkit::local_cluster c(2, o);
  ASSERT_TRUE(c.start());
  const grain_identity id = tally_id("hosted");
  auto unknown = akt::ask_grain<std::int64_t>(c.node(1), id, std::int32_t{1}, 5s);
  ASSERT_FALSE(unknown) << "nobody owns it yet and node 1 cannot host it";
  EXPECT_EQ(unknown.code(), errc::grain_kind_unknown) << unknown.error().message();
  ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(0), id, std::int32_t{1}, 5s));
  auto routed = akt::ask_grain<std::int64_t>(c.node(1), id, std::int32_t{1}, 5s);
  ASSERT_TRUE(routed) << routed.error().message();
  EXPECT_EQ(*routed, 2);
  EXPECT_EQ(g_ledger.node_of(id.str()), "node-0");
}

inline void RoundRobinSpreadsNewGrainsOverTheNodesThatHostTheKind(const grain_backend& b) {
  g_ledger.reset();
  akt::testkit::local_cluster c(3, b.apply(placed(akt::grain_placement_strategy::round_robin)));
  ASSERT_TRUE(c.start());
  std::map<std::string, int> per_node;
  for (int g = 0; g < 9; ++g) {
    const grain_identity id = tally_id("rr" + std::to_string(g));
    auto r = akt::ask_grain<std::int64_t>(c.node(0), id, std::string("token"), 5s);
    ASSERT_TRUE(r) << r.error().message();
    ++per_node[g_ledger.node_of(id.str())];
    // Claimed for the node that runs it, and that node activated it under that claim.
    const akt::cluster::key_value kv = claim_of(b, c, id);
    EXPECT_TRUE(owner_is(kv, g_ledger.node_of(id.str()))) << kv.value;
    EXPECT_EQ(*r, kv.create_revision) << "the activation adopted the claim made for it";
  }
  EXPECT_EQ(per_node.size(), 3u) << "every node got some";
  for (const auto& [node, n] : per_node) EXPECT_EQ(n, 3) << node;
  EXPECT_EQ(g_ledger.most_at_once, 1);
}

inline void ARoleLimitsWhichNodesHostAKind(const grain_backend& b) {
  g_ledger.reset();
  akt::testkit::local_cluster c(3, b.apply(placed(akt::grain_placement_strategy::local, "vault")));
  ASSERT_TRUE(c.start());
  for (int g = 0; g < 4; ++g) {
    const grain_identity id = tally_id("v" + std::to_string(g));
    auto r = akt::ask_grain<std::int64_t>(c.node(g % 2), id, std::int32_t{1}, 5s);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(g_ledger.node_of(id.str()), "node-2") << "only node 2 has the role";
  }
}

inline void ANodeThatIsShuttingDownTakesNoNewGrainsAndReleasesWhatItRan(const grain_backend& b) {
  g_ledger.reset();
  akt::testkit::local_cluster c(2, b.apply(options(10min, 60s)));  // only the stop frees them
  ASSERT_TRUE(c.start());
  const grain_identity held = tally_id("hold-1");
  ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(0), held, std::int32_t{1}, 5s));
  akt::actor_system& stopping = c.node(0);
  std::thread stopper([&] { (void)stopping.stop(); });
  // The shutdown has begun: node 0's grain is deactivating (held in on_deactivate).
  ASSERT_TRUE(eventually([] { return g_ledger.holding.load(); }, 10s));
  auto refused = akt::ask_grain<std::int64_t>(stopping, tally_id("new"), std::int32_t{1}, 5s);
  ASSERT_FALSE(refused) << "a node that is shutting down activates no new grain";
  EXPECT_EQ(refused.code(), errc::system_shutting_down) << refused.error().message();
  EXPECT_EQ(g_ledger.count(tally_id("new").str()), 0);
  g_ledger.release_hold = true;
  stopper.join();
  EXPECT_EQ(claim_of(b, c, held).create_revision, 0) << "its deactivation released the claim";
  // Another node takes the grain over at once, with a greater token.
  auto moved = akt::ask_grain<std::int64_t>(c.node(1), held, std::int32_t{1}, 5s);
  ASSERT_TRUE(moved) << moved.error().message();
  EXPECT_EQ(*moved, 1);
  EXPECT_EQ(g_ledger.node_of(held.str()), "node-1");
}

inline void AGrainStillActiveOnAStoppingNodeIsNotActivatedElsewhereBeforeItDeactivated(
    const grain_backend& b) {
  // A message that reaches a stopping node's grain while it deactivates waits for the end of
  // on_deactivate and is refused only then; the caller's node takes the grain over after that,
  // never while the old activation may still run a handler.
  g_ledger.reset();
  akt::testkit::local_cluster c(2, b.apply(options(10min, 60s)));
  ASSERT_TRUE(c.start());
  const grain_identity held = tally_id("hold-2");
  ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(0), held, std::int32_t{1}, 5s));
  ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(1), held, std::int32_t{1}, 5s));  // learns it
  akt::actor_system& stopping = c.node(0);
  std::thread stopper([&] { (void)stopping.stop(); });
  ASSERT_TRUE(eventually([] { return g_ledger.holding.load(); }, 10s));
  std::promise<akt::result<std::int64_t>> answer;
  auto f = answer.get_future();
  std::thread caller([&] {
    answer.set_value(akt::ask_grain<std::int64_t>(c.node(1), held, std::int32_t{1}, 20s));
  });
  EXPECT_EQ(f.wait_for(300ms), std::future_status::timeout)
      << "no answer while the old activation is in on_deactivate";
  g_ledger.release_hold = true;
  ASSERT_EQ(f.wait_for(20s), std::future_status::ready);
  caller.join();
  stopper.join();
  auto r = f.get();
  ASSERT_TRUE(r) << "sent once more, to a fresh activation: " << r.error().message();
  EXPECT_EQ(*r, 1);
  EXPECT_EQ(g_ledger.node_of(held.str()), "node-1");
  EXPECT_EQ(g_ledger.most_at_once, 1) << "never two activations at once";
}

}  // namespace akt::grain_rules
