// residue_table.h — what a MemoryStore shard remembers of the keys it evicted before they were
// idle: a direct-mapped table of 24-byte cells (fingerprint, idle time, units in use, a
// bucket's exact level), so that an evicted key that comes back is rebuilt from a conservative
// state instead of a fresh one (algo::state_from_residue). Internal to src/memory; guarded by
// the shard's lock.
//
// Why (issue 23): forgetting a key that was not idle handed its client a fresh limit; a key at
// its limit, pushed out by a flood of invented keys, was admitted a whole limit again.
// Two kinds of residue, after the standing of the key evicted (shard.h):
//   - restrictive (near its limit, or denied): never lost while the table has room. A cell
//     holds one key's residue, matched by a 30-bit fingerprint; a restrictive residue whose
//     cell holds another key's live restrictive residue becomes an 8-byte mark of its own key
//     and policy (residue_marks.h), rebuilt as fully used until its idle time. Cells are never
//     shared (issue 33: merged cells made a flood of 3 x max_keys keys at their limit refuse
//     nearly every new key of every policy). Only a full bucket of marks applies the
//     operator's SaturationChoice: refuse (the policy's marks there fold into one that refuses
//     that policy's new keys hashing there) or admit (one mark dropped and counted);
//   - roomy (half or more of its limit left): kept while there is room — an empty cell, a dead
//     one, its own — and otherwise dropped, never marked; a restrictive residue may take its
//     cell. A roomy key that loses its residue comes back fresh, gaining at most the units it
//     had used: less than half its limit.
// Invariants: a cell with idle_at <= now is empty; a key has at most one residue (a cell or a
// mark: record() on its own cell updates it); cells are allocated on the first residue
// recorded (a store that never evicts a live key pays nothing), with `cells` (a power of two)
// cells of 24 bytes; marks on the first overflow.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "ratelimit/algorithms.h"
#include "residue_marks.h"

namespace ratelimit::memory {

class ResidueTable {
 public:
  // cells: rounded up to a power of two, at least 1; buckets of 8 marks likewise. No
  // allocation yet.
  void init(size_t cells, size_t mark_buckets, SaturationChoice choice) {
    size_t n = 1;
    while (n < cells) n *= 2;
    mask_ = n - 1;
    marks_.init(mark_buckets);
    choice_ = choice;
  }
  // False until the first residue is recorded (the hot path checks this first).
  bool active() const { return cells_ != nullptr; }
  size_t bytes() const { return (active() ? (mask_ + 1) * sizeof(Cell) : 0) + marks_.bytes(); }

  // Remembers `r` (r.idle_at_us > now) for the key whose store hash is `hash` under the
  // policy whose name hash is `name_hash`, evicted near its limit or denied (`restrictive`) or
  // roomy (see the top of this file).
  void record(uint64_t hash, uint64_t name_hash, const algo::Residue& r, bool restrictive,
              int64_t now_us) {
    if (!active()) cells_ = std::make_unique<Cell[]>(mask_ + 1);
    Cell& c = cell(hash);
    const uint32_t fp = fingerprint(hash);
    const auto used = static_cast<uint32_t>(std::clamp<int64_t>(r.used, 0, kUsedMax));
    const bool taken_by_roomy = (c.tag & kRestrictive) == 0;
    if (c.idle_at_us <= now_us || (c.tag & ~kRestrictive) == fp || (restrictive && taken_by_roomy)) {
      // empty, dead, this key's own older residue, or a roomy one a restrictive takes over
      c = {r.idle_at_us, r.level_u, fp | (restrictive ? kRestrictive : 0U), used};
      return;
    }
    if (!restrictive) return;  // no room: a roomy key falls back to its bound
    switch (marks_.record(hash, name_hash, r.idle_at_us, now_us, choice_)) {
      case ResidueMarks::Outcome::kKept: break;
      case ResidueMarks::Outcome::kSaturated: ++saturated_; break;
      case ResidueMarks::Outcome::kDropped: ++dropped_; break;
    }
  }
  // The residue that applies to the key (its own cell, or a mark), if any is live.
  [[nodiscard]] bool recall(uint64_t hash, uint64_t name_hash, int64_t now_us,
                            algo::Residue& out) const {
    if (!active()) return false;
    const Cell& c = cell(hash);
    if (c.idle_at_us > now_us && (c.tag & ~kRestrictive) == fingerprint(hash)) {
      // A saturated count stands for "at least this much": past any limit it could meet.
      out = {c.idle_at_us, c.used == kUsedMax ? kMaxEveryHitCount : int64_t{c.used}, c.level_u};
      return true;
    }
    const int64_t idle = marks_.recall(hash, name_hash, now_us);
    if (idle == 0) return false;
    out = {idle, kMaxEveryHitCount, 0};  // fully used until then (rounded up by the limit)
    return true;
  }
  // Forgets the key's own residue (it is back in the table, or reset); a saturation mark stays,
  // since it also speaks for other keys.
  void forget(uint64_t hash, uint64_t name_hash) {
    if (!active()) return;
    Cell& c = cell(hash);
    if ((c.tag & ~kRestrictive) == fingerprint(hash)) c = {};
    marks_.forget(hash, name_hash);
  }
  // Restrictive residues folded into a saturation mark (kRefuse), and dropped (kAdmit, or no
  // room even to fold).
  uint64_t saturated() const { return saturated_; }
  uint64_t dropped() const { return dropped_; }

 private:
  struct Cell {
    int64_t idle_at_us = 0;
    int64_t level_u = 0;  // 0 in a shared cell
    uint32_t tag = 0;     // fingerprint (bits 1-31, never 0) | kRestrictive
    uint32_t used = 0;    // saturates at kUsedMax (read back as kMaxEveryHitCount)
  };
  static_assert(sizeof(Cell) == 24);
  static constexpr uint32_t kRestrictive = 1;
  static constexpr int64_t kUsedMax = 0xffffffffLL;

  // An odd multiplier spreads every bit of the hash into the top bits (the index; the shard
  // was chosen by the hash's own top bits, constant within a shard) and the low 32 (the
  // fingerprint, in bits 1-31; never 0, the empty cell's).
  static uint64_t spread(uint64_t hash) { return hash * 0x9e3779b97f4a7c15ULL; }
  static uint32_t fingerprint(uint64_t hash) {
    return (static_cast<uint32_t>(spread(hash)) & ~kRestrictive) | 2U;
  }
  Cell& cell(uint64_t hash) { return cells_[(spread(hash) >> 32) & mask_]; }
  const Cell& cell(uint64_t hash) const { return cells_[(spread(hash) >> 32) & mask_]; }

  std::unique_ptr<Cell[]> cells_;
  size_t mask_ = 0;
  ResidueMarks marks_;
  SaturationChoice choice_ = SaturationChoice::kRefuse;
  uint64_t saturated_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace ratelimit::memory
