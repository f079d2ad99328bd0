// memory_upkeep.h — what ratelimitd does beside deciding when its store is the memory store:
// its gauges and counters on /metrics, a warning line when a key flood saturates the
// eviction residue (MemoryStoreEvictions::residue_saturated / residue_dropped), and the
// snapshots that keep the counts across a restart (store.snapshot: read before serving,
// written every interval by the control loop's poll and once more at shutdown).
//
// Why a log line as well as the counters: the flood changes what clients get (refuse: the
// flooded policy's new keys refused; admit: the flood's keys may come back fresh), and an
// operator who does not scrape /metrics must still see it — once, not per request.
// Why snapshots here and not on a thread of their own: MemoryStore::save takes one shard's lock
// at a time, so deciding goes on while it writes; the control loop is otherwise idle between
// polls, and a write that runs long only delays its next poll (1 M keys: ~1 s, BENCHMARKS 9).
// What a kill -9 loses: what was counted since the last write — at most interval + one write's
// duration (docs/operations.md states it, a test measures it).
// Thread-safety: restore() before serving, tick() and final_snapshot() on one thread (the
// control loop); the metrics callback may run on any thread (the store's counters are
// thread-safe, the snapshot figures atomic).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "config.h"
#include "metrics.h"
#include "ratelimit/memory_store.h"

namespace ratelimit::server {

class MemoryUpkeep {
 public:
  MemoryUpkeep(std::shared_ptr<MemoryStore> store, const StoreConfig& config);
  // store.snapshot, before the store serves: reads the file into it. No file: an empty start
  // (logged). A file that cannot be read whole (damaged, truncated, another format version):
  // moved aside to PATH.refused-<µs>, logged, and an empty start (on_corrupt: start_empty, the
  // default; kUnavailable if it cannot be moved, never overwritten), or kUnavailable naming
  // the file and why (on_corrupt: refuse — the start fails, exit code 1). No snapshot
  // configured: nothing.
  Status restore();
  // At shutdown, once no request can reach the store: the last snapshot (logged either way).
  void final_snapshot();
  // Adds the memory store's metrics to `metrics` (the store is held weakly there).
  void add_metrics(Metrics& metrics) const;
  // The poll: writes the snapshot when its interval is due (a failure is logged and counted;
  // the previous file stays whole); returns the warning to log when the residue saturated since
  // the last line (at most one a minute, with what happened since).
  std::optional<std::string> tick(std::chrono::steady_clock::time_point now);

 private:
  std::shared_ptr<MemoryStore> store_;
  SaturationChoice choice_;
  uint64_t saturated_ = 0;  // counts at the last line
  uint64_t dropped_ = 0;
  std::optional<std::chrono::steady_clock::time_point> last_line_;
  // store.snapshot, if configured, and the figures /metrics shows of it.
  struct SnapshotFigures {
    std::atomic<uint64_t> last_success_s{0}, last_duration_us{0}, keys{0}, failures{0};
  };
  bool write_snapshot();  // true when written
  std::optional<SnapshotConfig> snapshot_;
  std::chrono::steady_clock::time_point next_write_{};
  std::shared_ptr<SnapshotFigures> figures_ = std::make_shared<SnapshotFigures>();
};

}  // namespace ratelimit::server
