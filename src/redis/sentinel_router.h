// sentinel_router.h — the router for a Redis Sentinel deployment (redis-sentinel://): every
// command to the master the sentinels name, followed across failovers without a restart.
//
// How: a control thread asks the sentinels in turn (SENTINEL get-master-addr-by-name), opens a
// NodePool to the answer, then stays subscribed to +switch-master on that sentinel and moves
// the pool when a failover is announced. Every connection to the master checks ROLE in its
// handshake, so a stale answer (a demoted master) never takes decisions; a READONLY reply, a
// pool with no ready connection, or a lost sentinel make the thread ask again (at most every
// kMinResolveInterval), and it re-asks every kRecheckInterval even when all is quiet.
// Connections (to the sentinels and to the master) are plain TCP: there is no TLS form of the
// sentinel URL yet; the master's would take RouterOptions::make_stream like any router.
// Invariants (beside router.h's):
//   - at most one master pool at a time; the old one is closed by the control thread (never
//     by an I/O thread), so its pending commands complete with kUnavailable -> failure policy;
//   - every wait of the control thread is bounded (connect_timeout per sentinel, 100 ms polls)
//     so close() returns promptly.
// Thread-safety: as router.h.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "mutex.h"
#include "io_threads.h"
#include "node_pool.h"
#include "router.h"

namespace ratelimit::redis_detail {

struct SentinelConfig {
  std::vector<Endpoint> sentinels;  // host, port, and the sentinels' own AUTH (user, password)
  std::string master_name;
  Endpoint master;  // AUTH and SELECT for the master; its host and port come from the sentinels
};

class SentinelRouter final : public Router {
 public:
  static constexpr std::chrono::milliseconds kMinResolveInterval{100};
  static constexpr std::chrono::milliseconds kRecheckInterval{5000};

  SentinelRouter(SentinelConfig config, const RouterOptions& options, RouterCounters& counters);
  ~SentinelRouter() override;

  bool routes_by_slot() const override { return false; }
  void send(int slot, std::shared_ptr<const std::string> command, ReplyCallback done,
            std::string_view prelude) override;
  Status wait_ready(std::chrono::milliseconds timeout) override;
  size_t ready_connections() const override;
  Status last_error() const override;
  Endpoint pubsub_endpoint(uint64_t attempt) const override;
  void close() override;

  // "host:port" of the master in use (empty before the first answer): for tests and logs.
  std::string master_address() const;

 private:
  void run();
  // Asks sentinel `s`, installs its answer, then follows +switch-master on the same connection
  // until it fails, a re-resolve is requested, or the router closes. Error: why this sentinel
  // could not be used.
  Status follow(const Endpoint& s);
  void install(const std::string& host, uint16_t port);
  void request_resolve();
  void notify();
  std::shared_ptr<NodePool> current_pool() const;

  const SentinelConfig config_;
  RouterOptions options_;
  RouterCounters& counters_;
  IoThreads io_;

  mutable Mutex mu_;
  std::condition_variable changed_;
  std::shared_ptr<NodePool> pool_ RL_GUARDED_BY(mu_);
  std::string master_address_ RL_GUARDED_BY(mu_);
  Status sentinel_error_ RL_GUARDED_BY(mu_);           // why no sentinel answered, if none did
  bool sentinels_failed_once_ RL_GUARDED_BY(mu_) = false;

  std::atomic<bool> stop_{false};
  std::atomic<bool> resolve_requested_{false};
  std::once_flag closed_;
  std::thread control_;  // last: starts after everything above is built
};

}  // namespace ratelimit::redis_detail
