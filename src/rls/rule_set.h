// rule_set.h — envoyproxy/ratelimit's descriptor configuration, loaded unmodified, and its
// matching: which limit applies to each descriptor of a RateLimitRequest.
//
// Why here: the gRPC front-end (ShouldRateLimit), the HTTP /json front-end and the debug
// /rlconfig page all need the same answer to "which rule, which counter, which metric key";
// this library gives it once, with no transport and no store in sight. The decision itself is
// made by src/core with the Policy each rule carries.
//
// Semantics (taken from envoyproxy/ratelimit's src/config/config_impl.go and
// src/service/ratelimit.go; docs/envoy.md documents them for users):
//   - A file is one `domain` with nested `descriptors` ({key, value?, rate_limit?,
//     descriptors?, shadow_mode, detailed_metric, value_to_metric, share_threshold,
//     quota_mode, metadata}). Keys are checked against envoyproxy/ratelimit's list (plus our
//     extension keys inside rate_limit: algorithm, burst, mode, and the consistency keys
//     consistency, sync_interval, lease_max, lease_ttl); a misspelled key anywhere refuses
//     the file.
//   - Matching, per request entry, level by level: "key_value" exactly, else the first
//     wildcard pattern of that level (in file order) that matches "key_value" (`*` = any run of
//     characters, anywhere, several allowed; matched against the joined "key_value" string
//     exactly as envoyproxy/ratelimit does), else the key-only default. A limit applies only if
//     it sits at the level of the request's *last* entry (exact depth). The request's own
//     `limit` override wins over the configuration (the domain must still exist). After all
//     descriptors are resolved, a rule whose `name` is in any matched rule's `replaces` is
//     dropped (as if nothing matched).
//   - Several files: each domain once, unless merge_domains (MERGE_DOMAIN_CONFIG) joins them;
//     a duplicate descriptor (same composite key) is refused even when merging. Any error in
//     any file refuses the whole set: nothing is half-loaded.
// How a front-end answers ShouldRateLimit with it (envoyproxy/ratelimit's service/ratelimit.go,
// limiter/base_limiter.go and redis/fixed_cache_impl.go, in that order):
//   - hits per descriptor: its own hits_addend when present (0 allowed: a check), else
//     max(1, request.hits_addend);
//   - resolve(); per Applied: rule() null and !unlimited -> OK without current_limit;
//     unlimited -> OK, limit_remaining 4294967295, nothing counted; else decide
//     rule()->policy on cache_key at cost = hits (an every-hit policy takes cost 0 as a check;
//     for the `algorithm` extension a 0 is a peek at cost 1). Every descriptor is counted on its
//     own (Atomicity::kIndependent) unless the domain has the all_or_nothing extension
//     (Atomicity::kAllOrNothing: one denial and nothing is counted; shadow rules apart). With
//     STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: peek each at its hits first, then count
//     algo::hits_to_count_when_stopping (include/ratelimit/hit_counting.h);
//   - status: OVER_LIMIT when denied (OK when rule()->shadow_mode or SHADOW_MODE);
//     limit_remaining = Decision::remaining (0 when over); current_limit = {requests_per_unit,
//     unit, name}; duration_until_reset = unit_seconds(unit) - now_s % unit_seconds(unit) (what
//     envoyproxy/ratelimit sends; ceil(reset_after) for the extension algorithms);
//   - metrics under sanitize_stat_name(stats_key): total_hits += hits; near threshold =
//     floor(float32(requests_per_unit) * NEAR_LIMIT_RATIO); admitted: within_limit += hits and
//     near_limit += the hits above the threshold; denied: over_limit += hits when the count was
//     already at the limit, else the part above the limit, the rest near_limit; shadow_mode +=
//     the over-limit hits of a shadow rule.
// Thread-safety: a RuleSet is immutable after load(); share it as shared_ptr<const RuleSet>
// and call resolve() from any number of threads.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ratelimit/policy.h"
#include "ratelimit/status.h"

