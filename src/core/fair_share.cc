// fair_share.cc — RLQS fair shares: demand from a report, max-min division of a bucket's
// capacity, a share as the token bucket Envoy applies, the assignment TTL, and one bucket's
// clients (contracts and the reasons for each rule in include/ratelimit/fair_share.h).
// Held by the shared vectors tests/vectors/fair_share.json; no Lua mirror (the service keeps
// this state in memory).
// Invariants: integer mrps and microseconds throughout, no clock read; Σ max_min_shares =
// capacity when there is a client; an assignment's tokens never exceed its share (kept ones too).
#include "ratelimit/fair_share.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

namespace ratelimit::fair_share {
namespace {

constexpr int64_t kUsPerS = 1'000'000;

Assignment deny_all(int64_t share_mrps) {
  Assignment a;
  a.kind = Assignment::Kind::kDenyAll;
  a.share_mrps = share_mrps;
  return a;
}

}  // namespace

Result<std::optional<int64_t>> report_demand(int64_t allowed, int64_t denied, int64_t elapsed_us) {
  if (allowed < 0 || denied < 0) return Status::invalid_argument("request counts must not be negative");
  if (allowed > kMaxReportCount || denied > kMaxReportCount) {
    return Status::invalid_argument("request counts above " + std::to_string(kMaxReportCount) + " are refused");
  }
  if (elapsed_us < 0 || elapsed_us > kMaxElapsedUs) {
    return Status::invalid_argument("time_elapsed must be between 0 and 86400 s");
  }
  if (elapsed_us == 0) return std::optional<int64_t>{};
  // (allowed + denied) × 10^9 fits int64 up to 9.2 × 10^9 requests: exact (floor) below that;
  // above it (over 10^5 rps for a day, or absurd), double's 53 bits are as good as the cap.
  const int64_t units = allowed + denied;
  constexpr int64_t kScale = kUsPerS * kMrpsPerRps;
  const int64_t mrps = units <= std::numeric_limits<int64_t>::max() / kScale
                           ? units * kScale / elapsed_us
                           : static_cast<int64_t>(std::min(static_cast<double>(units) * kScale / static_cast<double>(elapsed_us),
                                                           static_cast<double>(kMaxCapacityMrps)));
  // A demand above the largest capacity wants all of any capacity: kept at that bound, so sums
  // of many clients' demands stay far from overflow.
  return std::optional<int64_t>{std::min(mrps, kMaxCapacityMrps)};
}

Result<int64_t> capacity_mrps(int64_t limit, int64_t unit_s) {
  if (limit < 0) return Status::invalid_argument("a limit must not be negative");
  if (unit_s < 1) return Status::invalid_argument("a unit must be at least 1 s");
  // limit ≤ 10^12 keeps limit × 1000 in int64; a larger limit is refused whatever its unit.
  if (limit > kMaxCapacityMrps) return Status::invalid_argument("a limit above 10^12 is refused");
  const int64_t mrps = limit * kMrpsPerRps / unit_s;
  if (mrps > kMaxCapacityMrps) return Status::invalid_argument("a limit above 10^9 requests per second is refused");
  return mrps;
}

std::vector<int64_t> max_min_shares(int64_t capacity, std::span<const std::optional<int64_t>> demands) {
  const size_t n = demands.size();
  std::vector<int64_t> shares(n, 0);
  if (n == 0 || capacity <= 0) return shares;
  const int64_t equal = capacity / static_cast<int64_t>(n);
  std::vector<int64_t> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = demands[i] ? std::max<int64_t>(0, *demands[i]) : equal;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return want[a] < want[b]; });
  int64_t left = capacity;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = order[k];
    // The last one's fair part is all that is left: no unit stays behind.
    shares[i] = std::min(want[i], left / static_cast<int64_t>(n - k));
    left -= shares[i];
  }
  // Every demand met: the spare is headroom, equally (remainder one unit each, in order).
  const int64_t each = left / static_cast<int64_t>(n);
  int64_t extra = left % static_cast<int64_t>(n);
  for (size_t k = 0; k < n; ++k) {
    shares[order[k]] += each + (extra > 0 ? 1 : 0);
    if (extra > 0) --extra;
  }
  return shares;
}

