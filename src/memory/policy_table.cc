// policy_table.cc — a memory Shard's policy table: looking a name up, handing out and
// recycling ids (see policy_table.h for the design and invariants).
#include "policy_table.h"

namespace ratelimit::memory {

uint16_t PolicyTable::id(const Policy& policy, uint64_t name_hash, bool create) {
  for (size_t pos = name_hash & index_mask_;; pos = (pos + 1) & index_mask_) {
    const uint16_t cell = index_[pos];
    if (cell == 0) break;
    const auto id = static_cast<uint16_t>(cell - 1);
    // kConflict: another definition's entry (another meaning of the name).
    if (match(id, policy, name_hash) == Match::kSame) return id;
  }
  if (!create) return kNoPolicy;
  uint16_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
    entries_[id].policy = policy;
    entries_[id].name_hash = name_hash;
    entries_[id].users = 0;
  } else if (entries_.size() < kNoPolicy) {
    id = static_cast<uint16_t>(entries_.size());
    entries_.push_back({policy, name_hash, 0});
  } else {
    return kNoPolicy;
  }
  ++dead_;  // users == 0 until a slot takes it
  if ((entries_.size() - free_.size()) * 2 > index_mask_ + 1) {
    index_mask_ = index_mask_ * 2 + 1;
    rebuild_index(false);
  } else {
    index(id);
  }
  return id;
}

void PolicyTable::index(uint16_t id) {
  size_t pos = entries_[id].name_hash & index_mask_;
  while (index_[pos] != 0) pos = (pos + 1) & index_mask_;
  index_[pos] = static_cast<uint16_t>(id + 1);
}

void PolicyTable::rebuild_index(bool drop_dead) {
  index_ = std::make_unique<uint16_t[]>(index_mask_ + 1);
  std::vector<bool> is_free(entries_.size(), false);
  for (uint16_t id : free_) is_free[id] = true;
  for (size_t k = 0; k < entries_.size(); ++k) {
    if (is_free[k]) continue;
    if (drop_dead && entries_[k].users == 0) {
      free_.push_back(static_cast<uint16_t>(k));
      --dead_;
    } else {
      index(static_cast<uint16_t>(k));
    }
  }
}

}  // namespace ratelimit::memory
