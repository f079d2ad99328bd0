// redis_cluster.h — test support: a real Redis Cluster of six redis-server processes (three
// masters, three replicas) on free loopback ports, created with
// `redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes`, plus the questions tests
// ask of it (who serves a slot, node ids) and the faults they inject (kill a node).
//
// Why: the cluster router must be tested against the real redirections, migrations and
// failovers of Redis, never a mock (DESIGN.md). Each RedisCluster owns its nodes (RedisServer:
// own ports, own directories, killed by pid), so several test processes can each run one at
// the same time (ctest -j2).
// Invariants: every wait is bounded (start() and the waits take a timeout); nodes listen on
// 127.0.0.1 only and persist nothing. Not thread-safe: use one object from one thread, except
// that node_client() may be called from several threads (each call opens its own client).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ratelimit/status.h"
#include "redis_server.h"

namespace ratelimit::testing {

class RedisCluster {
 public:
  static constexpr size_t kNodes = 6;

  RedisCluster() = default;
  ~RedisCluster() = default;  // the RedisServers kill their processes
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  // Starts the six nodes with `--cluster-enabled yes --cluster-node-timeout <node_timeout>`,
  // creates the cluster, and waits until every node answers cluster_state:ok with all 16384
  // slots assigned and agrees on the masters. Error (with redis-cli's output) otherwise.
  Status start(std::chrono::milliseconds node_timeout = std::chrono::milliseconds(1000),
               std::chrono::milliseconds timeout = std::chrono::milliseconds(30000));

  // "redis-cluster://127.0.0.1:<p0>,127.0.0.1:<p1>" (two seeds; the store finds the rest).
  std::string url() const;
  RedisServer& node(size_t i) { return *nodes_.at(i); }
  // "redis://127.0.0.1:<port>/0" of node i, for RedisClient.
  std::string node_url(size_t i) const { return nodes_.at(i)->url(); }
  // Index of the node with this port; kNodes if none.
  size_t index_of_port(uint16_t port) const;

  // CLUSTER MYID of node i.
  Result<std::string> node_id(size_t i);
  // The node currently serving `slot` as master, as the live node `ask` (any running node
  // when kNodes) sees it (CLUSTER SHARDS: the online master of the shard holding the slot).
  Result<size_t> master_of_slot(int slot, size_t ask = kNodes);
  // The three masters' indexes, as a live node sees them.
  Result<std::vector<size_t>> masters();

  // Waits until every running node reports cluster_state:ok and `slot` is served by a master
  // other than `not_node` (kNodes: any), all bounded by `timeout`.
  Status wait_until_ok(std::chrono::milliseconds timeout, int slot = -1, size_t not_node = kNodes);

 private:
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace ratelimit::testing
