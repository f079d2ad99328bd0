// lease_metrics.cc — LeaseMetrics (lease_metrics.h): this process's per-policy lease counts,
// its table of live leases, and their Prometheus text; moved out of lease_api.cc, which keeps
// the endpoint only.
// Invariants: every member runs under mu_; tracked_ is the sum of every policy's live.size()
// and never passes kMaxTracked.
#include "lease_metrics.h"

#include <cstdio>

#include "metrics.h"

namespace ratelimit::server {

void LeaseMetrics::expire_locked(PerPolicy& p, Clock::time_point now) {
  for (auto it = p.live.begin(); it != p.live.end();) {
    if (it->second <= now) {
      ++p.expired;
      --tracked_;
      it = p.live.erase(it);
    } else {
      ++it;
    }
  }
}

void LeaseMetrics::acquired(const std::string& policy, const LeaseId& id, Micros ttl) {
  MutexLock lock(mu_);
  PerPolicy& p = policies_[policy];
  ++p.acquired;
  if (tracked_ < kMaxTracked && p.live.emplace(id.to_hex(), Clock::now() + ttl).second) ++tracked_;
}

void LeaseMetrics::denied(const std::string& policy) {
  MutexLock lock(mu_);
  ++policies_[policy].denied;
}

void LeaseMetrics::released(const std::string& policy, const LeaseId& id, bool held) {
  MutexLock lock(mu_);
  PerPolicy& p = policies_[policy];
  auto it = p.live.find(id.to_hex());
  if (held) ++p.released;
  if (it == p.live.end()) return;
  // Tracked here: freed now, or (not held) lapsed before this late release.
  if (!held) ++p.expired;
  p.live.erase(it);
  --tracked_;
}

void LeaseMetrics::learned(const std::string& policy, int64_t limit) {
  MutexLock lock(mu_);
  policies_[policy].learned_limit = limit;
}

void LeaseMetrics::released_elsewhere(std::string_view policy, const LeaseId& id) {
  MutexLock lock(mu_);
  auto pit = policies_.find(policy);
  if (pit == policies_.end()) return;
  auto it = pit->second.live.find(id.to_hex());
  if (it == pit->second.live.end()) return;
  pit->second.live.erase(it);  // freed on time: not held, and it will not lapse here
  --tracked_;
}

void LeaseMetrics::renewed(const std::string& policy, const LeaseId& id, Micros ttl, bool held) {
  MutexLock lock(mu_);
  PerPolicy& p = policies_[policy];
  auto it = p.live.find(id.to_hex());
  if (held) {
    ++p.renewed;
    if (it != p.live.end()) it->second = Clock::now() + ttl;
    return;
  }
  if (it == p.live.end()) return;
  ++p.expired;
  p.live.erase(it);
  --tracked_;
}

void LeaseMetrics::classed(const std::string& policy, const std::string& klass, bool admitted, bool refused,
                           bool queued, Micros waited) {
  MutexLock lock(mu_);
  PerClass& c = classes_[{policy, klass}];
  c.admitted += admitted ? 1 : 0;
  c.refused += refused ? 1 : 0;
  if (queued) {
    ++c.waited;
    c.wait_us += waited.count();
  }
}

// The priority classes' families (LeaseMetrics::classed), by policy and class.
void LeaseMetrics::render_classes(std::string& out) {
  struct Family {
    StoreMetric metric;
    uint64_t PerClass::*field;  // null: the wait seconds
  };
  static constexpr Family kFamilies[] = {
      {StoreMetric::kLeaseClassAdmittedTotal, &PerClass::admitted},
      {StoreMetric::kLeaseClassRefusedTotal, &PerClass::refused},
      {StoreMetric::kLeaseClassWaitedTotal, &PerClass::waited},
      {StoreMetric::kLeaseClassWaitSecondsTotal, nullptr},
  };
  for (const Family& f : kFamilies) {
    append_metric_header(out, f.metric);
    for (const auto& [at, c] : classes_) {
      out += metric_name(f.metric);
      out += "{policy=\"" + at.first + "\",class=\"" + at.second + "\"} ";
      if (f.field != nullptr) {
        out += std::to_string(c.*f.field);
      } else {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.6f", static_cast<double>(c.wait_us) / 1e6);
        out += buf;
      }
      out += '\n';
    }
  }
}

void LeaseMetrics::render(std::string& out) {
  MutexLock lock(mu_);
  const auto now = Clock::now();
  for (auto& [name, p] : policies_) expire_locked(p, now);
  struct Family {
    StoreMetric metric;
    uint64_t PerPolicy::*field;  // null: the held gauge (live leases)
  };
  static constexpr Family kFamilies[] = {
      {StoreMetric::kLeasesAcquiredTotal, &PerPolicy::acquired}, {StoreMetric::kLeasesDeniedTotal, &PerPolicy::denied},
      {StoreMetric::kLeasesReleasedTotal, &PerPolicy::released}, {StoreMetric::kLeasesRenewedTotal, &PerPolicy::renewed},
      {StoreMetric::kLeasesExpiredTotal, &PerPolicy::expired},   {StoreMetric::kLeasesHeld, nullptr},
  };
  for (const Family& f : kFamilies) {
    append_metric_header(out, f.metric);
    for (const auto& [name, p] : policies_) {
      out += metric_name(f.metric);
      out += "{policy=\"" + name + "\"} " + std::to_string(f.field != nullptr ? p.*f.field : p.live.size()) + '\n';
    }
  }
  append_metric_header(out, StoreMetric::kAdaptiveLimit);
  for (const auto& [name, p] : policies_) {
    if (p.learned_limit < 0) continue;
    out += metric_name(StoreMetric::kAdaptiveLimit);
    out += "{policy=\"" + name + "\"} " + std::to_string(p.learned_limit) + '\n';
  }
  render_classes(out);
}

}  // namespace ratelimit::server
