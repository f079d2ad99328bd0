// denial_memory.cc — DenialCache::Core's methods: finding, remembering and forgetting denials
// in the shards (see denial_memory.h for the layout and its invariants).
#include "denial_memory.h"

#include <algorithm>
#include <functional>

namespace ratelimit {

void DenialCache::Core::erase(Shard& s,
                              std::unordered_map<std::string_view, Entry>::iterator it) {
  const auto pos = it->second.pos;
  s.map.erase(it);
  s.order.erase(pos);
  entries.fetch_sub(1, std::memory_order_relaxed);
}

bool DenialCache::Core::expired(const Entry& e, int64_t now) const {
  if (now < e.last_denied_at) return false;  // clock stepped back: decided by the slots
  for (const Slot& slot : e.slots) {
    if (slot.live(now)) return false;
  }
  return true;
}

DenialCache::Core::Lookup DenialCache::Core::lookup(std::string_view composite,
                                                    const PolicyParams& params, int64_t limit,
                                                    int64_t cost, int64_t now) {
  Shard& s = shard_of(composite);
  Lookup out;
  MutexLock lock(s.mu);
  out.generation = s.generation;
  auto it = s.map.find(composite);
  if (it == s.map.end()) return out;
  Entry& e = it->second;
  if (e.params != params) return out;  // another definition; replaced when one is remembered
  for (const Slot& slot : e.slots) {
    if (!slot.live(now)) continue;
    if (slot.cost == cost) {
      out.hit = true;
      Decision& d = out.decision;
      d.allowed = false;
      d.reason = DecisionReason::kOverLimit;
      d.limit = limit;
      d.remaining = slot.remaining;
      d.retry_after = Micros{slot.retry_at - now};
      d.reset_after = Micros{std::max<int64_t>(0, slot.reset_at - now)};
      d.delay = Micros{0};
      return out;
    }
  }
  return out;
}

void DenialCache::Core::drop_expired_tail(Shard& s, int64_t now) {
  for (int i = 0; i < 2 && !s.order.empty(); ++i) {
    auto it = s.map.find(std::string_view(s.order.back()));
    if (!expired(it->second, now)) return;
    erase(s, it);
  }
}

void DenialCache::Core::remember(std::string_view composite, const PolicyParams& params,
                                 int64_t cost, int64_t denied_at, uint64_t generation,
                                 const Decision& d) {
  Shard& s = shard_of(composite);
  MutexLock lock(s.mu);
  if (s.generation != generation) return;  // a reset ran while this was in flight
  const int64_t now = clock->now().count();
  auto it = s.map.find(composite);
  if (it == s.map.end()) {
    s.order.emplace_front(composite);
    Entry e;
    e.params = params;
    e.pos = s.order.begin();
    it = s.map.emplace(std::string_view(s.order.front()), e).first;
    bump(entries);
  } else {
    s.order.splice(s.order.begin(), s.order, it->second.pos);
  }
  Entry& e = it->second;
  if (e.params != params) {
    e.params = params;
    e.slots = {};
  }
  // The slot of this cost, else an empty or dead one, else the one that expires first.
  Slot* slot = nullptr;
  for (Slot& x : e.slots) {
    if (x.cost == cost) {
      slot = &x;
      break;
    }
  }
  if (slot == nullptr) {
    for (Slot& x : e.slots) {
      if (!x.live(now)) {
        slot = &x;
        break;
      }
    }
  }
  if (slot == nullptr) {
    slot = &*std::min_element(e.slots.begin(), e.slots.end(), [](const Slot& a, const Slot& b) {
      return a.expires_at < b.expires_at;
    });
  }
  slot->cost = cost;
  slot->denied_at = denied_at;
  slot->retry_at = denied_at + d.retry_after.count();
  slot->expires_at = denied_at + std::min(d.retry_after.count(), options.max_ttl.count());
  slot->reset_at = denied_at + d.reset_after.count();
  for (Slot& x : e.slots) x.remaining = d.remaining;  // the newest figure for every cost
  e.last_denied_at = std::max(e.last_denied_at, denied_at);
  bump(inserts);

  drop_expired_tail(s, now);
  while (s.map.size() > per_shard) {
    auto oldest = s.map.find(std::string_view(s.order.back()));
    if (!expired(oldest->second, now)) bump(evictions);
    erase(s, oldest);
  }
}

void DenialCache::Core::learn(std::string_view composite, const PolicyParams& params,
                              int64_t cost, int64_t denied_at, uint64_t generation,
                              const Result<Decision>& r) {
  if (!r.ok()) return;
  const Decision& d = *r;
  if (d.reason == DecisionReason::kOverLimit && d.retry_after.count() > 0) {
    remember(composite, params, cost, denied_at, generation, d);
  }
}

void DenialCache::Core::forget(std::string_view composite) {
  Shard& s = shard_of(composite);
  MutexLock lock(s.mu);
  ++s.generation;
  auto it = s.map.find(composite);
  if (it == s.map.end()) return;
  erase(s, it);
  bump(invalidations);
}

}  // namespace ratelimit
