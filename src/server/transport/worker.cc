// worker.cc — the I/O thread, its deadline sweep and its drain (see worker.h).
#include "worker.h"

#include <vector>

#include <boost/asio/post.hpp>

namespace ratelimit::server {

void Worker::start() {
  arm_sweep();
  thread_ = std::thread([this] { ioc_.run(); });
}

void Worker::arm_sweep() {
  sweep_armed_ = true;
  sweep_.expires_after(std::chrono::milliseconds(250));
  sweep_.async_wait([this](boost::system::error_code ec) {
    sweep_armed_ = false;
    if (ec) {  // cancelled: draining had left no connection (untrack, drain)
      if (!connections_.empty()) arm_sweep();  // one arrived since (track saw a wait still pending)
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    // A copy: a connection may close (and untrack itself) while the loop runs.
    std::vector<TrackedConnection*> conns(connections_.begin(), connections_.end());
    for (TrackedConnection* c : conns) {
      if (connections_.count(c) != 0) c->check_deadline(now);
    }
    if (draining_ && connections_.empty()) return;  // lets run() return
    arm_sweep();
  });
}

void Worker::drain() {
  boost::asio::post(ioc_, [this] {
    draining_ = true;
    std::vector<TrackedConnection*> conns(connections_.begin(), connections_.end());
    for (TrackedConnection* c : conns) {
      if (connections_.count(c) != 0) c->on_drain();
    }
    if (connections_.empty()) sweep_.cancel();
  });
}

}  // namespace ratelimit::server
