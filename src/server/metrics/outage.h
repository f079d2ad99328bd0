// outage.h — the store-outage log: one line when the store stops being able to decide, one when
// it is back (how long, and what happened meanwhile), never one line per request.
//
// Why a watcher apart from the request path: during an outage every decision fails open or
// closed; logging each would flood the log (the issue measured 898k fail-open decisions with no
// line at all — the other extreme). A poll of the readiness probe and the totals is cheap and
// gives operators the two lines they need.
// Invariants: lines only on a transition (ready -> not ready, not ready -> ready); the counts
// of the "back" line are the differences since the "down" line.
// Thread-safety: one OutageWatch is driven by one thread (the control loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "ratelimit/status.h"

namespace ratelimit::server {

// What happened to decisions so far (cumulative, from the metrics).
struct OutcomeTotals {
  uint64_t failed_open = 0;
  uint64_t failed_closed = 0;
  uint64_t store_errors = 0;
};

class OutageWatch {
 public:
  // Feeds one observation; returns the line to log ("warn" level) on a transition.
  std::optional<std::string> observe(const Status& ready, const OutcomeTotals& totals,
                                     std::chrono::steady_clock::time_point now);
  bool in_outage() const { return down_; }

 private:
  bool down_ = false;
  OutcomeTotals at_start_;
  std::chrono::steady_clock::time_point since_{};
};

}  // namespace ratelimit::server
