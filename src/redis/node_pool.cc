// node_pool.cc — N pipelined connections to one node (see node_pool.h).
#include "node_pool.h"

namespace ratelimit::redis_detail {

NodePool::NodePool(IoThreads& io, std::shared_ptr<const ConnectionConfig> config,
                   size_t connections, TransportCounters& counters,
                   std::function<void()> on_change)
    : config_(std::move(config)) {
  for (size_t i = 0; i < std::max<size_t>(connections, 1); ++i) {
    connections_.push_back(
        std::make_shared<RespConnection>(io.next(), config_, counters, on_change));
  }
}

NodePool::~NodePool() { close(); }

void NodePool::start() {
  for (auto& c : connections_) c->start();
}

void NodePool::close() {
  for (auto& c : connections_) c->close();
}

bool NodePool::submit(std::string_view command, ReplyCallback& done, std::string_view prelude) {
  const size_t n = connections_.size();
  const size_t first = next_.fetch_add(1, std::memory_order_relaxed);
  // An idle connection first: its command reaches Redis at once instead of queueing behind
  // another call's reply (batches then spread over the connections instead of piling up on
  // whichever round robin names). Else round robin over the ready ones.
  for (size_t i = 0; i < n; ++i) {
    RespConnection& c = *connections_[(first + i) % n];
    if (c.idle() && c.submit(command, done, prelude)) return true;
  }
  for (size_t i = 0; i < n; ++i) {
    if (connections_[(first + i) % n]->submit(command, done, prelude)) return true;
  }
  return false;
}

Status NodePool::not_ready_error() const {
  if (Status s = last_error(); !s.is_ok()) {
    return Status::unavailable("no connection to Redis is ready; last error: " + s.message());
  }
  return Status::unavailable("no connection to " + config_->display + " is ready");
}

size_t NodePool::ready_connections() const {
  size_t n = 0;
  for (const auto& c : connections_) n += c->ready() ? 1 : 0;
  return n;
}

bool NodePool::all_failed_once() const {
  for (const auto& c : connections_) {
    if (c->failed_attempts() == 0) return false;
  }
  return true;
}

Status NodePool::last_error() const {
  for (const auto& c : connections_) {
    if (Status s = c->last_error(); !s.is_ok()) return s;
  }
  return {};
}

}  // namespace ratelimit::redis_detail
