// outage.cc — see outage.h.
#include "outage.h"

namespace ratelimit::server {

std::optional<std::string> OutageWatch::observe(const Status& ready, const OutcomeTotals& totals,
                                                std::chrono::steady_clock::time_point now) {
  if (!down_ && !ready.is_ok()) {
    down_ = true;
    at_start_ = totals;
    since_ = now;
    return "store unavailable: " + ready.message() +
           " (decisions follow store.on_failure until it is back; /readyz answers 503)";
  }
  if (down_ && ready.is_ok()) {
    down_ = false;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - since_).count();
    return "store available again after " + std::to_string(ms / 1000) + "." +
           std::to_string(ms % 1000 / 100) + "s: " +
           std::to_string(totals.failed_open - at_start_.failed_open) + " decisions failed open, " +
           std::to_string(totals.failed_closed - at_start_.failed_closed) + " failed closed, " +
           std::to_string(totals.store_errors - at_start_.store_errors) + " store errors during the outage";
  }
  return std::nullopt;
}

}  // namespace ratelimit::server
