#pragma once
// Supervision: what happens to an actor when its handler fails (throws, or reports an error with
// receive_context::fail).
//
//   auto sup = akt::supervisor(akt::supervision_strategy::one_for_one)
//                  .on<std::runtime_error>(akt::directive::restart)
//                  .on(akt::errc::request_timeout, akt::directive::resume)
//                  .otherwise(akt::directive::stop)
//                  .with_retry(3, std::chrono::seconds(10))
//                  .with_backoff(std::chrono::milliseconds(10), std::chrono::seconds(1));
//   sys.spawn<worker>("w", {.supervisor = sup});
//
// Directives:
//   resume    keep the actor and its state; the failing message is dropped
//   restart   post_stop on the old instance, a fresh instance, pre_start; the mailbox and its
//             queued messages are kept; children are stopped first
//   stop      stop the actor (children first); queued messages become dead letters
//   escalate  the failure becomes the parent's: the parent's own supervisor decides for the
//             parent (a top-level actor that escalates is stopped)
// While a decision is pending (a back-off delay, an escalation) the actor processes no user
// messages; they wait in its mailbox.
//
// Rules are tried in the order they were added; the first that matches decides. Exception rules
// match by type (derived types match their base's rule); error rules match by errc. A failure no
// rule matches gets the `otherwise` directive (stop unless set).
//
// Retry limit: more than max_retries restarts within `window` stops the actor instead, with
// errc::retry_limit_exceeded. Back-off: the n-th consecutive restart waits
// min(initial * 2^(n-1), max) first; the count resets after a quiet period of max.
//
// one_for_all: the directive chosen for a failing actor is applied to it and to all its
// siblings (the other children of its parent; for top-level actors, only itself).
//
// A supervisor is a value: copy it freely; actors share it read-only.

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "akt/core/error.hpp"

namespace akt {

enum class directive : std::uint8_t { resume, restart, stop, escalate };
enum class supervision_strategy : std::uint8_t { one_for_one, one_for_all };

std::string_view to_string(directive d) noexcept;

class supervisor {
 public:
  explicit supervisor(supervision_strategy s = supervision_strategy::one_for_one) : strategy_(s) {}

  template <class Exception>
  supervisor& on(directive d) {
    rules_.push_back(rule{[](const std::exception_ptr& e, const error&) {
                            if (!e) return false;
                            try {
                              std::rethrow_exception(e);
                            } catch (const Exception&) {
                              return true;
                            } catch (...) {
                              return false;
                            }
                          },
                          d});
    return *this;
  }
  supervisor& on(errc code, directive d) {
    rules_.push_back(rule{
        [code](const std::exception_ptr& e, const error& err) { return !e && err.code() == code; },
        d});
    return *this;
  }
  supervisor& otherwise(directive d) {
    otherwise_ = d;
    return *this;
  }
  supervisor& with_retry(unsigned max_retries, std::chrono::nanoseconds window) {
    max_retries_ = max_retries;
    window_ = window;
    return *this;
  }
  supervisor& with_backoff(std::chrono::nanoseconds initial, std::chrono::nanoseconds max) {
    backoff_initial_ = initial;
    backoff_max_ = max;
    return *this;
  }

  supervision_strategy strategy() const noexcept { return strategy_; }
  // The directive for a failure: an exception (null when the handler reported `err` instead).
  directive decide(const std::exception_ptr& exception, const error& err) const {
    for (const auto& r : rules_) {
      if (r.matches(exception, err)) return r.action;
    }
    return otherwise_;
  }
  unsigned max_retries() const noexcept { return max_retries_; }
  std::chrono::nanoseconds retry_window() const noexcept { return window_; }
  std::chrono::nanoseconds backoff_initial() const noexcept { return backoff_initial_; }
  std::chrono::nanoseconds backoff_max() const noexcept { return backoff_max_; }

 private:
  struct rule {
    std::function<bool(const std::exception_ptr&, const error&)> matches;
    directive action;
  };
  supervision_strategy strategy_;
  std::vector<rule> rules_;
  directive otherwise_ = directive::stop;
  unsigned max_retries_ = 0;  // 0: no limit
  std::chrono::nanoseconds window_ = std::chrono::nanoseconds::zero();
  std::chrono::nanoseconds backoff_initial_ = std::chrono::nanoseconds::zero();  // 0: none
  std::chrono::nanoseconds backoff_max_ = std::chrono::nanoseconds::zero();
};

}  // namespace akt
