// router.h — which Redis node a command goes to, and the pools that carry it there. The store
// and the script invoker speak to a Router; a Router owns the I/O threads and one NodePool
// (pipelined RespConnections) per node it sends to.
//
//   StandaloneRouter  one node: redis://, unix:// (every command to its pool)
//   ClusterRouter     redis-cluster://: the master serving the command's slot; MOVED, ASK,
//                     TRYAGAIN, CLUSTERDOWN handled here, invisibly to the layers above
//   SentinelRouter    redis-sentinel://: the master the sentinels name, followed across
//                     failovers (+switch-master) and re-resolved on errors
// make_router() picks one from the URL.
//
// Invariants every router keeps:
//   - `done` is called exactly once per send(): with the node's final reply (redirections
//     already followed) or an error status — inline, on the caller's thread, when there is
//     nowhere to send the command;
//   - a prelude goes immediately before its command on the same connection (SCRIPT LOAD
//     before a resent EVALSHA); its reply is discarded;
//   - limiter state is only ever read from or written to a master.
// Thread-safety: every method from any thread, except close() and the destructor (not from an
// I/O thread, i.e. not from inside a completion).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hash_slot.h"
#include "ratelimit/redis_store.h"
#include "resp_connection.h"

namespace ratelimit::redis_detail {

// Counters of the routers and their connections (RedisStoreCounters).
struct RouterCounters : TransportCounters {
  std::atomic<uint64_t> moved{0}, asked{0}, cluster_retries{0}, topology_refreshes{0};
};

class Router {
 public:
  virtual ~Router() = default;

  // True when send() needs the command's slot (a cluster); otherwise kAnySlot will do and
  // callers may skip hashing the key.
  virtual bool routes_by_slot() const = 0;
  // Sends `command` (RESP bytes; shared so that a redirection can resend it without a copy)
  // to the master serving `slot` (kAnySlot: no key), `prelude` right before it when non-empty.
  virtual void send(int slot, std::shared_ptr<const std::string> command, ReplyCallback done,
                    std::string_view prelude = {}) = 0;
  // Waits (at most `timeout`, plus a margin for the timers' resolution) until the router can
  // send: OK, or the error that keeps it from connecting (kInvalidArgument for refused
  // credentials or a misconfigured cluster, kUnavailable, kDeadlineExceeded).
  virtual Status wait_ready(std::chrono::milliseconds timeout) = 0;
  // Connections open and ready, over every node.
  virtual size_t ready_connections() const = 0;
  // The most recent failure of any connection (OK when none has failed since last ready).
  virtual Status last_error() const = 0;
  // OK when a command for any key can be served now; otherwise why not. By default: a ready
  // connection exists. A cluster also needs every slot served by a master with a ready
  // connection and no CLUSTERDOWN in the last second (issue 23 item 2: a slot range that no
  // node served left readiness green).
  virtual Status serving() const {
    if (ready_connections() > 0) return {};
    const Status e = last_error();
    return e.is_ok() ? Status::unavailable("no Redis connection is ready") : e;
  }
  // A node that hears every PUBLISH of the deployment, for a subscriber's `attempt`-th attempt
  // to connect (release_feed.h): the node (standalone); the current master (sentinel: a demoted
  // one still hears its new master's PUBLISH through replication); a master of the latest slot
  // map, else a seed, in turn (cluster: PUBLISH reaches every node over the cluster bus).
  // Credentials and db set. Any thread.
  virtual Endpoint pubsub_endpoint(uint64_t attempt) const = 0;
  // Closes every pool (pending commands fail with kUnavailable) and stops the I/O threads.
  // Idempotent; the destructor calls it.
  virtual void close() = 0;
};

struct RouterOptions {
  size_t connections_per_node = 4;
  size_t io_threads = 1;
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds command_timeout{250};
  std::chrono::milliseconds backoff_min{20};
  std::chrono::milliseconds backoff_max{2000};
  std::chrono::milliseconds topology_refresh_interval{5000};  // cluster: re-read the slot map
  // Run on every connection to every node before it is ready (the invoker's SCRIPT LOADs).
  std::vector<HandshakeStep> handshake;
  StreamFactory make_stream;  // empty: plain TCP / unix
  // Sentinel only: the sentinels' own AUTH (RedisStoreOptions::sentinel_user/_password).
  std::string sentinel_user;
  std::string sentinel_password;
};

// The router `url` asks for, started (connecting in the background). `counters` must outlive it.
Result<std::unique_ptr<Router>> make_router(const RedisUrl& url, RouterOptions options,
                                            RouterCounters& counters);

// The URL without credentials, for messages: redis://host:port/db, unix:///path?db=N, ...
std::string display_url(const RedisUrl& url);

// The connection settings shared by a router's connections to `endpoint`.
std::shared_ptr<const ConnectionConfig> connection_config(const Endpoint& endpoint,
                                                          std::string display,
                                                          const RouterOptions& options);

}  // namespace ratelimit::redis_detail
