#pragma once
// Per-thread facts the lower modules need without depending on the dispatcher.

namespace akt::detail {

// Set by a dispatcher worker for its own thread (writer and reader: that thread only). Mailboxes
// read it to refuse blocking a worker; ask reads it to refuse a blocking wait on a worker.
inline thread_local void* current_worker = nullptr;

// Set by runtime threads that must never block either (the timer thread while it delivers).
inline thread_local bool never_block = false;

// True on threads that must not block: dispatcher workers and the timer thread.
inline bool on_worker_thread() noexcept { return current_worker != nullptr || never_block; }

// Set by a grain around a blocking ask from inside its turn (writer and reader: that thread):
// the wait is bounded by the ask's timeout, so ask may then wait on a worker. Mailboxes still
// refuse to block the worker.
inline thread_local bool bounded_wait_allowed = false;

// Whether ask may wait for its reply on this thread.
inline bool may_wait_for_reply() noexcept { return !on_worker_thread() || bounded_wait_allowed; }

}  // namespace akt::detail
