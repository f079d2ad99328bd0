// waiting_rule.cc — when a denied request waits, and when a queue's next waiter is decided (see
// include/ratelimit/waiting_rule.h; called by the waiting service and the simulator alike).
#include "ratelimit/waiting_rule.h"

namespace ratelimit::algo {

bool waitable(const Decision& d) {
  return !d.allowed && d.reason == DecisionReason::kOverLimit && d.retry_after > Micros{0};
}

bool worth_waiting(const Decision& d, bool concurrency, int64_t now_us, int64_t deadline_us) {
  if (!waitable(d)) return false;
  return concurrency || now_us + d.retry_after.count() <= deadline_us;
}

bool next_decided_at_once(const Decision& d, bool concurrency, int64_t next_cost) {
  return concurrency ? d.remaining >= next_cost : d.remaining > 0;
}

}  // namespace ratelimit::algo
