// metric_families.h — the one table of every metric family ratelimitd exports: name, type and
// help of each, the server's, the stores' and Envoy's per-rule statistics (envoyproxy/ratelimit's
// names), so the /metrics page, the Envoy statistics and docs/operations.md cannot drift apart.
// Rendered by src/server/metrics.cc (and the stores' callbacks through it) and by
// src/rls/rls_stats.cc; declared nowhere else.
//
// Why in src/common: src/rls renders its own families and sits below src/server; the table is
// data only (header-only, no dependency), so both can read it.
// Invariants: names are unique, valid Prometheus names; counters end in _total.
// Thread-safety: constants.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ratelimit::metrics {

struct Family {
  const char* name;
  const char* type;  // "counter", "gauge" or "histogram"
  const char* help;
};

// The server's own families (rendered by src/server/metrics.cc).
inline constexpr Family kBuildInfo{"ratelimitd_build_info", "gauge",
                            "Always 1; the labels say which build is running (version, git describe)."};
inline constexpr Family kRequests{"ratelimitd_http_requests_total", "counter",
                           "HTTP requests answered, by endpoint and status code."};
inline constexpr Family kDecisions{"ratelimitd_decisions_total", "counter",
                            "Rate-limit decisions by policy and outcome (allowed, denied, "
                            "shadow_denied, failed_open, failed_closed, conflict)."};
inline constexpr Family kStoreErrors{"ratelimitd_store_errors_total", "counter",
                              "Store calls that returned an error instead of a decision."};
inline constexpr Family kLatency{"ratelimitd_decision_duration_seconds", "histogram",
                          "Time spent in the store per decision (acquire, peek, forward-auth)."};
inline constexpr Family kConnections{"ratelimitd_connections_open", "gauge", "Client connections open now."};
inline constexpr Family kRejected{"ratelimitd_connections_rejected_total", "counter",
                           "Connections closed at accept because limits.max_connections was reached."};
inline constexpr Family kRejectedPerClient{"ratelimitd_connections_rejected_per_client_total", "counter",
                                    "Connections closed at accept because their address held limits.max_connections_per_client."};
inline constexpr Family kFirstByteTimeouts{"ratelimitd_connections_first_byte_timeouts_total", "counter",
                                    "Connections closed because they sent nothing within limits.first_byte_timeout."};
inline constexpr Family kGeneration{"ratelimitd_config_generation", "gauge",
                             "Configuration generation in use: 1 at start, +1 per successful reload."};
inline constexpr Family kReloads{"ratelimitd_config_reloads_total", "counter",
                          "Configuration reloads (SIGHUP; with --envoy-env also a change of the watched "
                          "configuration directory) by result (ok, error)."};
inline constexpr Family kLastReload{"ratelimitd_config_last_reload_success", "gauge",
                             "1 if the last reload succeeded (or none was attempted), 0 if it failed."};
inline constexpr Family kLastReloadTime{"ratelimitd_config_last_reload_timestamp_seconds", "gauge",
                                 "Unix time of the last reload attempt (0: none)."};

