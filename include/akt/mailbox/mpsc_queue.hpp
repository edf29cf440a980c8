#pragma once
// Intrusive multi-producer single-consumer queues (after Dmitry Vyukov's node-based MPSC queue).
//
// Contract (both queues)
// - push: any thread, wait-free (one atomic exchange and one store).
// - pop / empty-check / reset: one consumer at a time (the thread running the actor's turn; the
//   consumer may be a different thread each turn, ordered by the dispatch state hand-off).
// - FIFO in the order the producers' exchanges took effect.
// - Memory: no allocation; a node is linked through its own `next`.
// - A push is visible to empty() as soon as its exchange took effect, even while its link is
//   still pending; pop returns null in that window (the consumer retries later).
//
// Ordering: the producer's exchange on head_ is seq_cst so that, with the dispatcher's seq_cst
// dispatch-state operations, either the producer sees the actor Idle or the consumer sees the
// new head (the no-lost-wake-up argument). The link store is release; pop's load is acquire.

#include <atomic>

#include "akt/mailbox/envelope.hpp"

namespace akt {

// The sentinel-style algorithm as free functions over a producer end (head) and a consumer end
// (tail), so that an owner can lay the two ends out on different cache lines: a producer's
// exchange on head and the consumer's write of tail must not share a line, or every message
// costs a cache-line ping-pong between the two cores.
namespace mpsc {

inline void push(std::atomic<mpsc_node*>& head, mpsc_node* n) noexcept {
  n->next.store(nullptr, std::memory_order_relaxed);
  mpsc_node* prev = head.exchange(n, std::memory_order_seq_cst);
  prev->next.store(n, std::memory_order_release);
}

// The next node, or null when empty or when the next push's link is still pending. On success
// `retired` receives the previous sentinel (null when that was `stub`); the caller owns it.
inline mpsc_node* pop(mpsc_node*& tail, const mpsc_node* stub, mpsc_node*& retired) noexcept {
  mpsc_node* t = tail;
  mpsc_node* next = t->next.load(std::memory_order_acquire);
  if (next == nullptr) return nullptr;
  tail = next;
  retired = t == stub ? nullptr : t;
  return next;
}

}  // namespace mpsc

// Sentinel-style queue: the node pop returns stays in the queue as its sentinel until the next
// pop, which hands it back as `retired` for recycling. So a dequeued envelope stays valid for
// the whole turn that processes it, and the consumer recycles it one dequeue later. The first
// sentinel is an embedded stub node, so an empty queue costs no allocation. head_ and tail_ sit
// on separate cache lines (128 bytes in all).
class mpsc_queue {
 public:
  mpsc_queue() noexcept : head_(&stub_), tail_(&stub_) {}
  mpsc_queue(const mpsc_queue&) = delete;
  mpsc_queue& operator=(const mpsc_queue&) = delete;

  void push(mpsc_node* n) noexcept { mpsc::push(head_, n); }

  mpsc_node* pop(mpsc_node*& retired) noexcept { return mpsc::pop(tail_, &stub_, retired); }

  // True when no push has taken effect beyond the sentinel. Consumer only. seq_cst: see the
  // header comment.
  bool empty() const noexcept { return head_.load(std::memory_order_seq_cst) == tail_; }

  // The current sentinel (consumer only), for empty_since.
  const mpsc_node* sentinel() const noexcept { return tail_; }
  // Any thread: false when a push took effect after `sentinel` was the sentinel. Lets a consumer
  // that just gave up ownership re-check without reading consumer-private state; a stale
  // sentinel can only make it answer "not empty".
  bool empty_since(const mpsc_node* sentinel) const noexcept {
    return head_.load(std::memory_order_seq_cst) == sentinel;
  }

