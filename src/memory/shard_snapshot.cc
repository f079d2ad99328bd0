// shard_snapshot.cc — a memory Shard's part of MemoryStore::save and load (snapshot.h): its
// live entries written oldest first per standing, and one entry read back.
//
// Why its own file: the snapshot walks the shard's lists and slots like the sweep, but belongs
// to neither the hot path (shard.h) nor eviction (shard.cc).
// Invariants: an entry idle at the snapshot's time, or holding a state of another algorithm
// than its policy's (left from a redefinition: as good as idle), is not written; reading back
// re-creates recency order (each list written from its tail, and insert puts at the front) and
// never replaces a key the shard holds.
#include <vector>

#include "shard.h"
#include "slot_state.h"

namespace ratelimit::memory {
using namespace slot_state;

void Shard::save_entries(SnapshotWriter& out, int64_t now_us) {
  std::vector<int32_t> index(policies_.size(), -1);  // shard policy id -> snapshot index
  for (uint32_t standing = 0; standing < kStandings; ++standing) {
    for (uint32_t i = lists_[standing].tail; i != kNil; i = slot(i).prev) {
      if (idle_at(i) <= now_us) continue;
      Slot& s = slot(i);
      if (index[s.policy] < 0) index[s.policy] = out.policy(policies_[s.policy].policy);
      AlgorithmState state = take_state(i);  // a copy, or the log's queue / leases moved out
      out.entry(static_cast<uint16_t>(index[s.policy]), standing,
                std::string_view(key_bytes(s), s.key_len), state);
      if (owns_heap(s.tag)) put_state(i, std::move(state));
    }
  }
}

bool Shard::restore(const Policy& policy, uint64_t name_hash, std::string_view key,
                    uint64_t hash, AlgorithmState&& state, uint32_t standing, int64_t now_us) {
  if (find_name(policy, name_hash, key, hash) != kNil) return false;
  const uint16_t id = policy_id(policy, name_hash, true);
  if (id == kNoPolicy) return false;
  insert(id, key, hash, std::move(state), standing, now_us);
  return true;
}

}  // namespace ratelimit::memory
