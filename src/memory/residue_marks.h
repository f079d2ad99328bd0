// residue_marks.h — the compact half of a MemoryStore shard's eviction residue: 8-byte marks
// (policy tag, 16-bit key fingerprint, idle time) for the restrictive keys (near their limit
// or denied) whose exact 24-byte cell (residue_table.h) was already taken by another key.
// A key found here is rebuilt as fully used until the mark's idle time. Internal to
// src/memory; guarded by the shard's lock.
//
// Why (issue 33 finding 1): merging the residues of a flood of keys at their limit into shared
// cells that every key hashing there was rebuilt from made a flood of 3 x max_keys refuse
// nearly every new key, of every policy, for a whole window. A mark speaks for one key of one
// policy; only when a bucket is full does the operator's choice apply (SaturationChoice):
//   - kRefuse: the policy's marks in the bucket fold into one saturation mark (fingerprint 0)
//     that every key of that policy hashing there is rebuilt from, until its idle time: no
//     restrictive residue is ever forgotten, and new keys of that policy in saturated buckets
//     are refused. A bucket full of other policies' marks folds the policy with the most marks
//     there (it needs two to free a slot; with none, the residue is dropped and counted);
//   - kAdmit: the mark that idles soonest (possibly the new one) is dropped and counted: that
//     key may be admitted its limit again; new keys are never refused.
// Policies get sequential 16-bit tags per shard (not a hash), so a mark never speaks for
// another policy; past 65,534 names, the rest share one tag (errs toward refusing).
// Idle times are stored in units of 2^15 us (32.8 ms), rounded up, from a base moved forward
// when now is 2^31 units past it (2.2 years: above the longest idle time, 2 x 366 days).
// Invariants: a mark with idle 0 or idle time <= now is empty; fingerprint 0 only in saturation
// marks; buckets are allocated on the first mark recorded.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "ratelimit/memory_store.h"

namespace ratelimit::memory {

class ResidueMarks {
 public:
  enum class Outcome { kKept, kSaturated, kDropped };

  // buckets: rounded up to a power of two, at least 2. No allocation yet.
  void init(size_t buckets) {
    size_t n = 2;
    while (n < buckets) n *= 2;
    mask_ = n - 1;
  }
  bool active() const { return buckets_ != nullptr; }
  size_t bytes() const { return active() ? (mask_ + 1) * sizeof(Bucket) : 0; }

  // Remembers that the key (store hash `hash`, policy `name_hash`) restricts until idle_at_us.
  Outcome record(uint64_t hash, uint64_t name_hash, int64_t idle_at_us, int64_t now_us,
                 SaturationChoice choice) {
    if (!active()) {
      buckets_ = std::make_unique<Bucket[]>(mask_ + 1);
      base_us_ = now_us;
    }
    if (now_us - base_us_ > kRebaseAfter * kUnitUs) rebase(now_us);
    const uint32_t idle = units(idle_at_us);
    const uint16_t tag = tag_of(name_hash, true);
    const uint16_t fp = fingerprint(hash);
    Mark* b = bucket(hash).m;
    Mark* free = nullptr;
    Mark* saturation = nullptr;
    for (int w = 0; w < kWays; ++w) {
      Mark& m = b[w];
      if (!live(m, now_us)) {
        if (free == nullptr) free = &m;
      } else if (m.policy == tag && m.fp == fp) {
        m.idle = std::max(m.idle, idle);  // its own older mark
        return Outcome::kKept;
      } else if (m.policy == tag && m.fp == 0) {
        saturation = &m;
      }
    }
    if (free != nullptr) {
      *free = {tag, fp, idle};
      return Outcome::kKept;
    }
    if (choice == SaturationChoice::kAdmit) return drop_soonest(b, {tag, fp, idle});
    if (saturation != nullptr) {
      saturation->idle = std::max(saturation->idle, idle);
      return Outcome::kSaturated;
    }
    return fold(b, {tag, fp, idle});
  }
  // The latest idle time of a live mark covering the key (its own or its policy's saturation
  // mark), or 0.
  int64_t recall(uint64_t hash, uint64_t name_hash, int64_t now_us) const {
    if (!active()) return 0;
    const uint16_t tag = tag_of(name_hash);
    if (tag == 0) return 0;
    const uint16_t fp = fingerprint(hash);
    uint32_t idle = 0;
    for (const Mark& m : bucket(hash).m) {
      if (m.policy == tag && (m.fp == fp || m.fp == 0) && live(m, now_us)) idle = std::max(idle, m.idle);
    }
    return idle == 0 ? 0 : base_us_ + int64_t{idle} * kUnitUs;
  }
  // Forgets the key's own mark (a saturation mark stays: it speaks for other keys).
  void forget(uint64_t hash, uint64_t name_hash) {
    if (!active()) return;
    const uint16_t tag = tag_of(name_hash);
    const uint16_t fp = fingerprint(hash);
    for (Mark& m : bucket(hash).m) {
      if (m.policy == tag && m.fp == fp) m = {};
    }
  }

