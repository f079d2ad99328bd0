// denial_cache.h — an exact local cache of denials in front of any Store: once the store has
// denied a request, repeats of that same request are denied locally, with no round trip, until
// the moment the store could first admit it.
//
//   auto redis = ratelimit::RedisStore::connect(opts).value();
//   auto store = ratelimit::DenialCache::wrap(redis, {}).value();   // a Store like any other
//   ratelimit::Limiter limiter(policy, store);
//
// Why it is exact: a denial of (policy, key, cost) at time t with retry_after R says the store
// cannot admit that request before t + R. Other clients of the same store (other ratelimitd
// instances) can only consume units, which moves that moment later, never earlier; so a cached
// denial is never wrong before t + R, and after it the request goes to the store again. The only
// ways to give units back are a reset and the store losing state:
//   - reset through this cache forgets the key here first (every cost, at once), and denials
//     that were in flight across the reset are not remembered;
//   - reset through another instance (or a Redis FLUSHALL, an evicted key) is not seen here:
//     a cached denial may keep answering for at most options.max_ttl after it was made (and
//     never past its retry_after). That is the bound; lower max_ttl to tighten it. (An admission
//     passing through does not make the cache forget: answers on several connections arrive
//     in any order, so one processed after a denial may well have been decided before it.)
// What is never cached: admissions; kExceedsCapacity denials (nothing to wait for); the
// failure policy's answers (kStoreFailedOpen / kStoreFailedClosed: the store did not decide);
// policies in count-denied mode or counting every hit (every attempt must reach the store to be
// counted; every-hit policies unless options.remember_every_hit), concurrency policies (a
// release frees units before any retry_after), and cost 0 (a check) — those calls pass
// straight through.
//
// What a cached answer contains, at time now, for a denial remembered at time t:
//   allowed = false, reason = kOverLimit, limit = the policy's, delay = 0,
//   retry_after = t + R - now (> 0), reset_after = max(0, t + reset_after - now),
//   remaining = the remaining of that denial.
// With no other traffic on the key that is the store's own answer: retry_after and reset_after
// are absolute instants minus now in every algorithm, and for cost 1 remaining is 0 throughout
// a denial. Other traffic — other instances', or admissions through this cache at a lower cost
// — can only move the store's instants later, so a cached retry_after is never longer than the
// store's (the denial ends here no later than there); and for cost > 1 remaining (cost-1
// requests that would pass) changes while the costly request is still denied (units expire,
// tokens refill, others consume), so the cached figure is the one at the denial. t is read from
// options.clock just before the store is asked, so it never follows the store's own decision
// time: a cached retry_after may be short by the time the request took to reach the store (for
// Redis: about half a round trip), never long.
// Keys: a denial of cost 5 says nothing about cost 1, so entries are per (policy, key, cost);
// the policy is identified by its name and every parameter, so a policy redefined under the
// same name (a configuration reload) never meets the old definition's denials.
//
// Memory: at most options.max_entries (policy, key) entries, each remembering up to
// kDenialCacheCostsPerKey costs; the oldest entry of a full shard makes room (an eviction,
// counted unless it had expired). About 370 allocator bytes per entry with a short key (365
// measured with 10-byte keys, tests/denial_cache), plus the key's length beyond 15 bytes.
//
// Thread-safety: every method may be called from any thread, concurrently. Completions run
// where the inner store runs them, or inline (a cached answer, always before the call returns).
// The cache keeps the inner store alive; completions the inner store calls after the cache is
// gone are safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ratelimit/clock.h"
#include "ratelimit/store.h"

