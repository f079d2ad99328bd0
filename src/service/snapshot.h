// snapshot.h — the configuration the decision service decides against: the rules (named
// policies with their shadow flag and counters), immutable once published, and SnapshotCell,
// the published pointer that readers on hot paths cache per thread.
//
// Why immutable and swapped whole: a reload builds a new snapshot off to the side and
// publishes it in one step, so a request sees one configuration from start to end and nothing
// half-applies. Why a per-thread cache: taking a shared_ptr copy per request would bounce the
// reference count's cache line between I/O threads; a thread re-reads the pointer only when the
// generation it cached is no longer the published one.
// Invariants: a published Snapshot never changes; Rule::counters is never null and outlives
// every snapshot (the daemon's Metrics never frees counters).
// Thread-safety: Snapshot is read-only (any thread); SnapshotCell's methods may be called from
// any thread, each thread with its own Cache.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mutex.h"
#include "ratelimit/policy.h"
#include "ratelimit/priority.h"
#include "rule_counters.h"

namespace ratelimit::service {

// One limit the service decides: the policy (its name namespaces its state in the store),
// whether it is in shadow mode (decided and counted, always answered as admitted), its counters.
struct Rule {
  Policy policy;
  bool shadow = false;
  RuleCounters* counters = nullptr;
  // Bounds of a per-request limit (Policy::with_limit of `policy`); max 0: none allowed.
  int64_t request_limit_min = 0;
  int64_t request_limit_max = 0;
  // Waiting (waiting.h): how long a denied acquire may wait, and how many may wait per key.
  // max_wait 0: never waits.
  Micros max_wait{0};
  int64_t max_queue = 0;
  // Shape-mode leaky bucket: the answer to an admitted acquire is held for its delay.
  bool hold_delay = false;
  // Priority classes, highest first (include/ratelimit/priority.h); empty: none. An Item's
  // `priority` indexes it; each class's own limit is class_policies[class] (Policy::with_limit).
  std::vector<algo::PriorityClass> classes{};
  std::vector<Policy> class_policies{};
};

// Heterogeneous lookup so a rule is found by string_view without allocating.
struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

struct Snapshot {
  // The named policies of the native API (POST /v1/acquire ...), by name.
  std::unordered_map<std::string, Rule, NameHash, std::equal_to<>> rules;
  // Every rule in shadow mode whatever its own flag (Envoy's SHADOW_MODE).
  bool shadow_all = false;

  const Rule* find(std::string_view name) const {
    auto it = rules.find(name);
    return it == rules.end() ? nullptr : &it->second;
  }
};

// One reader's cache of a published value (one per thread): the value it last read and the
// generation it read it at, so a reader re-reads only after a newer publish.
template <typename T>
struct SnapshotCache {
  std::shared_ptr<const T> value;
  uint64_t generation = 0;
};

// A read-only view of one part of what a SnapshotCell publishes, with the same per-thread cache.
// Why: a library that knows nothing of the whole (Envoy's API in src/rls reads only its rules)
// still follows the one cell the whole is published in, so its part changes in the same swap as
// everything else — a request never sees the new part beside the old rest.
// Thread-safety: as SnapshotCell (any thread, each with its own Cache); the view must not
// outlive its cell.
template <typename Part>
class SnapshotView {
 public:
  using Cache = SnapshotCache<Part>;
  // The part of the cell's value as of this call, and the cell's generation it was read at.
  using Load = std::function<std::pair<std::shared_ptr<const Part>, uint64_t>()>;

  // `generation` is the cell's; `load` reads the part from the cell's current value.
  SnapshotView(const std::atomic<uint64_t>& generation, Load load) : generation_(&generation), load_(std::move(load)) {}

  // The part as of this call; `cache` is refreshed when the cell published a newer whole.
  // The reference stays valid until the next get() with the same cache.
  const Part& get(Cache& cache) const {
    if (cache.generation != generation_->load(std::memory_order_acquire) || !cache.value) {
      std::tie(cache.value, cache.generation) = load_();
    }
    return *cache.value;
  }
  std::shared_ptr<const Part> get() const { return load_().first; }

 private:
  const std::atomic<uint64_t>* generation_;
  Load load_;
};

// The currently published value of T, with a per-thread cache (see top). T is immutable once
// published.
template <typename T>
class SnapshotCell {
 public:
  using Cache = SnapshotCache<T>;

  explicit SnapshotCell(std::shared_ptr<const T> first) { publish(std::move(first)); }

  // Replaces the published value; returns its generation (1 for the first value).
  uint64_t publish(std::shared_ptr<const T> next) {
    MutexLock lock(mu_);
    current_ = std::move(next);
    const uint64_t g = generation_.load(std::memory_order_relaxed) + 1;
    generation_.store(g, std::memory_order_release);
    return g;
  }
  // The published value, as of this call; `cache` is refreshed when a newer one was published.
  // The reference stays valid until the next get() with the same cache.
  const T& get(Cache& cache) const {
    const uint64_t g = generation_.load(std::memory_order_acquire);
    if (cache.generation != g || !cache.value) {
      MutexLock lock(mu_);
      cache.value = current_;
      cache.generation = generation_.load(std::memory_order_relaxed);
    }
    return *cache.value;
  }
  std::shared_ptr<const T> get() const {
    MutexLock lock(mu_);
    return current_;
  }
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  // A view of the part of every published value held in `part` (never null in a published
  // value). The view reads this cell: it must not outlive it.
  template <typename Part>
  SnapshotView<Part> view(std::shared_ptr<const Part> T::*part) const {
    return SnapshotView<Part>(generation_, [this, part] {
      MutexLock lock(mu_);
      return std::pair{(*current_).*part, generation_.load(std::memory_order_relaxed)};
    });
  }

 private:
  mutable Mutex mu_;
  std::shared_ptr<const T> current_ RL_GUARDED_BY(mu_);
  std::atomic<uint64_t> generation_{0};
};

}  // namespace ratelimit::service