// The stores' families, in server::StoreMetric's order (src/server/metrics.h; rendered by
// store_factory.cc's callbacks; metrics.cc static_asserts the count).
inline constexpr Family kStoreFamilies[] = {
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
    {"ratelimitd_memory_store_residue_saturated_total", "counter",
     "Keys evicted at their limit whose residue bucket was full, folded into their policy's saturation mark (store.when_saturated: refuse): that policy's new keys hashing there are refused until the window ends. A key flood beyond store.max_keys."},
    {"ratelimitd_memory_store_residue_dropped_total", "counter",
     "Keys evicted at their limit whose residue was forgotten (store.when_saturated: admit): they may be admitted their limit again. A key flood beyond store.max_keys."},
    {"ratelimitd_memory_store_snapshot_last_success_timestamp_seconds", "gauge",
     "When store.snapshot was last written whole (Unix time; 0: not yet)."},
    {"ratelimitd_memory_store_snapshot_last_duration_seconds", "gauge",
     "How long the last store.snapshot write took."},
    {"ratelimitd_memory_store_snapshot_keys", "gauge",
     "Keys in the last store.snapshot written (or read at start, until the first write)."},
    {"ratelimitd_memory_store_snapshot_failures_total", "counter",
     "store.snapshot writes that failed (each also logged); the previous file stays whole."},
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
    {"ratelimitd_adaptive_limit", "gauge",
     "An adaptive concurrency policy's learned limit as this process's last lease answer under it gave it (any key), by policy."},
    {"ratelimitd_lease_class_admitted_total", "counter",
     "Lease acquires admitted, by policy and priority class (policies with classes)."},
    {"ratelimitd_lease_class_refused_total", "counter",
     "Lease acquires refused over the limit (at once, or at the end of their wait), by policy and priority class."},
    {"ratelimitd_lease_class_waited_total", "counter",
     "Lease acquires that entered a waiting queue, by policy and priority class."},
    {"ratelimitd_lease_class_wait_seconds_total", "counter",
     "Time from request to answer of the acquires that waited, summed, by policy and priority class."},
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

// HTTP/2 flow control (the h2c takeover, src/server/h2c.cc).
inline constexpr Family kH2HeldBytes{
    "ratelimitd_h2_held_bytes", "gauge",
    "Answer bytes HTTP/2 connections hold because the client's flow-control window does not let them out."};
inline constexpr Family kH2StalledStreamsReset{
    "ratelimitd_h2_stalled_streams_reset_total", "counter",
    "HTTP/2 streams reset because the client's window held their answer for limits.request_timeout."};
inline constexpr Family kH2HeldStreamsReset{
    "ratelimitd_h2_held_streams_reset_total", "counter",
    "HTTP/2 streams reset because their connection held more than 256 KiB of answers for the client's window."};
inline constexpr Family kH2StalledConnectionsClosed{
    "ratelimitd_h2_stalled_connections_closed_total", "counter",
    "HTTP/2 connections closed (GOAWAY) because every stream's answer was held by the client's window."};

// Envoy's Rate Limit Quota Service (rlqs::QuotaService, src/rlqs), when `rlqs:` is configured.
inline constexpr Family kRlqsBuckets{"ratelimitd_rlqs_buckets", "gauge",
                                     "RLQS buckets tracked now (at most rlqs.max_buckets)."};
inline constexpr Family kRlqsReports{"ratelimitd_rlqs_reports_total", "counter",
                                     "RLQS bucket usage reports answered with an assignment."};
inline constexpr Family kRlqsIgnored{"ratelimitd_rlqs_reports_ignored_total", "counter",
                                     "RLQS bucket usage reports ignored: empty or oversized bucket_id, absurd counts."};
// Per bucket (the 100 most recently reported; labels domain and bucket "k=v,k=v" sorted).
inline constexpr Family kRlqsBucketClients{"ratelimitd_rlqs_bucket_clients", "gauge",
                                           "Envoys (streams) taking part in an RLQS bucket's division now."};
inline constexpr Family kRlqsBucketDemand{"ratelimitd_rlqs_bucket_demand_rps", "gauge",
                                          "Sum of the Envoys' last reported demands ((allowed + denied) / time_elapsed)."};
inline constexpr Family kRlqsBucketAssigned{"ratelimitd_rlqs_bucket_assigned_rps", "gauge",
                                            "Sum of the rates of the assignments in force (token buckets; 0 for DENY_ALL)."};
inline constexpr Family kRlqsBucketLimit{"ratelimitd_rlqs_bucket_limit_rps", "gauge",
                                         "The bucket's global limit per second (its rule's, at the last report)."};
inline constexpr Family kRlqsBucketRemoteClients{
    "ratelimitd_rlqs_bucket_remote_clients", "gauge",
    "Envoys of other ratelimitd instances (through the shared Redis) counted in an RLQS bucket's division now."};
// Several instances behind one Redis (src/rlqs/quota_sync.h).
inline constexpr Family kRlqsSyncUp{"ratelimitd_rlqs_sync_up", "gauge",
                                    "1 while RLQS demands are exchanged through Redis; 0 after a failed exchange "
                                    "(each instance then divides its buckets' whole limits among its own clients)."};
inline constexpr Family kRlqsSyncExchanges{"ratelimitd_rlqs_sync_exchanges_total", "counter",
                                           "RLQS bucket demand exchanges with Redis that succeeded."};
inline constexpr Family kRlqsSyncFailures{"ratelimitd_rlqs_sync_failures_total", "counter",
                                          "RLQS bucket demand exchanges with Redis that failed."};
inline constexpr Family kRlqsForgotten{"ratelimitd_rlqs_buckets_forgotten_total", "counter",
                                       "RLQS buckets forgotten: every client's assignment expired, or beyond rlqs.max_buckets."};

// Envoy's per-rule statistics (src/rls/rls_stats.cc): envoyproxy/ratelimit's built-in Prometheus
// mapping of ratelimit.service.rate_limit.<domain>.<keys>.<stat>, labelled by domain and key1...
inline constexpr Family kRlsTotalHits{"ratelimit_service_rate_limit_total_hits_total", "counter",
                                      "Hits (units) of requests that matched the rule, by metric key."};
inline constexpr Family kRlsOverLimit{"ratelimit_service_rate_limit_over_limit_total", "counter",
                                      "Hits over the rule's limit (denied, or would have been in shadow mode)."};
inline constexpr Family kRlsNearLimit{"ratelimit_service_rate_limit_near_limit_total", "counter",
                                      "Hits above NEAR_LIMIT_RATIO of the limit but within it."};
inline constexpr Family kRlsWithinLimit{"ratelimit_service_rate_limit_within_limit_total", "counter",
                                        "Hits within the limit."};
inline constexpr Family kRlsShadowMode{"ratelimit_service_rate_limit_shadow_mode_total", "counter",
                                       "Hits over the limit of a rule in shadow_mode (answered OK)."};
inline constexpr Family kRlsRequestKeys{"ratelimitd_rls_stats_request_keys", "gauge",
                                        "Metric keys built from request values (detailed_metric, value_to_metric, "
                                        "limit overrides), capped."};
inline constexpr Family kRlsRequestKeysMax{"ratelimitd_rls_stats_request_keys_max", "gauge",
                                           "The cap on metric keys built from request values."};
inline constexpr Family kRlsOverflowHits{"ratelimitd_rls_stats_overflow_hits_total", "counter",
                                         "Hits counted under the rule's own key because the request-key cap was "
                                         "reached."};

// Prometheus label-value escaping (backslash, double quote, newline).
inline void append_label_value(std::string& out, std::string_view value) {
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
}

// "# HELP name help\n# TYPE name type\n": a family's header in the text format.
inline void append_family_header(std::string& out, const Family& f) {
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

// A family's header and its one unlabelled sample.
inline void append_family(std::string& out, const Family& f, uint64_t value) {
  append_family_header(out, f);
  out += f.name;
  out += ' ';
  out += std::to_string(value);
  out += '\n';
}

}  // namespace ratelimit::metrics
