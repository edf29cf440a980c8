#pragma once
// blocking_pool: threads for work that may block (pipe_to tasks), kept off the dispatcher so a
// slow task never holds up actors.
//
// Contract: submit from any thread; tasks run in submission order on `threads` threads (a
// mutex-guarded queue: blocking work is not the hot path). Threads start on the first submit;
// each keeps a keep-alive object (from the factory given at construction) until it ends, so a
// thread stop() had to leave behind never outlives the pool's owner. stop() runs what is
// queued, waits until the deadline, detaches threads still inside a task, and returns how many;
// submit after stop returns false. With a work counter (manual time), each task counts in it
// from before it is queued until after it returned (and its captures are gone), so what a task
// sends is counted (by the dispatcher, in the same word) before the task stops counting.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace akt::detail {

class blocking_pool {
 public:
  using keep_alive_factory = std::function<std::shared_ptr<void>()>;

  blocking_pool(unsigned threads, keep_alive_factory keep_alive,
                std::atomic<std::int64_t>* work = nullptr)
      : size_(threads == 0 ? 1 : threads), keep_alive_(std::move(keep_alive)), work_(work) {}
  ~blocking_pool() { stop(); }
  blocking_pool(const blocking_pool&) = delete;
  blocking_pool& operator=(const blocking_pool&) = delete;

  bool submit(std::function<void()> task) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopped_) return false;
    if (threads_.empty()) {
      for (unsigned i = 0; i < size_; ++i) {
        threads_.emplace_back([this, keep = keep_alive_ ? keep_alive_() : nullptr] {
          loop();
          {
            std::lock_guard<std::mutex> lock(mutex_);
            ++exited_;
          }
          exited_cv_.notify_all();
        });
      }
    }
    if (work_ != nullptr) work_->fetch_add(1, std::memory_order_seq_cst);
    tasks_.push_back(std::move(task));
    lock.unlock();
    ready_.notify_one();
    return true;
  }

  unsigned stop(std::chrono::steady_clock::time_point deadline =
                    std::chrono::steady_clock::time_point::max()) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopped_) return 0;
    stopped_ = true;
    ready_.notify_all();
    const auto all_out = [this] { return exited_ == threads_.size(); };
    if (deadline == std::chrono::steady_clock::time_point::max()) {
      exited_cv_.wait(lock, all_out);
    } else {
      exited_cv_.wait_until(lock, deadline, all_out);
    }
    const auto stuck = static_cast<unsigned>(threads_.size() - exited_);
    lock.unlock();
    for (auto& t : threads_) {
      if (stuck == 0)
        t.join();
      else
        t.detach();  // which one is stuck is unknown: leave them all; they end by themselves
    }
    return stuck;
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return stopped_ || !tasks_.empty(); });
        if (tasks_.empty()) return;  // stopped and drained
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
      task = nullptr;  // its captures go before it stops counting
      if (work_ != nullptr) work_->fetch_sub(1, std::memory_order_seq_cst);
    }
  }

  const unsigned size_;
  const keep_alive_factory keep_alive_;
  std::mutex mutex_;
  std::condition_variable exited_cv_;
  std::size_t exited_ = 0;  // guarded by mutex_
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;  // guarded by mutex_
  std::vector<std::thread> threads_;         // guarded by mutex_ until stop
  bool stopped_ = false;                     // guarded by mutex_
  // Counts tasks queued or running, or null. Writers: submit (+1 before the push), the thread
  // that ran one (-1 after it returned), seq_cst (see the contract). Reader: its owner.
  std::atomic<std::int64_t>* const work_;
};

}  // namespace akt::detail
