#pragma once
// The two process-wide envelope pools as test parameters: the actor pool and its grain sibling
// (goakt-context-pools.md section 11). The envelope pool invariant tests are typed over both, so
// each invariant is checked against each pool. Also: a helper that empties one shard of a shared
// pool for the length of a test.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "actor/system_core.hpp"
#include "akt/actor/receive_context.hpp"
#include "akt/pool/sharded_pool.hpp"

namespace akt::test {

// The actor pool: untagged home shards.
struct actor_envelopes {
  static constexpr const char* name = "actor";
  static constexpr std::uint32_t tag = 0;
  static sharded_pool<receive_context>& pool() { return detail::envelope_pool(); }
  static sharded_pool<receive_context>& sibling() { return detail::grain_envelope_pool(); }
};

// The grain pool: home shards carry its tag, so envelopes find their way back to it.
struct grain_envelopes {
  static constexpr const char* name = "grain";
  static constexpr std::uint32_t tag = detail::k_grain_pool_tag;
  static sharded_pool<receive_context>& pool() { return detail::grain_envelope_pool(); }
  static sharded_pool<receive_context>& sibling() { return detail::envelope_pool(); }
};

using envelope_pool_kinds = ::testing::Types<actor_envelopes, grain_envelopes>;

// Test names EnvelopePool/actor.X and EnvelopePool/grain.X.
struct envelope_pool_names {
  template <class P>
  static std::string GetName(int) {
    return P::name;
  }
};

// Takes every object out of one shard of a pool that others may have filled (the process-wide
// pools), and puts them back when the test is done with the shard.
template <class T>
class drained_shard {
 public:
  drained_shard(sharded_pool<T>& pool, std::uint32_t shard) : pool_(pool) {
    // A bounded loop: a lost race makes get allocate instead of pop; it never spins forever.
    for (std::size_t i = 0; i < 4 * pool_limits::shard_capacity && pool.shard_size(shard) > 0;
         ++i) {
      held_.push_back(pool.get(shard));
    }
  }
  drained_shard(const drained_shard&) = delete;
  drained_shard& operator=(const drained_shard&) = delete;
  ~drained_shard() {
    for (T* obj : held_) pool_.put(obj);
  }
  const std::vector<T*>& held() const { return held_; }
  bool holds(const T* obj) const {
    return std::find(held_.begin(), held_.end(), obj) != held_.end();
  }

 private:
  sharded_pool<T>& pool_;
  std::vector<T*> held_;
};

}  // namespace akt::test