namespace ratelimit::rls {

// RateLimitResponse.RateLimit.Unit, with the wire values of Envoy's API.
enum class Unit : uint8_t {
  kUnknown = 0, kSecond = 1, kMinute = 2, kHour = 3, kDay = 4, kMonth = 5, kYear = 6, kWeek = 7,
};
// Seconds per unit as envoyproxy/ratelimit counts them (month = 30 days, year = 365 days);
// 0 for kUnknown. Windows are aligned to the Unix epoch: start = now - now % seconds.
int64_t unit_seconds(Unit unit);
// "SECOND" ... "WEEK", "UNKNOWN" (the proto enum names; also what /rlconfig prints).
const char* unit_name(Unit unit);
// Case-insensitive proto name; nullopt for anything else, "unknown" included.
[[nodiscard]] std::optional<Unit> parse_unit(std::string_view text);
// Unit from its wire value; nullopt for 0 (UNKNOWN) and values outside the enum.
[[nodiscard]] std::optional<Unit> unit_from_wire(int64_t value);

// One configured rate_limit (or a request's override), with everything a front-end needs.
struct Rule {
  uint32_t requests_per_unit = 0;
  Unit unit = Unit::kUnknown;  // kUnknown only when unlimited
  bool unlimited = false;      // answer OK with limit_remaining 4294967295, count nothing
  bool shadow_mode = false;    // decide and count, but report OK (and count shadow_mode)
  bool quota_mode = false;     // envoyproxy/ratelimit's quota mode (see docs/envoy.md)
  bool detailed_metric = false;
  std::string name;                   // rate_limit.name; also current_limit.name
  std::vector<std::string> replaces;  // rule names this rule replaces when both match
  // The stats key envoyproxy/ratelimit gives the rule: "domain.key_value.key" (the config's
  // composite key, values as configured). Metric names are built from it.
  std::string full_key;
  // The metric name of that key: stat_name(full_key, domain), computed at load so that no
  // request sanitizes a configured key (only keys built from request values are).
  std::string stats_name;
  // What to decide with: by default Policy::fixed_window_every_hit(requests_per_unit, unit)
  // (envoyproxy/ratelimit's counter); with the `algorithm` extension, that algorithm. Unset
  // for unlimited rules.
  std::optional<Policy> policy;
  std::string metadata_json;  // `metadata` as compact JSON ("" when absent)
  std::string file;           // where it was defined (for /rlconfig and messages)
  int line = 0;
};

// A request's descriptor as the front-end received it. Views into the caller's buffers.
struct Entry {
  std::string_view key;
  std::string_view value;
};
struct LimitOverride {
  uint32_t requests_per_unit = 0;
  int64_t unit = 0;  // wire value; 0 (UNKNOWN) or out of range is refused by resolve()
};
struct Descriptor {
  std::span<const Entry> entries;
  std::optional<LimitOverride> limit;  // RateLimitDescriptor.limit
};

// What applies to one descriptor of a request.
struct Applied {
  // The limit to decide with; nullptr when none applies (no domain, no match, depth mismatch,
  // replaced, or unlimited — see `unlimited`). Points into the RuleSet or into `override_rule`
  // — valid while both the RuleSet and this Applied live (do not copy an Applied that holds an
  // override and keep the pointer; use rule() after a copy).
  const Rule* rule() const { return override_rule ? &*override_rule : configured; }
  bool unlimited = false;  // matched an unlimited rule: OK, limit_remaining = 4294967295
  // The store key: CACHE_KEY_PREFIX + domain + "_" + (key + "_" + value + "_") per entry, as
  // sent (share_threshold replaces a value by its wildcard pattern, so all values share one
  // counter). envoyproxy/ratelimit appends the window start; here the window lives in the
  // fixed-window state, so the key is the same for every window. Empty when rule() is null.
  std::string cache_key;
  // The metric key of this hit (detailed_metric / value_to_metric / share_threshold applied,
  // exactly as envoyproxy/ratelimit builds it); raw — pass it to sanitize_stat_name() for a
  // metric name. detailed_metric keys carry request values: callers must cap their number.
  std::string stats_key;
  bool detailed = false;  // stats_key was built from request values (detailed_metric)

