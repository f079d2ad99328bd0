// memory_upkeep.h — what ratelimitd does beside deciding when its store is the memory store:
// its gauges and counters on /metrics, and a warning line when a key flood saturates the
// eviction residue (MemoryStoreEvictions::residue_saturated / residue_dropped).
//
// Why a log line as well as the counters: the flood changes what clients get (refuse: the
// flooded policy's new keys refused; admit: the flood's keys may come back fresh), and an
// operator who does not scrape /metrics must still see it — once, not per request.
// Thread-safety: tick() is called by one thread (the control loop's poll); the metrics
// callback may run on any thread (it reads the store's thread-safe counters).
#pragma once

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
  // Adds the memory store's metrics to `metrics` (the store is held weakly there).
  void add_metrics(Metrics& metrics) const;
  // The poll: returns the warning to log when the residue saturated since the last line (at
  // most one a minute, with what happened since).
  std::optional<std::string> tick(std::chrono::steady_clock::time_point now);

 private:
  std::shared_ptr<MemoryStore> store_;
  SaturationChoice choice_;
  uint64_t saturated_ = 0;  // counts at the last line
  uint64_t dropped_ = 0;
  std::optional<std::chrono::steady_clock::time_point> last_line_;
};

}  // namespace ratelimit::server
