// conflict_pass.cc — decide_all's policy-conflict pass (see conflict_pass.h for the rule and
// invariants).
#include "conflict_pass.h"

#include <array>
#include <utility>

#include "shard.h"

namespace ratelimit::memory {

bool find_or_refuse(Shard* shards, std::span<const StoreOp> ops, const KeySite* where,
                    int64_t now, uint32_t* slots, std::vector<Decision>& out) {
  const size_t n = ops.size();
  bool refused = false;
  std::array<int64_t, kMaxOpsPerCall> conflict_until{};  // > 0: that op's conflict
  for (size_t k = 0; k < n; ++k) {
    Shard& shard = shards[where[k].shard];
    bool conflict;
    slots[k] = shard.find_named(*ops[k].policy, where[k].name_hash, ops[k].key, where[k].hash,
                                conflict);
    if (conflict) {
      const int64_t idle_at = shard.idle_at(slots[k]);
      if (idle_at > now) {
        conflict_until[k] = idle_at - now;
        refused = true;
      } else {
        shard.remove(slots[k], where[k].hash);
        slots[k] = kNil;
      }
    }
  }
  if (!refused) return false;
  for (size_t k = 0; k < n; ++k) {
    if (conflict_until[k] > 0) {
      out.push_back(algo::conflict_decision(*ops[k].policy, conflict_until[k]));
      continue;
    }
    Shard& shard = shards[where[k].shard];
    algo::AlgorithmState state = slots[k] != kNil
                                     ? shard.take_state(slots[k])
                                     : shard.starting_state(*ops[k].policy, where[k].name_hash,
                                                            where[k].hash, now);
    // As algo::decide_all's check: each peeked at its cost (a report at 0), nothing taken.
    const bool report = ops[k].kind == StoreOp::Kind::kReport;
    out.push_back(algo::decide(*ops[k].policy, state, now, report ? 0 : ops[k].cost,
                               algo::Op::kPeek));
    if (slots[k] != kNil) shard.put_state(slots[k], std::move(state));
  }
  return true;
}

}  // namespace ratelimit::memory
