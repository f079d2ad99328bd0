// rls_stats.h — envoyproxy/ratelimit's per-rule statistics (total_hits, over_limit,
// near_limit, within_limit, shadow_mode, in hits) kept per metric key and rendered in the
// Prometheus text format with bounded labels.
//
// Names and labels follow envoyproxy/ratelimit's built-in Prometheus mapping
// (ratelimit.service.rate_limit.<domain>.<key1>.<key2>.<stat> ->
// ratelimit_service_rate_limit_<stat>{domain, key1, key2}), with the `_total` suffix Prometheus
// requires of a counter; a key of N levels gets key1 ... keyN.
// Bounded cardinality: keys that come from the configuration (a rule's own key) are bounded by
// the configuration; keys built from request values (detailed_metric, value_to_metric, a
// request's limit override) are capped at `max_request_keys` distinct keys for the life of the
// process. Past the cap a request key is not created: its hits go to the rule's own key (or
// the domain's "limit_override" key) and are counted in ratelimitd_rls_stats_overflow_hits_total,
// so the per-rule totals stay complete.
// Invariants: counters only grow and are never freed (pointers stay valid for the life of the
// RuleStats).
// Thread-safety: every method from any thread; HitCounters::add is relaxed atomic adds, the
// lookups take a mutex (the configured keys are looked up once per rule and cached by the
// caller).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "metric_families.h"
#include "mutex.h"
#include "rule_set.h"

namespace ratelimit::rls {

inline constexpr size_t kDefaultMaxRequestStatsKeys = 1000;

struct HitCounters {
  std::atomic<uint64_t> total_hits{0}, over_limit{0}, near_limit{0}, within_limit{0},
      shadow_mode{0};
  void add(const HitStats& h);
};

class RuleStats {
 public:
  explicit RuleStats(size_t max_request_keys = kDefaultMaxRequestStatsKeys);

  // The counters of a configured key (`key` = the stats key without "domain."), sanitized by
  // the caller (sanitize_stat_name). Never null.
  HitCounters* configured(std::string_view domain, std::string_view key);
  // The counters of a key built from request values, or nullptr when the cap is reached (the
  // caller then adds to a configured key and calls count_overflow()).
  HitCounters* request_key(std::string_view domain, std::string_view key);
  void count_overflow(uint64_t hits) { overflow_hits_.fetch_add(hits, std::memory_order_relaxed); }

  // Appends every family (HELP, TYPE, samples) to `out`.
  void render(std::string& out) const;

  size_t request_keys() const;
  uint64_t overflow_hits() const { return overflow_hits_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    std::string domain;
    std::string key;
    std::unique_ptr<HitCounters> counters;
  };
  HitCounters* find_or_add(std::string_view domain, std::string_view key, bool request)
      RL_EXCLUDES(mu_);

  const size_t max_request_keys_;
  mutable Mutex mu_;
  // By "<domain length>:<domain><key>" so a domain that holds '.' stays apart from its keys.
  std::map<std::string, Entry, std::less<>> entries_ RL_GUARDED_BY(mu_);
  size_t request_keys_ RL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> overflow_hits_{0};
};

// Prometheus label-value escaping (backslash, double quote, newline): metric_families.h's.
using metrics::append_label_value;

}  // namespace ratelimit::rls
