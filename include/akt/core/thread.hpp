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

}  // namespace akt::detail
