// policy_table.h — a memory Shard's policy table: the definitions its slots are held under,
// each named by a 16-bit id (Slot::policy). Internal to src/memory; guarded by the shard's lock.
//
// Why: a slot names its policy by id, so long policy names cost nothing per key and the sweep
// can ask algo::idle_at_us about any entry without the caller's Policy at hand. The table holds
// the latest definition seen under each name and state meaning (Policy::same_state_meaning),
// with a count of the slots using it; a call under another meaning than a live slot's is a
// policy conflict (issue 31), not a new count. An existing key is found by the shard's key probe
// and checked here by match() (its entry's name, then its parameters), so the hot path never
// looks a name up; only a new key does (id()). Apart from shard.h to keep each file about one
// thing.
// Invariants: an id is live (indexed by name hash) until purge() finds it with users == 0; dead()
// counts live ids with users == 0; at most 65,535 ids (kNoPolicy is none); an id is recycled
// only by purge(), which the shard calls only when no operation holds an id.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "key_hash.h"
#include "slot.h"
#include "ratelimit/policy.h"

namespace ratelimit::memory {

class PolicyTable {
 public:
  struct Entry {
    Policy policy;       // latest definition seen under this name
    uint64_t name_hash;  // hash_field(name, seed)
    uint32_t users;      // live slots with this id; 0 = dead, recycled by purge()
  };
  // What match() found for a slot's id.
  enum class Match { kOtherName, kSame, kConflict };

  // Called once before use.
  void init() {
    index_mask_ = 15;
    index_ = std::make_unique<uint16_t[]>(index_mask_ + 1);
  }

  // The id of the definition of `policy`'s name that shares its state meaning
  // (Policy::same_state_meaning; `name_hash` is the name's hash), updating the stored
  // definition if only what does not change a state's meaning changed (a new limit); kNoPolicy
  // if there is none and !create, or if the table is full (65,535 definitions in use in this
  // shard). One name may have several definitions here, one per meaning; a key is held under
  // at most one of them (Shard::find_name).
  uint16_t id(const Policy& policy, uint64_t name_hash, bool create);

  // Whether id `id` is a definition of `policy`'s name (under any meaning).
  bool names(uint16_t id, const Policy& policy, uint64_t name_hash) const {
    const Entry& e = entries_[id];
    return e.name_hash == name_hash && same_name(e.policy, policy);
  }
  // names(), and what id() does for a known definition: the stored one becomes `policy` if
  // only its limit-like parameters changed; kConflict if the id's state meaning differs. The
  // hot path: a hit under the same parameters costs one comparison more than names().
  Match match(uint16_t id, const Policy& policy, uint64_t name_hash) {
    Entry& e = entries_[id];
    if (e.name_hash != name_hash || !same_name(e.policy, policy)) return Match::kOtherName;
    if (!same_parameters(e.policy, policy)) [[unlikely]] {
      if (!e.policy.same_state_meaning(policy)) return Match::kConflict;
      e.policy = policy;  // redefined: the latest rules
    }
    return Match::kSame;
  }

  const Entry& operator[](uint16_t id) const { return entries_[id]; }
  size_t size() const { return entries_.size(); }

  // A slot took / gave up id `id`.
  void take(uint16_t id) {
    if (++entries_[id].users == 1) --dead_;
  }
  void release(uint16_t id) {
    if (--entries_[id].users == 0) ++dead_;
  }
  // True when enough ids are unused that purge() is worth its rebuild.
  bool purge_due() const { return dead_ > kPurgeThreshold; }
  // Recycles every id with no users.
  void purge() { rebuild_index(true); }

 private:
  static constexpr size_t kPurgeThreshold = 64;

  static bool same_name(const Policy& a, const Policy& b) {
    const std::string& x = a.name();
    const std::string& y = b.name();
    return x.size() == y.size() && same_bytes(x.data(), y.data(), x.size());
  }
  // Policy equality without comparing the names (the caller already did).
  static bool same_parameters(const Policy& a, const Policy& b) {
    return a.algorithm() == b.algorithm() && a.limit() == b.limit() && a.window() == b.window() &&
           a.rate() == b.rate() && a.leaky_mode() == b.leaky_mode() &&
           a.count_denied() == b.count_denied() && a.counts_every_hit() == b.counts_every_hit();
  }
  void index(uint16_t id);
  void rebuild_index(bool drop_dead);

  std::vector<Entry> entries_;  // by id
  std::vector<uint16_t> free_;  // recycled ids
  // id + 1 by name hash, linear probing; 0 = empty.
  std::unique_ptr<uint16_t[]> index_;
  size_t index_mask_ = 0;
  size_t dead_ = 0;  // entries with users == 0 still indexed
};

}  // namespace ratelimit::memory
