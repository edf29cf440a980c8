// Membership over the in-process store: joining, leaving, names, fencing, and what membership
// tells remoting. Real systems with remoting on loopback, real time (lease TTL 2 s).
#include <gtest/gtest.h>

#include "cluster/cluster_support.hpp"

namespace {

using namespace akt::cluster_test;
using akt::errc;
using akt::test::eventually;

TEST(Cluster_Membership, NodesSeeEachOtherAndACleanStopIsSeenAsLeftAtOnce) {
  auto store = std::make_shared<test_store>();
  // A lease of 60 s: a node seen leaving within the waits below left by its revoke, not by
  // its lease's expiry.
  auto long_lease = [&](const char* n) {
    auto cfg = cluster_node_config(store, n);
    cfg.cluster->lease_ttl = 60s;
    return cfg;
  };
  akt::actor_system a("a", long_lease("a"));
  akt::actor_system b("b", long_lease("b"));
  akt::actor_system c("c", long_lease("c"));
  cluster_events seen_by_a(a);
  ASSERT_TRUE(a.start());
  ASSERT_TRUE(b.start());
  ASSERT_TRUE(c.start());
  for (auto* s : {&a, &b, &c}) ASSERT_TRUE(akt::cluster::wait_ready(*s, 5s));
  const std::vector<std::string> all{"a", "b", "c"};
  for (auto* s : {&a, &b, &c}) {
    EXPECT_TRUE(eventually([&] { return member_names(*s) == all; }, 10s));
  }
  EXPECT_TRUE(eventually([&] { return seen_by_a.saw_joined("b") && seen_by_a.saw_joined("c"); }));
  auto me = akt::cluster::self(b);
  ASSERT_TRUE(me);
  EXPECT_EQ(me->address, b.address());
  EXPECT_NE(me->epoch, 0);
  // A clean stop revokes the lease: the others see it leave long before its TTL could pass.
  ASSERT_TRUE(c.stop());
  EXPECT_TRUE(eventually([&] { return seen_by_a.saw_left("c"); }, 10s)) << "seen at the revoke";
  EXPECT_EQ(member_names(a), (std::vector<std::string>{"a", "b"}));
}

TEST(Cluster_Config, InvalidSettingsAreRefusedAtStartNamingTheField) {
  auto store = std::make_shared<test_store>();
  struct bad_case {
    const char* field;
    void (*spoil)(akt::system_config&);
  };
  const bad_case cases[] = {
      {"cluster_name", [](akt::system_config& c) { c.cluster->cluster_name = ""; }},
      {"node_name", [](akt::system_config& c) { c.cluster->node_name = "has space"; }},
      {"store", [](akt::system_config& c) { c.cluster->store = nullptr; }},
      {"lease_ttl", [](akt::system_config& c) { c.cluster->lease_ttl = 1s; }},
      {"fence_margin", [](akt::system_config& c) { c.cluster->fence_margin = 1500ms; }},
      {"roles",
       [](akt::system_config& c) {
         c.cluster->roles = {"ok", "not ok"};
       }},
      {"grain_kinds", [](akt::system_config& c) { c.cluster->grain_kinds = {""}; }},
      {"remote", [](akt::system_config& c) { c.remote.reset(); }},
  };
  for (const auto& bc : cases) {
    akt::system_config cfg = cluster_node_config(store, "n");
    bc.spoil(cfg);
    akt::actor_system sys("bad", cfg);
    akt::result<void> r = sys.start();
    ASSERT_FALSE(r) << bc.field;
    EXPECT_EQ(r.code(), errc::invalid_cluster_config) << bc.field;
    EXPECT_NE(r.error().message().find(bc.field), std::string::npos) << r.error().message();
  }
}

TEST(Cluster_Config, ASecondLiveNodeOfTheSameNameIsRefused) {
  auto store = std::make_shared<test_store>();
  akt::actor_system first("first", cluster_node_config(store, "same"));
  ASSERT_TRUE(first.start());
  auto cfg = cluster_node_config(store, "same");
  cfg.cluster->start_wait = 500ms;  // the live holder renews: waiting longer changes nothing
  akt::actor_system second("second", cfg);
  akt::result<void> r = second.start();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::invalid_cluster_config) << r.error().message();
  EXPECT_NE(r.error().message().find("node_name"), std::string::npos);
  EXPECT_EQ(member_names(first), (std::vector<std::string>{"same"}));
}

