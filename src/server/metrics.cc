// metrics.cc — the one declaration of every ratelimitd metric (kFamilies) and the Prometheus
// text rendering. Hot-path updates are relaxed atomics; rendering reads them without a lock.
#include "metrics.h"

#include <cstdio>

#include "ratelimit/version.h"

namespace ratelimit::server {
namespace {

struct Family {
  const char* name;
  const char* type;
  const char* help;
};

// Every metric ratelimitd exports but Envoy's per-rule statistics (src/rls/rls_stats.cc, in
// envoyproxy/ratelimit's names): the server's families here, the stores' in kStoreFamilies.
constexpr Family kBuildInfo{"ratelimitd_build_info", "gauge",
                            "Always 1; the labels say which build is running (version, git describe)."};
constexpr Family kRequests{"ratelimitd_http_requests_total", "counter",
                           "HTTP requests answered, by endpoint and status code."};
constexpr Family kDecisions{"ratelimitd_decisions_total", "counter",
                            "Rate-limit decisions by policy and outcome (allowed, denied, "
                            "shadow_denied, failed_open, failed_closed)."};
constexpr Family kStoreErrors{"ratelimitd_store_errors_total", "counter",
                              "Store calls that returned an error instead of a decision."};
constexpr Family kLatency{"ratelimitd_decision_duration_seconds", "histogram",
                          "Time spent in the store per decision (acquire, peek, forward-auth)."};
constexpr Family kConnections{"ratelimitd_connections_open", "gauge", "Client connections open now."};
constexpr Family kRejected{"ratelimitd_connections_rejected_total", "counter",
                           "Connections closed at accept because limits.max_connections was reached."};
constexpr Family kRejectedPerClient{"ratelimitd_connections_rejected_per_client_total", "counter",
                                    "Connections closed at accept because their address held limits.max_connections_per_client."};
constexpr Family kFirstByteTimeouts{"ratelimitd_connections_first_byte_timeouts_total", "counter",
                                    "Connections closed because they sent nothing within limits.first_byte_timeout."};
constexpr Family kGeneration{"ratelimitd_config_generation", "gauge",
                             "Configuration generation in use: 1 at start, +1 per successful reload."};
constexpr Family kReloads{"ratelimitd_config_reloads_total", "counter",
                          "Configuration reloads (SIGHUP; with --envoy-env also a change of the watched "
                          "configuration directory) by result (ok, error)."};
constexpr Family kLastReload{"ratelimitd_config_last_reload_success", "gauge",
                             "1 if the last reload succeeded (or none was attempted), 0 if it failed."};
constexpr Family kLastReloadTime{"ratelimitd_config_last_reload_timestamp_seconds", "gauge",
                                 "Unix time of the last reload attempt (0: none)."};

// The stores' families, in StoreMetric's order (rendered by store_factory.cc's callbacks).
constexpr Family kStoreFamilies[kStoreMetricCount] = {
    {"ratelimitd_redis_commands_total", "counter",
     "Script calls answered by Redis."},
    {"ratelimitd_redis_errors_total", "counter",
     "Redis calls that failed (timeout, connection, error reply)."},
    {"ratelimitd_redis_timeouts_total", "counter",
     "Redis calls whose command timeout expired."},
    {"ratelimitd_redis_failed_open_total", "counter",
     "Decisions admitted by the fail-open policy."},
    {"ratelimitd_redis_failed_closed_total", "counter",
     "Decisions denied by the fail-closed policy."},
    {"ratelimitd_redis_connects_total", "counter",
     "Redis connections opened (first ones included)."},
    {"ratelimitd_redis_ready_connections", "gauge",
     "Redis connections open and ready."},
    {"ratelimitd_redis_cluster_moved_total", "counter",
     "Redis Cluster MOVED redirections followed."},
    {"ratelimitd_redis_cluster_ask_total", "counter",
     "Redis Cluster ASK redirections followed."},
    {"ratelimitd_redis_cluster_retries_total", "counter",
     "Redis Cluster resends after TRYAGAIN, CLUSTERDOWN or no ready master."},
    {"ratelimitd_redis_cluster_topology_refreshes_total", "counter",
     "Redis Cluster slot maps read."},
    {"ratelimitd_redis_evicted_keys_total", "counter",
     "Keys the Redis server(s) evicted for memory since ratelimitd started (INFO evicted_keys): limits lost."},
    {"ratelimitd_redis_eviction_unsafe", "gauge",
     "1 when a Redis node's maxmemory-policy is not noeviction (keys, hence limits, may be evicted)."},
    {"ratelimitd_memory_store_keys", "gauge",
     "Keys held by the memory store."},
    {"ratelimitd_memory_store_bytes", "gauge",
     "Bytes the memory store's entries take, as counted for store.max_bytes."},
    {"ratelimitd_memory_store_evictions_total", "counter",
     "Keys evicted from the memory store because store.max_keys or store.max_bytes was reached."},
    {"ratelimitd_memory_store_evictions_by_standing_total", "counter",
     "Evicted keys by their standing: roomy (half or more of the limit left), near_limit, denied (a denied key is evicted only when its whole shard is denied)."},
    {"ratelimitd_memory_store_evictions_for_bytes_total", "counter",
     "Of the evictions, those store.max_bytes required (not store.max_keys)."},
    {"ratelimitd_denial_cache_hits_total", "counter",
     "Decisions answered by the denial cache (no store call)."},
    {"ratelimitd_denial_cache_misses_total", "counter",
     "Cacheable decisions passed to the store."},
    {"ratelimitd_denial_cache_bypassed_total", "counter",
     "Decisions passed through uncached (count-denied or every-hit policies, checks)."},
    {"ratelimitd_denial_cache_inserts_total", "counter",
     "Denials remembered."},
    {"ratelimitd_denial_cache_evictions_total", "counter",
     "Live entries dropped to stay within store.denial_cache.max_entries."},
    {"ratelimitd_denial_cache_invalidations_total", "counter",
     "Entries dropped by a reset through this ratelimitd."},
    {"ratelimitd_denial_cache_entries", "gauge",
     "(policy, key) entries held now."},
    {"ratelimitd_distributed_local_decisions_total", "counter",
     "Decisions of lease/async policies answered without a store call."},
    {"ratelimitd_distributed_exact_passthrough_total", "counter",
     "Lease/async decisions made exactly because the key table was full or the policy was being redefined."},
    {"ratelimitd_distributed_failed_open_total", "counter",
     "Lease/async decisions admitted by the failure policy (the store could not answer)."},
    {"ratelimitd_distributed_failed_closed_total", "counter",
     "Lease/async decisions denied by the failure policy (the store could not answer)."},
    {"ratelimitd_distributed_keys", "gauge",
     "(policy, key) pairs held by the lease/async modes."},
    {"ratelimitd_lease_reserves_total", "counter",
     "Reserve calls sent (each also gives back the previous slice's unused units)."},
    {"ratelimitd_lease_reserve_failures_total", "counter",
     "Reserve calls that failed."},
    {"ratelimitd_lease_units_granted_total", "counter",
     "Units reserved in slices."},
    {"ratelimitd_lease_units_returned_total", "counter",
     "Unused units given back to the store (acknowledged)."},
    {"ratelimitd_lease_units_held", "gauge",
     "Units held in live slices and not yet spent (under-admission if never used)."},
    {"ratelimitd_async_pushes_total", "counter",
     "Pushes (and reads) sent to the store."},
    {"ratelimitd_async_push_failures_total", "counter",
     "Pushes that failed; their hits are kept and sent with the next push."},
    {"ratelimitd_async_units_pushed_total", "counter",
     "Hits acknowledged by the store."},
    {"ratelimitd_async_units_pending", "gauge",
     "Hits admitted here and not yet acknowledged by the store."},
    {"ratelimitd_async_units_over_limit_total", "counter",
     "Pushed hits the shared count had no room for: units admitted past the limit (this instance's share)."},
    {"ratelimitd_async_view_age_seconds", "gauge",
     "Age of the oldest view of the global count among the keys held."},
    {"ratelimitd_wait_queued_total", "counter",
     "Requests that waited in their key's queue (max_wait) instead of being refused at once."},
    {"ratelimitd_wait_admitted_total", "counter",
     "Waiting requests admitted."},
    {"ratelimitd_wait_timed_out_total", "counter",
     "Waiting requests answered 429 at their deadline (or when their retry time passed it)."},
    {"ratelimitd_wait_queue_full_total", "counter",
     "Requests refused at once because their key's queue held max_queue waiters."},
    {"ratelimitd_wait_cancelled_total", "counter",
     "Waiting requests whose client went away (nothing counted, nothing taken)."},
    {"ratelimitd_wait_shutdown_total", "counter",
     "Waiting requests answered 429 because ratelimitd was shutting down."},
    {"ratelimitd_wait_held_total", "counter",
     "Admitted answers held for their shaping delay (hold_delay)."},
    {"ratelimitd_wait_wakeups_total", "counter",
     "Re-decisions of a queue's head (one store call each): releases and retry times."},
    {"ratelimitd_wait_waiting", "gauge",
     "Requests waiting in a queue now."},
    {"ratelimitd_wait_release_feed_subscriptions_total", "counter",
     "Subscriptions of the Redis release feed (channel ratelimit:released): 1 once subscribed, +1 per reconnection; Redis store only."},
    {"ratelimitd_leases_acquired_total", "counter",
     "Leases granted through this process (concurrency policies), by policy."},
    {"ratelimitd_leases_denied_total", "counter",
     "Lease requests refused over the limit by this process, by policy."},
    {"ratelimitd_leases_released_total", "counter",
     "Releases through this process that freed a held lease, by policy."},
    {"ratelimitd_leases_renewed_total", "counter",
     "Renews through this process that extended a held lease, by policy."},
    {"ratelimitd_leases_expired_total", "counter",
     "Leases granted by this process that lapsed (lease_ttl passed without a release or renew through any process), by policy."},
    {"ratelimitd_leases_held", "gauge",
     "Leases granted by this process, not released (through any process), lease_ttl not passed, by policy."},
    {"ratelimitd_region_reachable", "gauge",
     "1 while the last read of that region's store succeeded recently, else 0 (label region)."},
    {"ratelimitd_region_view_age_seconds", "gauge",
     "Time since this instance last read that region's counts (label region); -1 before the first."},
    {"ratelimitd_region_reads_total", "counter",
     "Reads of that region's store (its counts of the keys in use, and a probe), label region."},
    {"ratelimitd_region_read_failures_total", "counter",
     "Reads of that region's store that failed (label region)."},
    {"ratelimitd_region_decisions_total", "counter",
     "Decisions of policies counted across regions."},
    {"ratelimitd_region_capped_total", "counter",
     "... of them decided under the partition share cap (a region unreachable)."},
    {"ratelimitd_region_denied_by_others_total", "counter",
     "... of them denied because the other regions' counts alone filled the limit."},
    {"ratelimitd_region_untracked_total", "counter",
     "... of them on keys beyond the tracked maximum (decided on this region's count only)."},
    {"ratelimitd_region_keys", "gauge",
     "Keys whose other-region counts this instance tracks."},
};

constexpr const char* kEndpointNames[kEndpointCount] = {"acquire", "peek", "reset", "forward_auth",
                                                        "healthz", "readyz", "metrics", "json",
                                                        "healthcheck", "rlconfig", "other",
                                                        "leases"};
constexpr const char* kOutcomeNames[kOutcomeCount] = {"allowed", "denied", "shadow_denied",
                                                      "failed_open", "failed_closed"};
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

void header(std::string& out, const Family& f) {
  out += "# HELP ";
  out += f.name;
  out += ' ';
  out += f.help;
  out += "\n# TYPE ";
  out += f.name;
  out += ' ';
  out += f.type;
  out += '\n';
}

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
  for (size_t e = 0; e < kEndpointCount; ++e) {
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