Assignment token_bucket_for(int64_t share_mrps, const Assignment* previous) {
  if (previous != nullptr && previous->kind == Assignment::Kind::kTokenBucket && previous->fill_interval_s > 0) {
    // Hysteresis: a previous bucket close to the share stays (a change is a burst in Envoy).
    const int64_t rate = previous->tokens_per_fill * kMrpsPerRps / previous->fill_interval_s;
    // Never above the share: the assignments' sum stays within the capacity.
    if (rate <= share_mrps && rate * 20 >= share_mrps * 19) {
      Assignment kept = *previous;
      kept.share_mrps = share_mrps;
      return kept;
    }
  }
  Assignment a;
  a.share_mrps = share_mrps;
  if (share_mrps >= kMrpsPerRps) {
    a.fill_interval_s = 1;
    a.tokens_per_fill = share_mrps / kMrpsPerRps;
  } else {
    a.fill_interval_s = kSlowFillS;
    a.tokens_per_fill = share_mrps * kSlowFillS / kMrpsPerRps;
  }
  if (a.tokens_per_fill <= 0) return deny_all(share_mrps);
  a.kind = Assignment::Kind::kTokenBucket;
  a.max_tokens = a.tokens_per_fill;
  if (previous != nullptr && previous->kind == Assignment::Kind::kTokenBucket &&
      previous->tokens_per_fill == a.tokens_per_fill && previous->max_tokens == a.max_tokens &&
      previous->fill_interval_s != a.fill_interval_s) {
    a.max_tokens += 1;  // Envoy compares fill_interval's nanos only: make the change visible
  }
  return a;
}

int64_t assignment_ttl_s(int64_t interval_s) {
  const int64_t i = interval_s >= 1 ? interval_s : kDefaultIntervalS;
  return std::max<int64_t>(2, i + (i + 1) / 2);
}

Result<Assignment> BucketShares::report(uint64_t client, int64_t allowed, int64_t denied, int64_t elapsed_us,
                                        int64_t capacity, int64_t now_us, int64_t default_interval_s) {
  auto demand = report_demand(allowed, denied, elapsed_us);
  if (!demand.ok()) return demand.status();
  expire(now_us);
  auto it = std::find_if(clients_.begin(), clients_.end(), [&](const Client& c) { return c.id == client; });
  if (it == clients_.end()) {
    // Its interval is not known yet: the fleet's (the others' longest) or the configured one.
    int64_t interval = std::max<int64_t>(1, default_interval_s);
    for (const Client& c : clients_) interval = std::max(interval, c.interval_s);
    clients_.push_back(Client{client, std::nullopt, interval, 0, std::nullopt});
    it = clients_.end() - 1;
  }
  if (demand->has_value()) {
    it->demand = **demand;
    it->interval_s = std::max<int64_t>(1, elapsed_us / kUsPerS);
  }
  std::vector<std::optional<int64_t>> demands;
  demands.reserve(clients_.size() + remote_.size());
  for (const Client& c : clients_) demands.push_back(c.demand);
  for (const RemoteClient& r : remote_) demands.push_back(r.demand);  // after ours: indices stay
  const std::vector<int64_t> shares = max_min_shares(capacity, demands);
  const int64_t share = shares[static_cast<size_t>(it - clients_.begin())];
  Assignment a = token_bucket_for(share, it->last ? &*it->last : nullptr);
  a.ttl_s = assignment_ttl_s(it->interval_s);
  it->expires_at_us = now_us + a.ttl_s * kUsPerS;
  it->last = a;
  return a;
}

size_t BucketShares::expire(int64_t now_us) {
  std::erase_if(clients_, [&](const Client& c) { return c.expires_at_us <= now_us; });
  std::erase_if(remote_, [&](const RemoteClient& r) { return r.expires_at_us <= now_us; });
  return clients_.size();
}

std::vector<RemoteClient> BucketShares::local(int64_t now_us) {
  expire(now_us);
  std::vector<RemoteClient> out;
  out.reserve(clients_.size());
  for (const Client& c : clients_) out.push_back({c.demand, c.expires_at_us});
  return out;
}

int64_t BucketShares::known_demand() const {
  int64_t sum = 0;
  for (const Client& c : clients_) sum += c.demand.value_or(0);
  return sum;
}

int64_t BucketShares::assigned() const {
  int64_t sum = 0;
  for (const Client& c : clients_) {
    if (c.last && c.last->kind == Assignment::Kind::kTokenBucket && c.last->fill_interval_s > 0) {
      sum += c.last->tokens_per_fill * kMrpsPerRps / c.last->fill_interval_s;
    }
  }
  return sum;
}

int64_t BucketShares::busy_until_us() const {
  int64_t until = 0;
  for (const Client& c : clients_) until = std::max(until, c.expires_at_us);
  return until;
}

}  // namespace ratelimit::fair_share