  // Consumer, when the queue is drained and no producer can push any more: hands back the
  // current sentinel (null when it is the stub) and returns the queue to its initial state.
  mpsc_node* take_sentinel() noexcept {
    mpsc_node* s = tail_ == &stub_ ? nullptr : tail_;
    stub_.next.store(nullptr, std::memory_order_relaxed);
    head_.store(&stub_, std::memory_order_relaxed);
    tail_ = &stub_;
    return s;
  }

 private:
  alignas(64) std::atomic<mpsc_node*> head_;  // writers: producers (exchange); readers: empty()
  alignas(64) mpsc_node* tail_;               // consumer only: the current sentinel
  mpsc_node stub_;
};

// Detaching queue: pop removes the node completely, so a node can be pushed again right after
// it was popped (used for queues of re-armed sub-queues). The stub is pushed back when the queue
// runs dry.
class mpsc_node_queue {
 public:  // head_ and tail_ on separate cache lines, as in mpsc_queue
  mpsc_node_queue() noexcept : head_(&stub_), tail_(&stub_) {}
  mpsc_node_queue(const mpsc_node_queue&) = delete;
  mpsc_node_queue& operator=(const mpsc_node_queue&) = delete;

  void push(mpsc_node* n) noexcept {
    n->next.store(nullptr, std::memory_order_relaxed);
    mpsc_node* prev = head_.exchange(n, std::memory_order_seq_cst);
    prev->next.store(n, std::memory_order_release);
  }

  // The oldest node, detached, or null when empty or a link is pending.
  mpsc_node* pop() noexcept {
    mpsc_node* tail = tail_;
    mpsc_node* next = tail->next.load(std::memory_order_acquire);
    if (tail == &stub_) {
      if (next == nullptr) return nullptr;
      tail_ = next;
      tail = next;
      next = next->next.load(std::memory_order_acquire);
    }
    if (next != nullptr) {
      tail_ = next;
      return tail;
    }
    if (tail != head_.load(std::memory_order_seq_cst)) return nullptr;  // a push is mid-link
    push(&stub_);
    next = tail->next.load(std::memory_order_acquire);
    if (next != nullptr) {
      tail_ = next;
      return tail;
    }
    return nullptr;
  }

  bool empty() const noexcept {
    const mpsc_node* h = head_.load(std::memory_order_seq_cst);
    return h == &stub_ && tail_ == &stub_;
  }

 private:
  alignas(64) std::atomic<mpsc_node*> head_;
  alignas(64) mpsc_node* tail_;
  mpsc_node stub_;
};

// Lock-free LIFO intake that the consumer empties in one exchange and reverses into arrival
// order. Push is a CAS loop (lock-free); take_all is wait-free. Used by the system queue and the
// priority mailboxes.
class intake_stack {
 public:
  void push(mpsc_node* n) noexcept {
    mpsc_node* top = top_.load(std::memory_order_relaxed);
    do {
      n->next.store(top, std::memory_order_relaxed);
    } while (
        !top_.compare_exchange_weak(top, n, std::memory_order_seq_cst, std::memory_order_relaxed));
  }
  // Everything pushed so far, oldest first, linked through next (null-terminated). An empty
  // intake costs one load and no write (the consumer polls it before every user message).
  mpsc_node* take_all() noexcept {
    if (top_.load(std::memory_order_relaxed) == nullptr) return nullptr;
    mpsc_node* n = top_.exchange(nullptr, std::memory_order_acquire);
    mpsc_node* fifo = nullptr;
    while (n != nullptr) {
      mpsc_node* next = n->next.load(std::memory_order_relaxed);
      n->next.store(fifo, std::memory_order_relaxed);
      fifo = n;
      n = next;
    }
    return fifo;
  }
  // Any thread.
  bool empty() const noexcept { return top_.load(std::memory_order_seq_cst) == nullptr; }
  // A hint for polling; a push racing with it is seen by the next poll.
  bool empty_relaxed() const noexcept { return top_.load(std::memory_order_relaxed) == nullptr; }

 private:
  std::atomic<mpsc_node*> top_{nullptr};  // writers: push (CAS), take_all (exchange)
};

}  // namespace akt
