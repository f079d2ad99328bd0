// fair_share.h — the math of Envoy's Rate Limit Quota Service (RLQS) in ratelimitd: how a
// bucket's global rate is divided among the clients (Envoys) that report it, and how a share is
// written as an assignment Envoy's client actually applies.
//
// Why here: this is decision math, so it has one home (src/core/fair_share.cc), pure and
// clock-free (the caller passes `now`), held by the shared vectors tests/vectors/fair_share.json.
// The RLQS service (src/rlqs) keeps the per-bucket state and calls only these functions; the
// simulator may call them to model a fleet.
//
// Units: rates (demands, shares, capacities) are integer milli-requests per second (mrps:
// 1 rps = 1000), times integer microseconds, as everywhere in the library.
//
// The rules (docs/envoy.md "Rate Limit Quota Service" says the same for users):
//   demand     a report's (allowed + denied) / time_elapsed, floor, in mrps. Denied requests
//              count, so a client held below what it wants shows its real demand and can grow.
//              time_elapsed 0 (Envoy's first report of a bucket) gives no demand: unknown.
//   unknown    a client whose demand is unknown (new, or its first report of the bucket) is
//              taken as wanting the equal share capacity / clients. Why: it must get a share at
//              once (Envoy would otherwise deny its traffic for a whole report interval), the
//              equal share is the most max-min fairness could give it without knowing more, and
//              it bounds the transient: the others' standing assignments are lowered at their
//              next report, so for at most one report interval the assignments may sum to the
//              capacity plus that equal share.
//   shares     max-min fairness (water-filling): clients in ascending order of demand (ties by
//              their position in the input); each gets min(its demand, what is left / clients
//              left). A client wanting less than an equal share gets its demand; the rest is
//              divided among the others. Integer division leaves no unit behind: the last
//              client takes what is left. Then the spare (capacity − Σ shares, non-zero only
//              when every demand is met) is divided equally among all clients as headroom (the
//              remainder one unit each to the first in that order), so a client whose demand
//              rises can use the idle part of the limit before its next report. Σ shares =
//              capacity whenever there is a client; each share ≥ min(demand, capacity / n).
//   assignment a share as Envoy applies it: Envoy applies only a token_bucket or a blanket rule,
//              reads tokens_per_fill unset as 0, needs fill_interval whole seconds ≥ 1 (it
//              divides by the truncated seconds), and sees no change when only fill_interval
//              changed. So: share ≥ 1 rps → tokens_per_fill = max_tokens = ⌊share⌋ per 1 s;
//              below 1 rps → ⌊60 × share⌋ per 60 s; a share that makes no token → DENY_ALL
//              (Envoy's proto refuses 0 tokens). If the result differs from the previous
//              assignment only in fill_interval, max_tokens is one more so Envoy sees a change.
//              Tokens are floors of the share: a new assignment never exceeds its share.
//   hysteresis Envoy replaces a changed token bucket by a new, full one (max_tokens at once):
//              every change can let a burst through. So the client's previous token bucket is
//              kept while its rate is within [95 % of the share, the share]: 190 → 195 changes
//              nothing. Never above the share, so a decrease (191 → 190) is still sent: the
//              assignments' sum stays within the capacity.
//   TTL        assignment_time_to_live = interval + ⌈interval / 2⌉ whole seconds (≥ 2 s), the
//              interval being the client's report interval: its last non-zero time_elapsed;
//              until one is known, the largest of the bucket's other clients' intervals and the
//              configured default (Envoys of one fleet share a reporting_interval; a first
//              assignment that lapsed before the second report would fall back to Envoy's
//              expired_assignment_behavior). Longer than one interval so a report late by up to half an
//              interval keeps the assignment; whole seconds because Envoy expires anything
//              under 1 s at once. A client that stops reporting (or whose stream closed) keeps
//              its place in the division until its last assignment's TTL has passed — Envoy
//              enforces that assignment until then — and then gives its share back.
//   instances  several ratelimitd behind one Redis divide one limit: each publishes its
//              clients' demands and expiries (local()) and takes the others' as remote clients
//              (set_remote()): demand-only entries that take part in the division, after the
//              local ones in its order, and get no assignment here. Each instance then assigns
//              its own clients their shares of the division of the whole fleet, so the
//              assignments of all instances sum to the capacity once their views agree. A
//              remote client leaves the division at its expiry (its assignment's TTL, as the
//              instance serving it saw it), so an instance that stops publishing (Redis down,
//              or the instance gone) is forgotten within a TTL: local-only division again.
//              The views disagree for at most the exchange's staleness (docs/envoy.md); while
//              they do, an instance that underestimates the others' demand over-assigns.
// Thread-safety: free functions are stateless; a BucketShares belongs to one caller (the
// service serialises access to it).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "ratelimit/status.h"

