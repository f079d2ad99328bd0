// standalone_router.cc — one node, one pool (see standalone_router.h and router.h).
#include "standalone_router.h"

namespace ratelimit::redis_detail {

StandaloneRouter::StandaloneRouter(const Endpoint& endpoint, std::string display,
                                   const RouterOptions& options, RouterCounters& counters)
    : io_(std::min(options.io_threads, options.connections_per_node)),
      pool_(io_, connection_config(endpoint, std::move(display), options),
            options.connections_per_node, counters, [this] { notify(); }) {
  pool_.start();
}

StandaloneRouter::~StandaloneRouter() { close(); }

void StandaloneRouter::close() {
  std::call_once(closed_, [this] {
    pool_.close();  // pending calls complete (failure policy) here
    io_.stop();
  });
}

void StandaloneRouter::notify() {
  MutexLock lock(change_mu_);
  changed_.notify_all();
}

void StandaloneRouter::send(int, std::shared_ptr<const std::string> command, ReplyCallback done,
                            std::string_view prelude) {
  if (pool_.submit(*command, done, prelude)) return;
  done(pool_.not_ready_error(), nullptr);
}

Status StandaloneRouter::wait_ready(std::chrono::milliseconds timeout) {
  const auto deadline =
      std::chrono::steady_clock::now() + timeout + std::chrono::milliseconds(100);
  {
    MutexLock lock(change_mu_);
    for (;;) {
      if (pool_.ready_connections() > 0) return {};
      if (pool_.all_failed_once()) break;
      if (lock.wait_until(changed_, deadline) == std::cv_status::timeout) break;
    }
  }
  if (Status s = pool_.last_error(); !s.is_ok()) return s;
  return Status::deadline_exceeded("connecting to " + pool_.config().display +
                                   " took longer than " + std::to_string(timeout.count()) +
                                   " ms");
}

}  // namespace ratelimit::redis_detail