 private:
  struct Mark {
    uint16_t policy = 0;  // tag_of(); 0 = empty
    uint16_t fp = 0;      // key fingerprint, never 0; 0 = the policy's saturation mark
    uint32_t idle = 0;    // units from base_us_, rounded up; 0 = empty
  };
  static constexpr int kWays = 8;
  struct alignas(64) Bucket {
    Mark m[kWays];
  };
  static_assert(sizeof(Mark) == 8 && sizeof(Bucket) == 64);
  static constexpr int64_t kUnitUs = int64_t{1} << 15;
  static constexpr int64_t kRebaseAfter = int64_t{1} << 31;  // units
  static constexpr uint16_t kSharedTag = 0xffff;

  bool live(const Mark& m, int64_t now_us) const {
    return m.idle != 0 && base_us_ + int64_t{m.idle} * kUnitUs > now_us;
  }
  uint32_t units(int64_t at_us) const {
    const int64_t u = (at_us - base_us_ + kUnitUs - 1) / kUnitUs;
    return static_cast<uint32_t>(std::clamp<int64_t>(u, 1, 0xffffffffLL));
  }
  // Moves the base to now: every idle time is kept (minus what passed), the dead ones emptied.
  void rebase(int64_t now_us) {
    const int64_t shift = (now_us - base_us_) / kUnitUs;
    for (size_t k = 0; k <= mask_; ++k) {
      for (Mark& m : buckets_[k].m) {
        m = m.idle > shift ? Mark{m.policy, m.fp, static_cast<uint32_t>(m.idle - shift)} : Mark{};
      }
    }
    base_us_ += shift * kUnitUs;
  }
  // kAdmit, bucket full: the mark that idles soonest goes (the new one, if it does).
  Outcome drop_soonest(Mark* b, const Mark& add) {
    Mark* soonest = std::min_element(b, b + kWays, [](const Mark& x, const Mark& y) { return x.idle < y.idle; });
    if (soonest->idle < add.idle) *soonest = add;
    return Outcome::kDropped;
  }
  // kRefuse, bucket full, no saturation mark of the new key's policy: the policy with the most
  // key marks here (the new key's own first) folds them into its saturation mark.
  Outcome fold(Mark* b, const Mark& add) {
    uint16_t policy = add.policy;
    int count = 0;
    for (int w = 0; w < kWays; ++w) count += b[w].policy == add.policy && b[w].fp != 0 ? 1 : 0;
    if (count == 0) {
      for (int w = 0; w < kWays; ++w) {
        int c = 0;
        for (int v = 0; v < kWays; ++v) c += b[v].policy == b[w].policy && b[v].fp != 0 ? 1 : 0;
        if (c > count) std::tie(policy, count) = std::pair{b[w].policy, c};
      }
      if (count < 2) return Outcome::kDropped;  // eight policies' marks, none with two
    }
    Mark mark{policy, 0, policy == add.policy ? add.idle : 0};
    for (int w = 0; w < kWays; ++w) {
      if (b[w].policy != policy) continue;
      mark.idle = std::max(mark.idle, b[w].idle);
      b[w] = {};
    }
    for (int w = 0, placed = 0; w < kWays && placed < (policy == add.policy ? 1 : 2); ++w) {
      if (b[w].idle != 0) continue;
      b[w] = placed++ == 0 ? mark : add;
    }
    return Outcome::kSaturated;
  }
  uint16_t tag_of(uint64_t name_hash, bool create = false) const {
    if (auto it = tags_.find(name_hash); it != tags_.end()) return it->second;
    if (tags_.size() >= kSharedTag - 1) return kSharedTag;
    if (!create) return 0;
    const auto tag = static_cast<uint16_t>(tags_.size() + 1);
    tags_.emplace(name_hash, tag);
    return tag;
  }
  static uint64_t spread(uint64_t hash) { return hash * 0xc2b2ae3d27d4eb4fULL; }
  static uint16_t fingerprint(uint64_t hash) {
    const auto fp = static_cast<uint16_t>(spread(hash) >> 16);
    return fp == 0 ? 1 : fp;
  }
  Bucket& bucket(uint64_t hash) { return buckets_[(spread(hash) >> 32) & mask_]; }
  const Bucket& bucket(uint64_t hash) const { return buckets_[(spread(hash) >> 32) & mask_]; }

  std::unique_ptr<Bucket[]> buckets_;
  size_t mask_ = 1;
  int64_t base_us_ = 0;
  mutable std::unordered_map<uint64_t, uint16_t> tags_;  // policy name hash -> tag
};

}  // namespace ratelimit::memory
