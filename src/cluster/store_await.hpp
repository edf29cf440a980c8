#pragma once
// Waiting for one store call from a thread that may block (never a dispatcher worker): the
// cluster's joins, claims, releases and reads that a caller waits for.

#include <chrono>
#include <future>
#include <memory>
#include <utility>

#include "akt/cluster/store.hpp"

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

}  // namespace akt::cluster::detail
