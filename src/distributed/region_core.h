// region_core.h — what one RegionStore holds: per (policy, key) the last counts seen of every
// other region, per region its reachability, and the exchange thread's state. Internal to
// src/distributed: region_store.cc decides with it, region_exchange.cc fills it.
// Invariants:
//   - `mu` guards keys (RL_GUARDED_BY) and peers' status (Peer's fields, which the annotation
//     cannot name from a nested struct); no completion, store call or callback runs under it;
//   - a key's seen[i] belongs to peers[i] and only grows (merge_region_count);
//   - at most one read per (key, peer) and one probe per peer is in flight;
//   - peers[i].counts is set by wrap() and moved out only by ~RegionStore, after the exchange
//     thread stopped (nothing else reads it once the RegionStore is gone).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "background_thread.h"
#include "mutex.h"
#include "ratelimit/region_store.h"

namespace ratelimit {

struct RegionStore::Core : std::enable_shared_from_this<RegionStore::Core> {
  struct Peer {
    std::string name;
    std::shared_ptr<SharedCounts> counts;
    bool reachable = false;
    bool ever_reached = false;
    bool told_unreachable = false;  // on_reachability said so (cleared when it says reachable)
    int64_t last_ok_local = -1;     // age_clock µs of the last successful read
    bool probe_in_flight = false;
    uint64_t reads = 0, failures = 0;
  };
  struct Key {
    Policy policy;
    std::string key;
    int64_t last_used_local = 0;
    std::vector<algo::RegionCount> seen;  // one per peer
    std::vector<bool> in_flight;          // one per peer
    bool fresh = true;                    // never read yet: the next early round reads it
  };

  RegionStoreOptions options;
  const Clock* clock = nullptr;  // decisions' time (the store's base)
  // Ages of views and reads (options.age_clock): the `local` instants below.
  const Clock* age_clock = &MonotonicClock::instance();
  std::shared_ptr<Store> own;
  std::vector<Peer> peers;
  double share = 1;

  mutable Mutex mu;
  std::unordered_map<std::string, Key> keys RL_GUARDED_BY(mu);

  std::atomic<uint64_t> decisions{0}, capped{0}, denied_by_others{0}, untracked{0};
  // Set by ~RegionStore before it closes the peers' stores: completions then report nothing.
  std::atomic<bool> closing{false};

  BackgroundThread exchange;  // run(), unless options.run_exchange is false
  // A key was added: read it now rather than at the next round.
  bool new_key RL_GUARDED_BY(exchange.mu) = false;

  int64_t local_us() const { return age_clock->now().count(); }
  int peer_index(const std::string& name) const;
  // Under mu: whether the share cap applies now (a region unreachable or its view too old).
  bool partitioned_locked(int64_t local) const RL_REQUIRES(mu);

  // region_exchange.cc
  void run();     // the exchange thread
  // One round: reads of every key in use (only never-read ones when `fresh_only`) from every
  // peer, and a probe per peer (so reachability is known even while no key is in use).
  void round(bool fresh_only);
  void read_done(size_t peer, const std::string& map_key, const Result<algo::SharedView>& r);
  void probe_done(size_t peer, const Result<algo::SharedView>& r);
  void mark(size_t peer, bool ok, const std::string& why);
};

}  // namespace ratelimit
