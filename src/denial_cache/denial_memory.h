// denial_memory.h — the memory of a DenialCache: remembered denials in sharded hash maps
// (DenialCache::Core), and the value types it keys and stores. Internal to src/denial_cache;
// denial_cache.cc puts it in front of a Store.
//
// Why its own file: what is remembered, for how long and what is dropped when a shard is full
// is one concern (this file and denial_memory.cc); when a request may be answered from it and
// how a store's answer reaches it is another (denial_cache.cc).
// Invariants (the whole argument is in denial_cache.cc's header):
//   - a (policy name, key) pair has at most one entry, in the shard its hash picks; the entry
//     holds the policy's parameters and up to kDenialCacheCostsPerKey denials, one per cost;
//   - a shard keeps its keys in the order they were last remembered: when full it drops the
//     oldest, and it drops expired ones from that end on every insert;
//   - a denial answers only for denied_at <= now < expires_at; a shard's generation changes on
//     every forget, and remember() with an older generation does nothing;
//   - every method takes its shard's lock itself and calls nothing outside this file under it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "mutex.h"
#include "ratelimit/denial_cache.h"

namespace ratelimit {
namespace denial_detail {

// Every parameter of a Policy but its name (the name is part of the map key).
struct PolicyParams {
  int64_t limit = 0;
  int64_t window_us = 0;
  uint64_t rate_bits = 0;
  Algorithm algorithm = Algorithm::kFixedWindow;
  LeakyMode mode = LeakyMode::kPolice;
  bool count_denied = false;
  bool every_hit = false;
  friend bool operator==(const PolicyParams&, const PolicyParams&) = default;

  static PolicyParams of(const Policy& p) {
    PolicyParams out;
    out.limit = p.limit();
    out.window_us = p.window().count();
    const double rate = p.rate();
    std::memcpy(&out.rate_bits, &rate, sizeof rate);
    out.algorithm = p.algorithm();
    out.mode = p.leaky_mode();
    out.count_denied = p.count_denied();
    out.every_hit = p.counts_every_hit();
    return out;
  }
};

// One remembered denial. cost == 0: an empty slot.
struct Slot {
  int64_t cost = 0;
  int64_t denied_at = 0;
  int64_t expires_at = 0;
  int64_t retry_at = 0;   // denied_at + retry_after
  int64_t reset_at = 0;   // denied_at + reset_after
  int64_t remaining = 0;

  bool live(int64_t now) const { return cost != 0 && denied_at <= now && now < expires_at; }
};

// The map key: the policy name's length (<= 64, one byte), the name, then the user key. Built on
// the stack: at most 1 + kMaxPolicyNameLength + kMaxKeyLength bytes.
class CompositeKey {
 public:
  CompositeKey(const Policy& policy, std::string_view key) {
    const std::string& name = policy.name();
    buf_[0] = static_cast<char>(name.size());
    std::memcpy(buf_ + 1, name.data(), name.size());
    std::memcpy(buf_ + 1 + name.size(), key.data(), key.size());
    size_ = 1 + name.size() + key.size();
  }
  std::string_view view() const { return {buf_, size_}; }

 private:
  char buf_[1 + kMaxPolicyNameLength + kMaxKeyLength];
  size_t size_;
};

}  // namespace denial_detail

struct DenialCache::Core {
  using PolicyParams = denial_detail::PolicyParams;
  using Slot = denial_detail::Slot;

  struct Entry {
    PolicyParams params;
    std::array<Slot, kDenialCacheCostsPerKey> slots;
    int64_t last_denied_at = 0;           // the newest slot's denied_at
    std::list<std::string>::iterator pos;  // its key in Shard::order
  };

  struct Shard {
    Mutex mu;
    // Keys, most recently remembered first; the map's string_views point into these nodes
    // (std::list never moves a node, splice included).
    std::list<std::string> order RL_GUARDED_BY(mu);
    std::unordered_map<std::string_view, Entry> map RL_GUARDED_BY(mu);
    uint64_t generation RL_GUARDED_BY(mu) = 0;
  };

  // What a lookup learned, for the answer's completion.
  struct Lookup {
    bool hit = false;
    Decision decision;
    uint64_t generation = 0;
  };

  DenialCacheOptions options;
  const Clock* clock = &MonotonicClock::instance();  // only differences matter
  size_t shard_mask = 0;
  size_t per_shard = 1;
  std::unique_ptr<Shard[]> shards;

  std::atomic<uint64_t> hits{0}, misses{0}, bypassed{0}, inserts{0}, evictions{0},
      invalidations{0}, entries{0};

  static void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.fetch_add(n, std::memory_order_relaxed);
  }

  Shard& shard_of(std::string_view composite) {
    return shards[std::hash<std::string_view>{}(composite) & shard_mask];
  }

  // Erases `it` (whose node is `pos`). Caller holds the shard's lock.
  void erase(Shard& s, std::unordered_map<std::string_view, Entry>::iterator it) RL_REQUIRES(s.mu);

  bool expired(const Entry& e, int64_t now) const;

  Lookup lookup(std::string_view composite, const PolicyParams& params, int64_t limit,
                int64_t cost, int64_t now);

  // Drops the oldest entries of `s` while they have expired (at most two per call: enough to
  // keep up with inserts, which call it). Caller holds the lock.
  void drop_expired_tail(Shard& s, int64_t now) RL_REQUIRES(s.mu);

  void remember(std::string_view composite, const PolicyParams& params, int64_t cost,
                int64_t denied_at, uint64_t generation, const Decision& d);

  // What a store's answer teaches: a denial to remember. Admissions, failure-policy answers and
  // errors teach nothing. (An admission does not make this cache forget: answers on several
  // connections arrive in any order, so an admission processed after a denial may well have
  // been decided before it. What an admission could reveal — a reset through another instance
  // — is bounded by max_ttl instead.)
  // `denied_at` is when the store was asked (the denial's time, if it is one); `generation`
  // is the lookup's.
  void learn(std::string_view composite, const PolicyParams& params, int64_t cost,
             int64_t denied_at, uint64_t generation, const Result<Decision>& r);

  // Forgets every cost of (policy, key) and starts a new generation in its shard.
  void forget(std::string_view composite);
};

}  // namespace ratelimit