namespace ratelimit::fair_share {

inline constexpr int64_t kMrpsPerRps = 1000;
// Bounds on a report: larger counts or intervals are refused as absurd (a uint64 from the wire
// above 2^40 requests, or more than a day between reports).
inline constexpr int64_t kMaxReportCount = int64_t{1} << 40;
inline constexpr int64_t kMaxElapsedUs = int64_t{86'400} * 1'000'000;
// Bound on a capacity: 10^12 mrps (a billion requests per second).
inline constexpr int64_t kMaxCapacityMrps = int64_t{1'000'000'000'000};
// The report interval assumed until a client's reports show one.
inline constexpr int64_t kDefaultIntervalS = 1;
// Seconds of the slow fill (shares below 1 rps).
inline constexpr int64_t kSlowFillS = 60;

// The demand of one report, in mrps: (allowed + denied) × 10^6 × 1000 / elapsed_us, floor, at
// most kMaxCapacityMrps.
// nullopt when elapsed_us is 0 (unknown). InvalidArgument when a count or elapsed_us is negative
// or above its bound (kMaxReportCount, kMaxElapsedUs).
[[nodiscard]] Result<std::optional<int64_t>> report_demand(int64_t allowed, int64_t denied, int64_t elapsed_us);

// A bucket's global limit of `limit` requests per `unit_s` seconds as a capacity in mrps
// (floor). InvalidArgument when limit < 0, unit_s < 1, or the capacity exceeds kMaxCapacityMrps.
[[nodiscard]] Result<int64_t> capacity_mrps(int64_t limit, int64_t unit_s);

// Max-min fair shares of `capacity` (≥ 0) among `demands` (each ≥ 0, or nullopt: unknown,
// taken as capacity / n), with the spare divided as headroom (rules above). Same order and size
// as `demands`.
std::vector<int64_t> max_min_shares(int64_t capacity, std::span<const std::optional<int64_t>> demands);

// An assignment in the shape Envoy applies (envoy.type.v3.TokenBucket or a blanket rule).
struct Assignment {
  enum class Kind : uint8_t { kTokenBucket, kDenyAll, kAllowAll };
  Kind kind = Kind::kDenyAll;
  int64_t max_tokens = 0;
  int64_t tokens_per_fill = 0;
  int64_t fill_interval_s = 0;
  int64_t ttl_s = 0;        // assignment_time_to_live (whole seconds)
  int64_t share_mrps = 0;   // the share it was made from (for metrics and tests)
  friend bool operator==(const Assignment&, const Assignment&) = default;
};

// The token bucket (or DENY_ALL) for `share_mrps`; `previous` is the client's last assignment,
// if any (the hysteresis and fill_interval-only change rules). ttl_s is left for the caller.
Assignment token_bucket_for(int64_t share_mrps, const Assignment* previous);

// assignment_time_to_live for a client reporting every `interval_s` seconds (≥ 1; 0 or less is
// read as kDefaultIntervalS).
int64_t assignment_ttl_s(int64_t interval_s);

// A client as another instance sees it (the instances rule): its demand (nullopt: unknown,
// taken as the equal share) and the time its assignment expires, in the receiver's clock.
struct RemoteClient {
  std::optional<int64_t> demand;
  int64_t expires_at_us = 0;
  friend bool operator==(const RemoteClient&, const RemoteClient&) = default;
};

// One bucket's clients and their demands: the state the service keeps per bucket, with every
// rule above applied on each report. Clock-free: every call takes now_us.
// Invariant: clients_ holds only clients whose TTL had not passed at the last call; remote_
// likewise.
class BucketShares {
 public:
  // A report of `client` (any id stable for the client: the service uses its stream) for this
  // bucket whose capacity is now `capacity` mrps: records its demand (or keeps it unknown),
  // interval and expiry, drops clients whose TTL passed, and returns its assignment.
  // InvalidArgument (nothing changed) for a report report_demand() refuses.
  // `default_interval_s`: the report interval assumed for a client whose reports have not shown
  // its own (the TTL rule above).
  [[nodiscard]] Result<Assignment> report(uint64_t client, int64_t allowed, int64_t denied, int64_t elapsed_us,
                                          int64_t capacity, int64_t now_us,
                                          int64_t default_interval_s = kDefaultIntervalS);
  // Drops clients (local and remote) whose TTL passed; returns how many local ones remain.
  size_t expire(int64_t now_us);
  // Replaces the other instances' clients of this bucket (the instances rule): they count in
  // every later report's division until their expiry, and get no assignment here.
  void set_remote(std::vector<RemoteClient> remote) { remote_ = std::move(remote); }
  // This instance's clients as the others must see them (after expire(now_us)): demand and
  // assignment expiry, in arrival order.
  std::vector<RemoteClient> local(int64_t now_us);
  // Clients taking part (after the last expire()/report()): local ones, remote ones.
  size_t clients() const { return clients_.size(); }
  size_t remote_clients() const { return remote_.size(); }
  // Σ of the clients' known demands, mrps (unknown ones count 0).
  int64_t known_demand() const;
  // Σ of the rates of the clients' last assignments, mrps (DENY_ALL counts 0).
  int64_t assigned() const;
  // The latest time any client's assignment is still valid (0 when none): idle after it.
  int64_t busy_until_us() const;

 private:
  struct Client {
    uint64_t id = 0;
    std::optional<int64_t> demand;
    int64_t interval_s = kDefaultIntervalS;
    int64_t expires_at_us = 0;
    std::optional<Assignment> last;
  };
  std::vector<Client> clients_;  // in order of arrival (the tie-break of max_min_shares)
  std::vector<RemoteClient> remote_;  // the other instances' clients, after the local ones
};

}  // namespace ratelimit::fair_share
