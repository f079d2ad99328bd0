// node_pool.h — the pipelined connections to one Redis node: N RespConnections to the same
// endpoint, commands spread over the ready ones round robin. A router owns one pool per node
// it sends to (standalone: one; cluster: one per master; sentinel: the current master's).
//
// Invariants: a pool never picks a connection that is not ready, so a submit either queues the
// command on a live, handshaken connection or reports that none is ready (the caller decides:
// another node, a retry, or the failure policy). close() completes every pending command.
// Thread-safety: every method from any thread, except close() (not from an I/O thread).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io_threads.h"
#include "resp_connection.h"

namespace ratelimit::redis_detail {

class NodePool {
 public:
  NodePool(IoThreads& io, std::shared_ptr<const ConnectionConfig> config, size_t connections,
           TransportCounters& counters, std::function<void()> on_change);
  ~NodePool();
  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;

  void start();
  // Blocks until every connection is closed; pending commands fail with kUnavailable.
  void close();

  // RespConnection::submit on the next ready connection; false (done untouched) if none is.
  bool submit(std::string_view command, ReplyCallback& done, std::string_view prelude = {});

  // kUnavailable naming the node and, when known, the last connection error.
  Status not_ready_error() const;
  size_t ready_connections() const;
  // True when every connection has failed at least one attempt to connect.
  bool all_failed_once() const;
  // The first non-OK last_error() of the connections (OK when none has failed).
  Status last_error() const;
  const ConnectionConfig& config() const { return *config_; }

 private:
  std::shared_ptr<const ConnectionConfig> config_;
  std::vector<std::shared_ptr<RespConnection>> connections_;
  std::atomic<size_t> next_{0};
};

}  // namespace ratelimit::redis_detail
