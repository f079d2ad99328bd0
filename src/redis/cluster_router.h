// cluster_router.h — the router for Redis Cluster (redis-cluster://): each command goes to the
// master serving its slot, over that master's NodePool. See router.h for the contract.
//
// How it follows the cluster:
//   - the slot map comes from CLUSTER SHARDS (CLUSTER SLOTS before Redis 7), read through any
//     ready connection — a master's, else a seed's (seeds get one plain connection each, with
//     no scripts, so a seed that is a replica or not yet ready costs nothing) — at start, after
//     every MOVED, CLUSTERDOWN or lost connection (at most one read at a time, at most one per
//     kMinRefreshGap), and every topology_refresh_interval;
//   - MOVED <slot> <node>: the slot is pointed at that node at once, the command resent there,
//     and the whole map re-read (a MOVED means it is stale);
//   - ASK <slot> <node>: ASKING and the command, back to back on one connection to that node;
//     the map is not changed (the slot is only being migrated);
//   - TRYAGAIN, CLUSTERDOWN, or no ready connection to the slot's master: the command did not
//     run, so it is resent after a short backoff (5 ms doubling to 100 ms) while its deadline
//     (command_timeout after send()) allows, then fails with kUnavailable, which the store
//     answers with the failure policy;
//   - a connection error or timeout after the command was written is never resent (it may
//     have run: a resend could count a request twice); it fails the command;
//   - every master found gets a NodePool whose connections run the handshake (the invoker's
//     SCRIPT LOAD), so every node has every script before it serves a call; a replica promoted
//     by a failover is just a new master in the next map;
//   - only masters are ever sent commands (no READONLY): limiter state is never read from a
//     replica, which may lag.
// Invariants: pools are created, never destroyed before close(), so a NodePool* read from the
// slot table stays valid; every deferred resend is a timer the router tracks and completes
// (kUnavailable) at close(), so `done` is called exactly once even at shutdown.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "mutex.h"
#include "io_threads.h"
#include "node_pool.h"
#include "router.h"

namespace ratelimit::redis_detail {

// One slot range of a cluster map and the master serving it.
struct SlotRange {
  int first = 0;
  int last = 0;
  std::string host;  // empty: the node that answered the query
  uint16_t port = 0;
};

// The masters of a CLUSTER SHARDS reply (Redis >= 7), or of a CLUSTER SLOTS reply when
// `slots_form`. kInternal for a reply of another shape. Pure; exposed for tests.
Result<std::vector<SlotRange>> parse_cluster_map(const redisReply* reply, bool slots_form);

class ClusterRouter final : public Router {
 public:
  // `seeds`: the URL's nodes (credentials set on each).
  ClusterRouter(std::vector<Endpoint> seeds, std::string display, const RouterOptions& options,
                RouterCounters& counters);
  ~ClusterRouter() override;

  bool routes_by_slot() const override { return true; }
  void send(int slot, std::shared_ptr<const std::string> command, ReplyCallback done,
            std::string_view prelude) override;
  Status wait_ready(std::chrono::milliseconds timeout) override;
  size_t ready_connections() const override;
  Status last_error() const override;
  Status serving() const override;
  Endpoint pubsub_endpoint(uint64_t attempt) const override;
  void close() override;

 private:
  struct Routed;
  using RoutedPtr = std::shared_ptr<Routed>;

  NodePool* pool_locked(const std::string& host, uint16_t port) RL_REQUIRES(mu_);
  void dispatch(const RoutedPtr& c);
  void on_reply(const RoutedPtr& c, const Status& error, const redisReply* reply);
  void retry_later(const RoutedPtr& c, Status why);
  void request_refresh();
  void refresh_on_io();
  void query(NodePool* via, bool slots_form);
  void finish_refresh(Result<std::vector<SlotRange>> map, const std::string& via_host);
  void arm_refresh_timer(std::chrono::steady_clock::time_point at);
  void arm_periodic();
  void notify();

  const RouterOptions options_;
  RouterCounters& counters_;
  const Endpoint credentials_;  // user/password of every node
  const std::string display_;
  IoThreads io_;  // before the pools: their connections live on these threads

  std::array<std::atomic<NodePool*>, kSlotCount> slots_{};

  mutable Mutex mu_;
  std::condition_variable changed_;
  // Guarded by mu_:
  std::map<std::string, std::unique_ptr<NodePool>> pools_ RL_GUARDED_BY(mu_);  // masters, by address
  std::vector<std::unique_ptr<NodePool>> seed_pools_ RL_GUARDED_BY(mu_);       // topology queries only
  std::vector<NodePool*> masters_ RL_GUARDED_BY(mu_);                          // of the latest map
  std::set<std::shared_ptr<boost::asio::steady_timer>> retry_timers_ RL_GUARDED_BY(mu_);
  Status topology_error_ RL_GUARDED_BY(mu_);  // why the latest read failed (OK after a success)
  Status cluster_down_ RL_GUARDED_BY(mu_);    // the latest CLUSTERDOWN (or a slot given up on)
  std::chrono::steady_clock::time_point cluster_down_at_ RL_GUARDED_BY(mu_){};  // and when
  bool have_map_ RL_GUARDED_BY(mu_) = false;
  bool closing_ RL_GUARDED_BY(mu_) = false;

  // Refresh state: io_.first()'s thread only.
  boost::asio::steady_timer refresh_timer_;
  boost::asio::steady_timer periodic_timer_;
  bool refreshing_ = false;
  bool refresh_again_ = false;
  bool refresh_timer_armed_ = false;
  std::chrono::steady_clock::time_point next_refresh_allowed_{};

  std::once_flag closed_;
};

}  // namespace ratelimit::redis_detail
