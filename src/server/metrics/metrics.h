// metrics.h — ratelimitd's counters, gauges and the decision-latency histogram, rendered in
// the Prometheus text format for GET /metrics.
//
// Why one place: every metric name, type and help text is declared in one table,
// src/common/metric_families.h (Envoy's per-rule statistics too), so nothing can drift apart.
// Invariants: counters only grow; per-policy counters are created on first use and never freed
// (a policy removed by a reload keeps its totals, as Prometheus counters must), so a pointer
// to them stays valid for the life of the Metrics object.
// Thread-safety: every method may be called from any thread; the hot-path methods are relaxed
// atomic increments with no lock.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "mutex.h"
#include "decision_service.h"
#include "transport_host.h"  // TransportCounters, and Endpoint as the transport declares it
#include "waiting.h"
#include "outage.h"
#include "rule_counters.h"

namespace ratelimit::server {

// A route's label in the request metrics (the transport declares it, transport_host.h, and carries
// it; Endpoint{} is its label for what no route named, hence kOther = 0).
// kJson, kHealthcheck, kRlconfig: the --envoy-env endpoints (POST /json, /healthcheck, /rlconfig).
enum class Endpoint : uint8_t {
  kOther = 0, kAcquire, kPeek, kReset, kForwardAuth, kHealthz, kReadyz, kMetrics, kJson, kHealthcheck, kRlconfig,
  kLeases, kRespThrottle, kResp, kRespAcquire, kRespPeek, kRespReset, kRespLeases, kReport,
  kRespReport
};
static_assert(Endpoint{} == Endpoint::kOther, "the transport labels unrouted answers Endpoint{}");
inline constexpr size_t kEndpointCount = 20;

// Decision outcomes are counted by the decision service, per rule (rule_counters.h).
using service::kOutcomeCount;
using service::Outcome;
using PolicyCounters = service::RuleCounters;

// The stores' families (memory, Redis, the denial cache, the lease/async modes), rendered by the callbacks
// store_factory.cc adds (Metrics::add_extra) but declared — name, type, help — in metric_families.h's
// table with every other family.
enum class StoreMetric : uint8_t {
  kRedisCommandsTotal,
  kRedisErrorsTotal,
  kRedisTimeoutsTotal,
  kRedisFailedOpenTotal,
  kRedisFailedClosedTotal,
  kRedisConnectsTotal,
  kRedisReadyConnections,
  kRedisClusterMovedTotal,
  kRedisClusterAskTotal,
  kRedisClusterRetriesTotal,
  kRedisClusterTopologyRefreshesTotal,
  kRedisEvictedKeysTotal,
  kRedisEvictionUnsafe,
  kMemoryStoreKeys,
  kMemoryStoreBytes,
  kMemoryStoreEvictionsTotal,
  kMemoryStoreEvictionsByStandingTotal,
  kMemoryStoreEvictionsForBytesTotal,
  kMemoryStoreResidueSaturatedTotal,
  kMemoryStoreResidueDroppedTotal,
  kMemoryStoreSnapshotLastSuccess,
  kMemoryStoreSnapshotLastDuration,
  kMemoryStoreSnapshotKeys,
  kMemoryStoreSnapshotFailuresTotal,
  kDenialCacheHitsTotal,
  kDenialCacheMissesTotal,
  kDenialCacheBypassedTotal,
  kDenialCacheInsertsTotal,
  kDenialCacheEvictionsTotal,
  kDenialCacheInvalidationsTotal,
  kDenialCacheEntries,
  // The lease and async consistency modes (DistributedStore, distributed_metrics.cc).
  kDistributedLocalDecisionsTotal,
  kDistributedExactPassthroughTotal,
  kDistributedFailedOpenTotal,
  kDistributedFailedClosedTotal,
  kDistributedKeys,
  kLeaseReservesTotal,
  kLeaseReserveFailuresTotal,
  kLeaseUnitsGrantedTotal,
  kLeaseUnitsReturnedTotal,
  kLeaseUnitsHeld,
  kAsyncPushesTotal,
  kAsyncPushFailuresTotal,
  kAsyncUnitsPushedTotal,
  kAsyncUnitsPending,
  kAsyncUnitsOverLimitTotal,
  kAsyncViewAgeSeconds,
  // Waiting instead of refusing (service/waiting.h).
  kWaitWaitedTotal,
  kWaitAdmittedTotal,
  kWaitTimedOutTotal,
  kWaitQueueFullTotal,
  kWaitCancelledTotal,
  kWaitShutdownTotal,
  kWaitHeldTotal,
  kWaitWakeupsTotal,
  kWaitWaiting,
  kWaitReleaseFeedSubscriptionsTotal,
  // Concurrency policies' leases through /v1/leases (LeaseMetrics, lease_api.h); by policy.
  kLeasesAcquiredTotal,
  kLeasesDeniedTotal,
  kLeasesReleasedTotal,
  kLeasesRenewedTotal,
  kLeasesExpiredTotal,
  kLeasesHeld,
  kAdaptiveLimit,
  // Priority classes of /v1/leases acquires (LeaseMetrics); by policy and class.
  kLeaseClassAdmittedTotal,
  kLeaseClassRefusedTotal,
  kLeaseClassWaitedTotal,
  kLeaseClassWaitSecondsTotal,
  // Policies counted across regions (RegionStore, distributed_metrics.cc); labelled by region.
  kRegionReachable,
  kRegionViewAgeSeconds,
  kRegionReadsTotal,
  kRegionReadFailuresTotal,
  kRegionDecisionsTotal,
  kRegionCappedTotal,
  kRegionDeniedByOthersTotal,
  kRegionUntrackedTotal,
  kRegionKeys,
};
inline constexpr size_t kStoreMetricCount = 77;

// Appends one unlabelled family (HELP, TYPE, sample) in the text format.
void append_metric(std::string& out, StoreMetric m, uint64_t value);
// Appends a family's HELP and TYPE lines only; the caller writes its labelled samples.
void append_metric_header(std::string& out, StoreMetric m);
// The family's name, for those samples.
const char* metric_name(StoreMetric m);
// The waiting service's families (kWait*).
void render_wait_stats(const service::WaitStats& stats, std::string& out);

class Metrics final : public service::Observer, public TransportCounters {
 public:
  Metrics();