// An earlier process of this node's name left its record on a lease that nobody renews (it was
// killed): a restart waits for that lease to expire, or revokes it when told the process is gone.
TEST(Cluster_Config, ARestartedNodeWaitsForItsOldLeaseOrRevokesItWhenToldTheOldProcessIsGone) {
  auto store = std::make_shared<test_store>();
  auto plant_old_record = [&](const std::string& node) {
    auto raw = store->data.connect("old-" + node);
    auto p = std::make_shared<std::promise<bool>>();
    raw->grant_lease(2s, [&, p, node](akt::result<akt::cluster::lease_grant> g) {
      if (!g) return p->set_value(false);
      raw->put_if_absent(
          "/akt/test/v1/members/" + node,
          "akt-member 1\naddress=akt://old@127.0.0.1:1\nincarnation=1\nepoch=" +
              std::to_string(g->id) + "\n",
          g->id, [p](akt::result<akt::cluster::op_outcome> o) { p->set_value(o && o->succeeded); });
    });
    EXPECT_TRUE(p->get_future().get());
    return raw;  // dropped: its lease is renewed by nobody
  };
  {
    auto old = plant_old_record("r1");
    old.reset();
    akt::actor_system sys("r1", cluster_node_config(store, "r1"));
    const auto before = std::chrono::steady_clock::now();
    ASSERT_TRUE(sys.start());
    EXPECT_GE(std::chrono::steady_clock::now() - before, 1s) << "it waited for the old lease";
    EXPECT_EQ(member_names(sys), (std::vector<std::string>{"r1"}));
  }
  {
    auto old = plant_old_record("r2");
    auto cfg = cluster_node_config(store, "r2");
    cfg.cluster->old_process_gone = true;
    cfg.cluster->start_wait = 1s;
    akt::actor_system sys("r2", cfg);
    ASSERT_TRUE(sys.start()) << "the old lease was revoked instead of waited for";
    auto me = akt::cluster::self(sys);
    ASSERT_TRUE(me);
    EXPECT_EQ(me->address, sys.address());
  }
}

TEST(Cluster_Config, AStoreThatDoesNotAnswerAtStartIsAClearErrorWithinTheWait) {
  auto store = std::make_shared<test_store>();
  struct dead_store final : akt::cluster::store_provider {
    std::shared_ptr<test_store> inner;
    akt::result<std::unique_ptr<akt::cluster::store>> open_store(std::string_view n) override {
      auto s = inner->open_store(n);
      if (s) inner->client(std::string(n))->cut_off(true);
      return s;
    }
  };
  auto dead = std::make_shared<dead_store>();
  dead->inner = store;
  auto cfg = cluster_node_config(dead, "lonely");
  cfg.cluster->start_wait = 1s;
  akt::actor_system sys("lonely", cfg);
  const auto before = std::chrono::steady_clock::now();
  akt::result<void> r = sys.start();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::cluster_unavailable) << r.error().message();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 10s) << "never a hang";
}

}  // namespace

namespace {

// A lost watch resumes from the last revision seen; a watch whose revision was compacted away
// reads the members in full again. Either way no join is missed.
TEST(Cluster_Membership, ALostWatchResumesAndACompactedOneReadsInFullWithoutMissingAJoin) {
  auto store = std::make_shared<test_store>();
  auto a_config = cluster_node_config(store, "a");
  a_config.cluster->lease_ttl = 60s;  // the brief cut below can never fence it
  akt::actor_system a("a", a_config);
  cluster_events seen(a);
  ASSERT_TRUE(a.start());
  ASSERT_TRUE(akt::cluster::wait_ready(a, 5s));

  store->client("a")->sever_watches();  // a lost stream: resumed from the last revision
  akt::actor_system b("b", cluster_node_config(store, "b"));
  ASSERT_TRUE(b.start());
  EXPECT_TRUE(eventually([&] { return seen.saw_joined("b"); }, 10s));

  // Cut off briefly (well within the lease): the watch ends and cannot be made again; c joins
  // and the store compacts past everything a has seen.
  store->client("a")->cut_off(true);
  akt::actor_system c("c", cluster_node_config(store, "c"));
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(store->data.compact(store->data.current_revision()));
  store->client("a")->cut_off(false);
  EXPECT_TRUE(eventually([&] { return seen.saw_joined("c"); }, 10s));
  EXPECT_EQ(member_names(a), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(seen.fenced.load(), 0);
}

}  // namespace

namespace {

struct counted final : akt::grain {
  static constexpr std::string_view akt_type_name = "test.counted";
  void on_receive(akt::grain_context& ctx) override { ctx.reply(1); }
};

TEST(Cluster_Membership, AMembersRecordCarriesItsLoadTheOthersSeeItChange) {
  auto store = std::make_shared<test_store>();
  akt::actor_system a("a", cluster_node_config(store, "a"));
  akt::actor_system b("b", cluster_node_config(store, "b"));
  ASSERT_TRUE(a.start());
  ASSERT_TRUE(b.start());
  ASSERT_FALSE(akt::register_grain_kind<counted>(b));
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(akt::ask_grain<int>(b, {"test.counted", "g" + std::to_string(i)}, 0, 5s));
  auto load_of_b = [&] {
    for (const auto& m : akt::cluster::members(a))
      if (m.name == "b") return m.load;
    return std::uint64_t{0};
  };
  EXPECT_TRUE(eventually([&] { return load_of_b() == 3; }, 10s)) << load_of_b();
  // b learns that its write took when the store's answer reaches it, which may come after a's
  // watch showed the new record.
  EXPECT_TRUE(eventually([&] { return akt::cluster::self(b)->load == 3u; }, 10s));
}

}  // namespace
