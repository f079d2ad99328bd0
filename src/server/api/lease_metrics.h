// lease_metrics.h — LeaseMetrics: the lease families on /metrics (declared in metric_families.h's
// table), apart from the handler (lease_api.h) because the RESP lease commands and the Redis
// release feed report to it too. Per policy, leases acquired, denied, released and renewed through
// this process, and expired (granted by this process and neither released nor renewed within
// lease_ttl), and held now (granted by this process, not released, TTL not passed). Every figure is
// this process's: the sum over the instances on one Redis is the deployment's. A lease released
// through another instance is told to the one that granted it by the Redis release feed
// (released_elsewhere), so it is neither held nor expired there; while the feed is down such a
// lease counts as expired.
// Invariants: at most kMaxTracked leases are tracked per process (beyond, counted but not
// held); a tracked lease leaves the table once (released, not held on renew, released
// elsewhere, or expired on render).
// Thread-safety: one instance per process, shared by every worker; guarded by its own mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "mutex.h"
#include "ratelimit/clock.h"
#include "ratelimit/decision.h"

namespace ratelimit::server {

class LeaseMetrics {
 public:
  using Clock = std::chrono::steady_clock;
  void acquired(const std::string& policy, const LeaseId& id, Micros ttl);
  void denied(const std::string& policy);
  void released(const std::string& policy, const LeaseId& id, bool held);
  // The learned limit a lease answer of an adaptive policy gave (the gauge keeps the last).
  void learned(const std::string& policy, int64_t limit);
  void renewed(const std::string& policy, const LeaseId& id, Micros ttl, bool held);
  // An acquire of priority class `klass` answered: admitted or refused over the limit; `waited`
  // > 0 when it entered a queue (the time from its request to this answer).
  void classed(const std::string& policy, const std::string& klass, bool admitted, bool refused, bool queued,
               Micros waited);
  // A release of `id` through any process (the Redis release feed; this process's own come
  // again there and are no longer tracked): a lease granted here stops being held, uncounted.
  void released_elsewhere(std::string_view policy, const LeaseId& id);
  // Appends the lease families (Prometheus text), expiring what lapsed first.
  void render(std::string& out);

 private:
  struct PerPolicy {
    uint64_t acquired = 0, denied = 0, released = 0, renewed = 0, expired = 0;
    int64_t learned_limit = -1;  // adaptive policies: the last answered limit; -1 none
    std::unordered_map<std::string, Clock::time_point> live;  // hex id -> local expiry
  };
  struct PerClass {
    uint64_t admitted = 0, refused = 0, waited = 0;
    int64_t wait_us = 0;
  };
  // (policy, class) -> counts; bounded by the configured classes (16 per policy at most).
  std::map<std::pair<std::string, std::string>, PerClass> classes_ RL_GUARDED_BY(mu_);
  static constexpr size_t kMaxTracked = 1'000'000;  // per process; beyond, not tracked
  void expire_locked(PerPolicy& p, Clock::time_point now) RL_REQUIRES(mu_);
  void render_classes(std::string& out) RL_REQUIRES(mu_);
  Mutex mu_;
  std::map<std::string, PerPolicy, std::less<>> policies_ RL_GUARDED_BY(mu_);
  size_t tracked_ RL_GUARDED_BY(mu_) = 0;
};

}  // namespace ratelimit::server