  void count_request(Endpoint e, unsigned status) override;
  // Stable pointer; created on first use.
  PolicyCounters* policy(std::string_view name);
  void count_store_error() override { store_errors_.fetch_add(1, std::memory_order_relaxed); }
  void observe_decision(std::chrono::nanoseconds latency) override;

  void connection_opened() override { open_connections_.fetch_add(1, std::memory_order_relaxed); }
  void connection_closed() override { open_connections_.fetch_sub(1, std::memory_order_relaxed); }
  void connection_rejected() override { rejected_connections_.fetch_add(1, std::memory_order_relaxed); }
  void connection_rejected_per_client() override { rejected_per_client_.fetch_add(1, std::memory_order_relaxed); }
  void connection_first_byte_timeout() override { first_byte_timeouts_.fetch_add(1, std::memory_order_relaxed); }
  int64_t open_connections() const override { return open_connections_.load(std::memory_order_relaxed); }

  // Configuration generation (1 = the file loaded at start) and the last reload's result.
  void set_config_generation(uint64_t g) { generation_.store(g, std::memory_order_relaxed); }
  void record_reload(bool ok, int64_t unix_seconds);

  // Families read at render time (memory-store keys, Redis counters, the denial cache, the
  // Envoy rules' statistics), so they cost nothing on the hot path. Each callback appends
  // complete metric families to `out`; they render in the order they were added. Callbacks are
  // never removed (what they read lives as long as the server; stores are held weakly).
  void add_extra(std::function<void(std::string& out)> extra);

  std::string render() const;
  // Failed-open / failed-closed decisions over every policy, and store errors, so far.
  OutcomeTotals totals() const;

 private:
  static size_t status_slot(unsigned status);

  std::array<std::array<std::atomic<uint64_t>, 12>, kEndpointCount> requests_{};
  std::atomic<uint64_t> store_errors_{0};
  std::atomic<int64_t> open_connections_{0};
  std::atomic<uint64_t> rejected_connections_{0};
  std::atomic<uint64_t> rejected_per_client_{0};
  std::atomic<uint64_t> first_byte_timeouts_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> reloads_ok_{0};
  std::atomic<uint64_t> reloads_failed_{0};
  std::atomic<int> last_reload_ok_{1};
  std::atomic<int64_t> last_reload_time_{0};

  static constexpr size_t kBuckets = 19;
  std::array<std::atomic<uint64_t>, kBuckets + 1> latency_buckets_{};  // last = +Inf only
  std::atomic<uint64_t> latency_count_{0};
  std::atomic<uint64_t> latency_sum_ns_{0};

  mutable Mutex mu_;  // guards policies_ (insertion and iteration) and extras_
  std::map<std::string, std::unique_ptr<PolicyCounters>, std::less<>> policies_ RL_GUARDED_BY(mu_);
  std::vector<std::function<void(std::string&)>> extras_ RL_GUARDED_BY(mu_);
};

}  // namespace ratelimit::server