namespace ratelimit {

inline constexpr size_t kDenialCacheCostsPerKey = 4;

// Everything configurable, with defaults. In ratelimitd's YAML:
//   store: { type: redis, url: ..., denial_cache: { max_entries: 100000, max_ttl: 1s } }
struct DenialCacheOptions {
  // Bound on (policy, key) entries held. 1 ... 100,000,000. Default 100,000.
  size_t max_entries = 100'000;
  // Longest time a denial answers locally after it was made, whatever its retry_after: the
  // bound on how long a reset through another instance can go unseen here. 1 ms ... 366 days.
  // Default 1 s: a key denied for a minute costs the store one call per second per instance.
  Micros max_ttl{1'000'000};
  // Lock shards, rounded up to a power of two (1 ... 1024). Default 16.
  size_t shards = 16;
  // Time source for remembering and aging denials; only differences are used. nullptr (the
  // default) is a monotonic clock (std::chrono::steady_clock), which NTP steps cannot move.
  // Tests pass a ManualClock (the same one as the inner MemoryStore's, to compare answers).
  // Not owned; must outlive the cache.
  const Clock* clock = nullptr;
  // Remember the denials of policies counting every hit (Policy::fixed_window_every_hit) too,
  // as envoyproxy/ratelimit's local cache (LOCAL_CACHE_SIZE_IN_BYTES) does: while a denial is
  // remembered, the hits it answers are not counted in the store — envoyproxy/ratelimit's
  // behaviour, and the point (an over-limit key costs the store nothing until its window
  // ends). The decisions stay exact: a denied every-hit key stays denied for the rest of its
  // window whatever is counted. Default false (every attempt reaches the store).
  bool remember_every_hit = false;
};

// Monotonic counters since construction, for /metrics (entries is a gauge).
struct DenialCacheCounters {
  uint64_t hits = 0;           // decisions answered from the cache (no store call)
  uint64_t misses = 0;         // decisions passed to the store (cacheable policies only)
  uint64_t bypassed = 0;       // decisions passed through uncached (count-denied policies)
  uint64_t inserts = 0;        // denials remembered
  uint64_t evictions = 0;      // entries still live dropped to stay within max_entries
  uint64_t invalidations = 0;  // entries dropped by a reset through this cache
  uint64_t entries = 0;        // (policy, key) entries held now
};

class DenialCache final : public StoreDecorator {
 public:
  // Wraps `inner` (shared: the cache keeps it alive). kInvalidArgument for a null store or an
  // option out of range (the message names it).
  static Result<std::shared_ptr<DenialCache>> wrap(std::shared_ptr<Store> inner,
                                                   DenialCacheOptions options = {});
  ~DenialCache() override;

  // The door (store.h). A remembered denial completes inline; anything else is the inner
  // store's call, whose answer (and errors) pass through unchanged. A single op (acquire or
  // peek: a denied request changes nothing, so they agree, and the store's peek denials are
  // remembered like acquire's) is answered from the cache when a denial of it is remembered.
  // kIndependent: each op answered from the cache when it has a remembered denial, the others
  // by one decide_many call of the inner store (their denials remembered). kAllOrNothing
  // (acquire_all too): answered here only when every op has a remembered denial (each op's
  // answer in an all-or-nothing denial is its own peek); otherwise the store decides, and the
  // denials in its answer are remembered. A group with a policy whose denials change state
  // (count-denied, every-hit) passes straight through. Admissions passing through make nothing
  // forgotten. A call with a report (StoreOp::Kind::kReport) passes straight through, and the
  // reported keys' denials are forgotten before and after it (a report changes the answer).
  void decide_many_async(std::span<const StoreOp> ops, Atomicity atomicity,
                         OpsCallback done) override;
  // Forgets `key` under `policy` here (every cost) before and after the store's reset.
  void reset_async(const Policy& policy, std::string_view key, StatusCallback done) override;

  // Snapshot (each counter read atomically; the set is not one instant).
  DenialCacheCounters counters() const;
  const DenialCacheOptions& options() const;

  struct Core;

 private:
  DenialCache(std::shared_ptr<Store> inner, std::shared_ptr<Core> core);
  void pass_reports(std::span<const StoreOp> ops, Atomicity atomicity, OpsCallback done);
  std::shared_ptr<Core> core_;
};

}  // namespace ratelimit
