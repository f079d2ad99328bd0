// quota_sync.h — several ratelimitd behind one Redis dividing one RLQS limit: every sync
// interval, each instance publishes, per bucket with clients here, its clients' demands and
// expiries as its own field of a hash in the shared store (one field per instance, a random id
// per process), and reads the other instances' fields into the bucket's division as remote
// clients (fair_share.h, the instances rule). So an Envoy fleet may report to any replica and
// every replica assigns its own clients their shares of the whole fleet's division.
//
//   QuotaService --local_clients()--> QuotaSync --exchange_field_async--> Redis hash
//        ^                                |           (key: the bucket; field: this instance)
//        +------ set_remote(bucket) ------+  <-- the other instances' fields
//
// Why not the asynchronous counting machinery (add_hits): a shared count sums demands, and
// max-min fairness needs each client's demand (a 10-rps client and a 1000-rps one are not two
// 505-rps ones). Why a hash field per instance: one atomic call writes ours and reads all, no
// instance overwrites another, and the store's clock stamps each field so the instances' clocks
// never need to agree (a remote client's expiry is its remaining TTL at the write, measured on
// Redis' clock, turned into this instance's clock at the read).
//
// Staleness: a demand reported to one instance reaches the others' division within two sync
// intervals (written at the writer's next sync, read at the reader's next), and their clients'
// assignments at their next report: sync_interval × 2 + the report interval in all. While the
// views disagree the assignments may sum to more than the limit (docs/envoy.md measures it).
// Redis failing: the failed exchange is counted and logged (once, and once when it works
// again), ratelimitd_rlqs_sync_up is 0, and each bucket's remote clients leave the division at
// their expiry (at most one assignment TTL): each instance then divides the whole limit among its
// own clients — up to N × the limit over N instances — until an exchange succeeds again.
// Cost: one call per bucket with clients here per sync interval, pipelined; a round whose calls
// are still in flight when the next is due is skipped (no pile-up on a slow Redis).
// Thread-safety: owns one thread; the store's completions run on its I/O threads. The service
// and the store must outlive the object; the destructor stops the thread and waits (bounded by
// the store's command timeout) for the calls in flight.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "background_thread.h"
#include "mutex.h"
#include "quota_service.h"
#include "ratelimit/fair_share.h"
#include "ratelimit/shared_fields.h"

namespace ratelimit::rlqs {

struct QuotaSyncOptions {
  std::chrono::milliseconds interval{500};
  std::string instance;  // this process's field name; empty: a random one
  // Called when exchanges start failing (false, why) and when one succeeds again (true): the
  // log lines. From the store's I/O thread; must be quick.
  std::function<void(bool up, const std::string& why)> on_change;
};

struct QuotaSyncStats {
  bool up = true;           // the last exchange succeeded (or none failed yet)
  uint64_t exchanges = 0;   // bucket exchanges that succeeded
  uint64_t failures = 0;    // bucket exchanges that failed
  uint64_t rounds = 0;      // rounds sent
  uint64_t skipped = 0;     // rounds skipped: the previous one still in flight
};

// A bucket's clients as a field's value: "<demand mrps or ?>:<remaining ms>" per client,
// space-separated, remaining measured from `now_us` (at least 1 ms). And back (malformed
// entries skipped, at most kMaxRemoteClients), each expiry in the reader's clock: `at_us` is the
// reader's now, `age_ms` how long before it the field was written (both on the store's clock).
inline constexpr size_t kMaxRemoteClients = 10'000;
std::string encode_clients(std::span<const fair_share::RemoteClient> clients, int64_t now_us);
std::vector<fair_share::RemoteClient> decode_clients(std::string_view value, int64_t at_us, int64_t age_ms);
// The hash's key for a bucket's service key: "rlqs:" + key, or for a key too long for the store
// its first 400 bytes + "#" + a 64-bit FNV-1a of the whole, in hex.
std::string sync_key(std::string_view bucket_key);

class QuotaSync {
 public:
  QuotaSync(QuotaService& service, std::shared_ptr<SharedFields> store, QuotaSyncOptions options);
  ~QuotaSync();
  QuotaSync(const QuotaSync&) = delete;
  QuotaSync& operator=(const QuotaSync&) = delete;

  const std::string& instance() const { return instance_; }
  QuotaSyncStats stats() const;
  // ratelimitd_rlqs_sync_* (metric_families.h).
  void render_metrics(std::string& out) const;

 private:
  void round();
  void on_reply(const std::string& bucket, Result<SharedFieldsView> r);
  void set_up(bool up, const std::string& why);

  QuotaService& service_;
  const std::shared_ptr<SharedFields> store_;
  const QuotaSyncOptions options_;
  const std::string instance_;
  mutable Mutex mu_;
  std::condition_variable idle_;
  size_t in_flight_ RL_GUARDED_BY(mu_) = 0;
  QuotaSyncStats stats_ RL_GUARDED_BY(mu_);
  BackgroundThread thread_;
};

}  // namespace ratelimit::rlqs
