// standalone_router.h — the router for one Redis node (redis://, unix://): one NodePool, every
// command to it. See router.h for the contract.
#pragma once

#include <condition_variable>
#include <mutex>

#include "mutex.h"
#include "io_threads.h"
#include "node_pool.h"
#include "router.h"

namespace ratelimit::redis_detail {

class StandaloneRouter final : public Router {
 public:
  StandaloneRouter(const Endpoint& endpoint, std::string display, const RouterOptions& options,
                   RouterCounters& counters);
  ~StandaloneRouter() override;

  bool routes_by_slot() const override { return false; }
  void send(int slot, std::shared_ptr<const std::string> command, ReplyCallback done,
            std::string_view prelude) override;
  Status wait_ready(std::chrono::milliseconds timeout) override;
  size_t ready_connections() const override { return pool_.ready_connections(); }
  Status last_error() const override { return pool_.last_error(); }
  Endpoint pubsub_endpoint(uint64_t) const override { return pool_.config().endpoint; }
  void close() override;

 private:
  void notify();

  Mutex change_mu_;  // guards no data: held around the check and notify, so no wake-up is lost
  std::condition_variable changed_;
  IoThreads io_;  // before pool_: the pool's connections live on these threads
  NodePool pool_;
  std::once_flag closed_;
};

}  // namespace ratelimit::redis_detail
