#pragma once
// Waiting for one store call from a thread that may block (never a dispatcher worker): the
// cluster's joins, claims, releases and reads that a caller waits for.

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "akt/cluster/store.hpp"
#include "cluster/claim_batcher.hpp"

namespace akt::cluster::detail {

// Runs start(done) (one store call, or anything that calls done exactly once) and waits for
// done, at most `limit`: past it, errc::cluster_registry_timeout (the store completes every call
// within its own call timeout; this bound only protects against one that breaks that). The
// promise is shared with the callback, so a completion after the wait gave up is harmless.
template <class T, class F>
result<T> await_store(F&& start, std::chrono::nanoseconds limit) {
  auto p = std::make_shared<std::promise<result<T>>>();
  std::future<result<T>> f = p->get_future();
  start(store_callback<T>([p](result<T> r) { p->set_value(std::move(r)); }));
  if (f.wait_for(limit) != std::future_status::ready) {
    return error(errc::cluster_registry_timeout, "the store did not answer");
  }
  return f.get();
}

// One conditional write through an owner's claim batcher, waited for (at most `limit`): the
// owner's `m` guards the batcher's lifetime (reset on close, `closed` set), so the submission
// cannot race with the batcher's destruction; a closed owner answers system_shutting_down with
// `closed_why`. Never called from a dispatcher worker (it blocks).
inline result<op_outcome> await_batched(store_op op, std::mutex& m, const bool& closed,
                                        const std::unique_ptr<claim_batcher>& batcher,
                                        const char* closed_why, std::chrono::nanoseconds limit) {
  return await_store<op_outcome>(
      [&](store_callback<op_outcome> done) {
        std::lock_guard<std::mutex> lock(m);
        if (closed || !batcher) {
          done(error(errc::system_shutting_down, closed_why));
          return;
        }
        batcher->submit(std::move(op), std::move(done));
      },
      limit);
}

}  // namespace akt::cluster::detail
