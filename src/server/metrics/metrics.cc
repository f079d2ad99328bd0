// metrics.cc — the Prometheus text rendering of ratelimitd's metrics, each family as declared
// in the one table, src/common/metric_families.h. Hot-path updates are relaxed atomics;
// rendering reads them without a lock.
#include "metrics.h"

#include <cstdio>
#include <iterator>

#include "metric_families.h"
#include "ratelimit/version.h"

namespace ratelimit::server {
namespace {

using metrics::Family;
using metrics::kStoreFamilies;
static_assert(std::size(kStoreFamilies) == kStoreMetricCount, "a row of metric_families.h per StoreMetric");
using metrics::kBuildInfo, metrics::kRequests, metrics::kDecisions, metrics::kStoreErrors, metrics::kLatency,
    metrics::kConnections, metrics::kRejected, metrics::kRejectedPerClient, metrics::kFirstByteTimeouts,
    metrics::kGeneration, metrics::kReloads, metrics::kLastReload, metrics::kLastReloadTime;

// By Endpoint value; rendered in kEndpointOrder (the order /metrics has always shown).
constexpr const char* kEndpointNames[kEndpointCount] = {"other", "acquire", "peek", "reset", "forward_auth",
                                                        "healthz", "readyz", "metrics", "json",
                                                        "healthcheck", "rlconfig", "leases", "resp_throttle", "resp",
                                                        "resp_acquire", "resp_peek", "resp_reset", "resp_leases", "report",
                                                        "resp_report"};
constexpr Endpoint kEndpointOrder[kEndpointCount] = {
    Endpoint::kAcquire, Endpoint::kPeek,        Endpoint::kReset,    Endpoint::kForwardAuth,
    Endpoint::kHealthz, Endpoint::kReadyz,      Endpoint::kMetrics,  Endpoint::kJson,
    Endpoint::kHealthcheck, Endpoint::kRlconfig, Endpoint::kOther,   Endpoint::kLeases,
    Endpoint::kRespThrottle, Endpoint::kResp, Endpoint::kRespAcquire, Endpoint::kRespPeek,
    Endpoint::kRespReset, Endpoint::kRespLeases,
    Endpoint::kReport, Endpoint::kRespReport};
constexpr const char* kOutcomeNames[kOutcomeCount] = {"allowed", "denied", "shadow_denied",
                                                      "failed_open", "failed_closed", "conflict"};
constexpr unsigned kStatuses[12] = {200, 400, 401, 403, 404, 405, 408, 413, 429, 431, 500, 503};
// Upper bounds in nanoseconds, and as Prometheus `le` labels.
constexpr uint64_t kBoundsNs[19] = {1'000, 2'500, 5'000, 10'000, 25'000, 50'000, 100'000,
                                    250'000, 500'000, 1'000'000, 2'500'000, 5'000'000,
                                    10'000'000, 25'000'000, 50'000'000, 100'000'000,
                                    250'000'000, 500'000'000, 1'000'000'000};
constexpr const char* kBoundLabels[19] = {"1e-06", "2.5e-06", "5e-06", "1e-05", "2.5e-05",
                                          "5e-05", "0.0001", "0.00025", "0.0005", "0.001",
                                          "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
                                          "0.25", "0.5", "1"};

void header(std::string& out, const Family& f) { metrics::append_family_header(out, f); }

void sample(std::string& out, const char* name, std::string_view labels, uint64_t v) {
  out += name;
  if (!labels.empty()) {
    out += '{';
    out += labels;
    out += '}';
  }
  out += ' ';
  out += std::to_string(v);
  out += '\n';
}

}  // namespace

void append_metric(std::string& out, StoreMetric m, uint64_t value) {
  const Family& f = kStoreFamilies[static_cast<size_t>(m)];
  header(out, f);
  sample(out, f.name, {}, value);
}

void append_metric_header(std::string& out, StoreMetric m) { header(out, kStoreFamilies[static_cast<size_t>(m)]); }

const char* metric_name(StoreMetric m) { return kStoreFamilies[static_cast<size_t>(m)].name; }

void render_wait_stats(const service::WaitStats& s, std::string& out) {
  append_metric(out, StoreMetric::kWaitWaitedTotal, s.waited);
  append_metric(out, StoreMetric::kWaitAdmittedTotal, s.admitted);
  append_metric(out, StoreMetric::kWaitTimedOutTotal, s.timed_out);
  append_metric(out, StoreMetric::kWaitQueueFullTotal, s.queue_full);
  append_metric(out, StoreMetric::kWaitCancelledTotal, s.cancelled);
  append_metric(out, StoreMetric::kWaitShutdownTotal, s.shutdown);
  append_metric(out, StoreMetric::kWaitHeldTotal, s.held);
  append_metric(out, StoreMetric::kWaitWakeupsTotal, s.wakeups);
  append_metric(out, StoreMetric::kWaitWaiting, static_cast<uint64_t>(std::max<int64_t>(0, s.waiting)));
}

Metrics::Metrics() = default;

size_t Metrics::status_slot(unsigned status) {
  for (size_t i = 0; i < 12; ++i) {
    if (kStatuses[i] == status) return i;
  }
  return 10;  // anything unexpected is counted as 500
}

void Metrics::count_request(Endpoint e, unsigned status) {
  requests_[static_cast<size_t>(e)][status_slot(status)].fetch_add(1, std::memory_order_relaxed);
}

PolicyCounters* Metrics::policy(std::string_view name) {
  MutexLock lock(mu_);
  auto it = policies_.find(name);
  if (it == policies_.end()) {
    it = policies_.emplace(std::string(name), std::make_unique<PolicyCounters>()).first;
  }
  return it->second.get();
}

void Metrics::observe_decision(std::chrono::nanoseconds latency) {
  const auto ns = static_cast<uint64_t>(latency.count() < 0 ? 0 : latency.count());
  size_t b = 0;
  while (b < kBuckets && ns > kBoundsNs[b]) ++b;
  latency_buckets_[b].fetch_add(1, std::memory_order_relaxed);
  latency_count_.fetch_add(1, std::memory_order_relaxed);
  latency_sum_ns_.fetch_add(ns, std::memory_order_relaxed);
}

void Metrics::record_reload(bool ok, int64_t unix_seconds) {
  (ok ? reloads_ok_ : reloads_failed_).fetch_add(1, std::memory_order_relaxed);
  last_reload_ok_.store(ok ? 1 : 0, std::memory_order_relaxed);
  last_reload_time_.store(unix_seconds, std::memory_order_relaxed);
}

void Metrics::add_extra(std::function<void(std::string&)> extra) {
  MutexLock lock(mu_);
  extras_.push_back(std::move(extra));
}

OutcomeTotals Metrics::totals() const {
  OutcomeTotals t;
  t.store_errors = store_errors_.load(std::memory_order_relaxed);
  MutexLock lock(mu_);
  for (const auto& [name, c] : policies_) {
    t.failed_open += c->outcomes[static_cast<size_t>(Outcome::kFailedOpen)].load(std::memory_order_relaxed);
    t.failed_closed += c->outcomes[static_cast<size_t>(Outcome::kFailedClosed)].load(std::memory_order_relaxed);
  }
  return t;
}

std::string Metrics::render() const {
  std::string out;
  out.reserve(8192);
  header(out, kBuildInfo);
  // Neither label can hold a quote, backslash or newline (a semantic version, git describe).
  sample(out, kBuildInfo.name,
         std::string("version=\"") + RATELIMIT_VERSION + "\",revision=\"" + RATELIMIT_GIT_DESCRIBE + '"', 1);
  header(out, kRequests);
  for (const Endpoint endpoint : kEndpointOrder) {
    const auto e = static_cast<size_t>(endpoint);
    for (size_t s = 0; s < 12; ++s) {
      const uint64_t v = requests_[e][s].load(std::memory_order_relaxed);
      if (v == 0) continue;
      std::string labels = "endpoint=\"";
      labels += kEndpointNames[e];
      labels += "\",status=\"";
      labels += std::to_string(kStatuses[s]);
      labels += '"';
      sample(out, kRequests.name, labels, v);
    }
  }
  std::vector<std::function<void(std::string&)>> extras;
  {
    MutexLock lock(mu_);
    header(out, kDecisions);
    for (const auto& [name, c] : policies_) {
      for (size_t o = 0; o < kOutcomeCount; ++o) {
        // Policy names are [A-Za-z0-9_.:-]: nothing to escape in a label value.
        std::string labels = "policy=\"" + name + "\",outcome=\"" + kOutcomeNames[o] + '"';
        sample(out, kDecisions.name, labels, c->outcomes[o].load(std::memory_order_relaxed));
      }
    }
    extras = extras_;
  }
  header(out, kStoreErrors);
  sample(out, kStoreErrors.name, "", store_errors_.load(std::memory_order_relaxed));

  header(out, kLatency);
  uint64_t cumulative = 0;
  for (size_t b = 0; b < kBuckets; ++b) {
    cumulative += latency_buckets_[b].load(std::memory_order_relaxed);
    sample(out, "ratelimitd_decision_duration_seconds_bucket",
           std::string("le=\"") + kBoundLabels[b] + '"', cumulative);
  }
  const uint64_t count = latency_count_.load(std::memory_order_relaxed);
  sample(out, "ratelimitd_decision_duration_seconds_bucket", "le=\"+Inf\"", count);
  char sum[64];
  std::snprintf(sum, sizeof sum, "%.9f",
                static_cast<double>(latency_sum_ns_.load(std::memory_order_relaxed)) / 1e9);
  out += "ratelimitd_decision_duration_seconds_sum ";
  out += sum;
  out += '\n';
  sample(out, "ratelimitd_decision_duration_seconds_count", "", count);

  header(out, kConnections);
  const int64_t open = open_connections_.load(std::memory_order_relaxed);
  sample(out, kConnections.name, "", static_cast<uint64_t>(open < 0 ? 0 : open));
  header(out, kRejected);
  sample(out, kRejected.name, "", rejected_connections_.load(std::memory_order_relaxed));
  header(out, kRejectedPerClient);
  sample(out, kRejectedPerClient.name, "", rejected_per_client_.load(std::memory_order_relaxed));
  header(out, kFirstByteTimeouts);
  sample(out, kFirstByteTimeouts.name, "", first_byte_timeouts_.load(std::memory_order_relaxed));
  header(out, kGeneration);
  sample(out, kGeneration.name, "", generation_.load(std::memory_order_relaxed));
  header(out, kReloads);
  sample(out, kReloads.name, "result=\"ok\"", reloads_ok_.load(std::memory_order_relaxed));
  sample(out, kReloads.name, "result=\"error\"", reloads_failed_.load(std::memory_order_relaxed));
  header(out, kLastReload);
  sample(out, kLastReload.name, "", static_cast<uint64_t>(last_reload_ok_.load(std::memory_order_relaxed)));
  header(out, kLastReloadTime);
  sample(out, kLastReloadTime.name, "", static_cast<uint64_t>(last_reload_time_.load(std::memory_order_relaxed)));
  for (const auto& extra : extras) extra(out);
  return out;
}

}  // namespace ratelimit::server