  const Rule* configured = nullptr;
  std::optional<Rule> override_rule;
};

struct LoadOptions {
  bool merge_domains = false;    // MERGE_DOMAIN_CONFIG
  std::string cache_key_prefix;  // CACHE_KEY_PREFIX
};

// One configuration file's text and the name that labels its messages (its path).
struct SourceFile {
  std::string name;
  std::string text;
  // When set, `text` is a larger YAML document (ratelimitd's own configuration) and this
  // domain is item `item` of its top-level list `list`; messages keep the document's lines.
  std::string list{};
  size_t item = 0;
};

class RuleSet {
 public:
  // Parses and validates every file; all or nothing. Errors (kInvalidArgument) are
  // "name:line: reason" with envoyproxy/ratelimit's reason where it has one. An empty list of
  // files is a valid, empty RuleSet (every domain unknown).
  static Result<std::shared_ptr<const RuleSet>> load(std::span<const SourceFile> files,
                                                     const LoadOptions& options = {});

  // Resolves every descriptor of one request (domain and descriptors as received). `out`
  // gets one Applied per descriptor, in order, with `replaces` applied across them.
  // Errors (kInvalidArgument, nothing resolved): an override with an unknown unit, or a
  // cache key longer than kMaxKeyLength. An unknown domain is not an error: nothing applies.
  Status resolve(std::string_view domain, std::span<const Descriptor> descriptors,
                 std::vector<Applied>& out) const;

  bool has_domain(std::string_view domain) const;
  // The domain's `all_or_nothing` extension (a top-level `all_or_nothing: true` beside
  // `domain`): decide a request's limited descriptors all or nothing — when any one is over
  // its limit, none is counted. False for an unknown domain and by default.
  bool all_or_nothing(std::string_view domain) const;
  bool empty() const { return domains_.empty(); }
  size_t rule_count() const { return rules_.size(); }
  // Every rule, in load order (for /rlconfig): "full_key: unit=MINUTE requests_per_unit=10,
  // shadow_mode: false, quota_mode: false" lines, as envoyproxy/ratelimit's dump prints them.
  std::string dump() const;
  const std::vector<std::unique_ptr<Rule>>& rules() const { return rules_; }

  // envoyproxy/ratelimit's counter for a request's limit override in `unit` (SECOND ... WEEK),
  // built at load; an override decides with it at its own limit (Policy::with_limit: same
  // name, so an override and the configured limit of one key count together).
  const Policy& override_counter(Unit unit) const { return *override_counters_[static_cast<size_t>(unit)]; }

  struct Node;  // one descriptor level (defined in rule_set_detail.h)

 private:
  RuleSet() = default;
  friend class Loader;
  Status resolve_override(std::string_view domain, size_t di, const Descriptor& desc, Applied& a) const;
  // The store key into a.cache_key (`share`: per entry, the value share_threshold puts in its
  // place, or empty); kInvalidArgument when longer than kMaxKeyLength.
  Status set_cache_key(std::string_view domain, size_t di, std::span<const Entry> entries,
                       std::span<const std::string> share, Applied& a) const;

  std::unordered_map<std::string, std::unique_ptr<Node>> domains_;
  std::vector<std::unique_ptr<Rule>> rules_;
  std::string cache_key_prefix_;
  std::array<std::optional<Policy>, 8> override_counters_;  // by Unit; kUnknown unset
};

// What one descriptor's decision adds to its rule's counters, as envoyproxy/ratelimit's
// base_limiter.go splits it. `limit` is requests_per_unit, `hits` the descriptor's hits.
// Exact for admitted hits and for denied ones when the window was already at its limit (so
// always for hits 1); a denied multi-hit request that crossed the limit is counted whole as
// over_limit (the Decision does not say where the count stood before it).
struct HitStats {
  uint64_t total_hits = 0, within_limit = 0, near_limit = 0, over_limit = 0, shadow_mode = 0;
};
HitStats hit_stats(uint32_t limit, float near_limit_ratio, uint64_t hits, bool allowed,
                   int64_t remaining, bool shadow);

// The metric name of a stats key: sanitize_stat_name(key) without its leading "domain." (every
// key starts with its domain, which labels the metric apart).
std::string stat_name(std::string_view key, std::string_view domain);

// envoyproxy/ratelimit's SanitizeStatName: ':' and '|' become '_', and the dots of anything
// shaped like an IPv4 address (d.d.d.d, 1-3 digits each) become '_'.
std::string sanitize_stat_name(std::string_view key);

// Wildcard match as envoyproxy/ratelimit does it: `pattern` split on '*'; `text` must start
// with the first part, end with the last, and contain the middle parts in order, without
// overlap. A pattern without '*' matches only itself.
bool wildcard_match(std::string_view pattern, std::string_view text);

}  // namespace ratelimit::rls
