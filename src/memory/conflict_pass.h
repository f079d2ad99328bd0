// conflict_pass.h — MemoryStore's all-or-nothing call (decide_all): finding each op's entry and
// refusing the whole call when one key holds live state of another meaning of its policy's name
// (issue 31). Internal to src/memory.
//
// Why apart: the pass is its own rule (a conflict refuses everything; the answers are peeks, so
// nothing is taken) and keeps memory_store.cc about routing and writing back.
// Invariants: the caller holds the lock of every shard named in `where`; a refused call changes
// no state (each state is taken out, peeked and put back) except dropping conflicting states
// that are already idle, which a non-refused call drops too (the key then starts afresh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ratelimit/decision.h"
#include "ratelimit/store.h"
#include "mutex.h"

namespace ratelimit::memory {

class Shard;

// Where a (policy name, key) lives: its name's hash, its key_hash and its shard's index.
struct KeySite {
  uint64_t name_hash;
  uint64_t hash;
  size_t shard;
};

// Sets slots[k] to ops[k]'s entry in shards[where[k].shard] under its policy's name (kNil: none,
// or an idle conflicting state, dropped). Returns true when the call is refused: some op's key
// holds live state of another meaning; then `out` has every op's answer (a conflict's
// algo::conflict_decision, the others a peek at their cost, a report's at 0) and nothing changed.
// Outside -Wthread-safety: the analysis cannot follow a run-time set of locks.
bool find_or_refuse(Shard* shards, std::span<const StoreOp> ops, const KeySite* where,
                    int64_t now, uint32_t* slots, std::vector<Decision>& out)
    RL_NO_THREAD_SAFETY_ANALYSIS;

}  // namespace ratelimit::memory
