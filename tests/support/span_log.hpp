#pragma once
// Spans for the tracing tests: a sink that collects them, waited on by condition (never a fixed
// sleep), a tracing config that sends them there, and a readable dump for failure messages.

#include <akt/akt.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace akt::test {

using namespace std::chrono_literals;

// Collects the spans a sink receives; waits on a condition, never on a fixed sleep.
struct span_log {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<span_data> spans;

  std::function<void(const span_data&)> sink() {
    return [this](const span_data& s) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        spans.push_back(s);
      }
      cv.notify_all();
    };
  }
  // The spans of `trace` once there are at least n of them (or what there is after `within`).
  std::vector<span_data> wait_for(const std::string& trace, std::size_t n,
                                  std::chrono::milliseconds within = 10s) {
    std::unique_lock<std::mutex> lock(mutex);
    std::vector<span_data> out;
    auto collect = [&] {
      out.clear();
      for (const span_data& s : spans)
        if (s.trace_id_hex() == trace) out.push_back(s);
      return out.size() >= n;
    };
    cv.wait_for(lock, within, collect);
    (void)collect();
    return out;
  }
  std::vector<span_data> all() {
    std::lock_guard<std::mutex> lock(mutex);
    return spans;
  }
};

inline akt::tracing_config tracing_into(span_log& log, double ratio = 1.0) {
  akt::tracing_config t;
  t.sampling_ratio = ratio;
  t.sink = log.sink();
  t.flush_interval = 10ms;
  return t;
}

inline std::string describe(const std::vector<span_data>& spans) {
  std::string out;
  for (const span_data& s : spans) {
    out += "\n  " + std::string(s.attribute("akt.node")) + " " + s.name + " kind " +
           std::to_string(static_cast<int>(s.kind)) + " id " + s.span_id_hex() + " parent " +
           s.parent_span_id_hex();
  }
  return out;
}

}  // namespace akt::test
