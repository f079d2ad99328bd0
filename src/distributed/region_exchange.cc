// region_exchange.cc — RegionStore's exchange thread: every sync_interval it reads every key in
// use from every other region's store (that region's own count: a SharedView read, add_hits of
// 0 hits) and merges it by max into the key's view (algo::merge_region_count), and probes each
// region once so reachability is known while no key is in use. A key used for the first time
// is read at once (an early round of never-read keys), so a new key is blind to the others for
// one round trip, not one interval.
// Invariants: at most one read per (key, region) and one probe per region in flight — a region
// that does not answer holds one call per key until the store's timeout, never a queue; keys
// unused for max(window, 10 × sync_interval) are dropped; reachability changes are reported
// once each, outside the lock.
#include <algorithm>
#include <chrono>
#include <thread>

#include "mutex.h"
#include "region_core.h"

namespace ratelimit {
namespace {

// The probe: a read (nothing is written) of one fixed key that no request can name (the ':' in
// a policy-less key of ratelimitd's own).
const Policy& probe_policy() {
  static const Policy p = Policy::fixed_window(1, Micros{1'000'000}).value().with_name("region_probe").value();
  return p;
}
constexpr std::string_view kProbeKey = "ratelimit:region-probe";

std::string ms(int64_t us) { return std::to_string(us / 1000) + " ms"; }

}  // namespace

void RegionStore::Core::run() {
  MutexLock lock(exchange.mu);
  auto next = std::chrono::steady_clock::now();
  auto last_early = next - std::chrono::seconds(1);
  while (!exchange.stopping) {
    while (!exchange.stopping && !new_key && lock.wait_until(exchange.wake, next) != std::cv_status::timeout) {
    }
    if (exchange.stopping) break;
    const auto now = std::chrono::steady_clock::now();
    const bool early = now < next;
    if (early && now - last_early < std::chrono::milliseconds(1)) {
      // Early rounds at most once a millisecond: a burst of new keys is read together.
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      lock.lock();
      continue;
    }
    new_key = false;
    lock.unlock();
    round(early);
    lock.lock();
    if (early) {
      last_early = now;
    } else {
      next += std::chrono::microseconds(options.sync_interval.count());
      if (next < now) next = now + std::chrono::microseconds(options.sync_interval.count());
    }
  }
}

void RegionStore::Core::round(bool fresh_only) {
  struct Read {
    size_t peer;
    Policy policy;
    std::string key;
    std::string map_key;
  };
  std::vector<Read> reads;
  std::vector<size_t> probes;
  std::vector<std::pair<size_t, std::string>> silent;
  const int64_t local = local_us();
  {
    MutexLock lock(mu);
    for (auto it = keys.begin(); it != keys.end();) {
      Key& k = it->second;
      const int64_t keep = std::max(k.policy.window().count(), 10 * options.sync_interval.count());
      const bool busy = std::find(k.in_flight.begin(), k.in_flight.end(), true) != k.in_flight.end();
      if (!busy && local - k.last_used_local > keep) {
        it = keys.erase(it);
        continue;
      }
      if (!fresh_only || k.fresh) {
        k.fresh = false;
        for (size_t p = 0; p < peers.size(); ++p) {
          if (k.in_flight[p]) continue;
          k.in_flight[p] = true;
          reads.push_back({p, k.policy, k.key, it->first});
        }
      }
      ++it;
    }
    if (!fresh_only) {
      const int64_t stale = 3 * options.sync_interval.count();
      for (size_t p = 0; p < peers.size(); ++p) {
        Peer& peer = peers[p];
        if (peer.reachable && local - peer.last_ok_local > stale) {
          silent.emplace_back(p, "no answer for " + ms(local - peer.last_ok_local));
        }
        if (peer.probe_in_flight) continue;
        peer.probe_in_flight = true;
        probes.push_back(p);
      }
    }
  }
  for (auto& [p, why] : silent) mark(p, false, why);
  auto self = shared_from_this();
  for (Read& r : reads) {
    peers[r.peer].counts->add_hits_async(
        r.policy, r.key, 0, 0, [self, p = r.peer, mk = std::move(r.map_key)](Result<algo::SharedView> v) {
          self->read_done(p, mk, v);
        });
  }
  for (size_t p : probes) {
    peers[p].counts->add_hits_async(probe_policy(), kProbeKey, 0, 0,
                                    [self, p](Result<algo::SharedView> v) { self->probe_done(p, v); });
  }
}

void RegionStore::Core::read_done(size_t peer, const std::string& mk,
                                  const Result<algo::SharedView>& r) {
  {
    MutexLock lock(mu);
    auto it = keys.find(mk);
    if (it != keys.end()) {
      it->second.in_flight[peer] = false;
      if (r.ok()) {
        algo::merge_region_count(it->second.policy, it->second.seen[peer], algo::region_count_of(*r));
      }
    }
  }
  mark(peer, r.ok(), r.ok() ? std::string() : r.status().message());
}

void RegionStore::Core::probe_done(size_t peer, const Result<algo::SharedView>& r) {
  {
    MutexLock lock(mu);
    peers[peer].probe_in_flight = false;
  }
  mark(peer, r.ok(), r.ok() ? std::string() : r.status().message());
}

void RegionStore::Core::mark(size_t peer, bool ok, const std::string& why) {
  bool tell = false;
  std::string name;
  {
    MutexLock lock(mu);
    Peer& p = peers[peer];
    name = p.name;
    ++p.reads;
    if (ok) {
      p.last_ok_local = local_us();
      if (!p.reachable) {
        p.reachable = true;
        p.ever_reached = true;
        p.told_unreachable = false;
        tell = true;
      }
    } else {
      ++p.failures;
      p.reachable = false;
      if (!p.told_unreachable) {
        p.told_unreachable = true;
        tell = true;
      }
    }
  }
  if (tell && !closing.load() && options.on_reachability) options.on_reachability(name, ok, why);
}

}  // namespace ratelimit
