// transport_rig.cc — the transport in process (see transport_rig.h).
#include "transport_rig.h"

#include <chrono>
#include <future>
#include <string>

#include <boost/asio/post.hpp>
#include <gtest/gtest.h>

namespace ratelimit::server::testing {

void RigCounters::count_request(Endpoint endpoint, unsigned status) {
  const auto label = static_cast<size_t>(endpoint);
  if (label < kLabels && status < kStatuses) requests_[label * kStatuses + status].fetch_add(1);
}

uint64_t RigCounters::requests(Endpoint endpoint, unsigned status) const {
  const auto label = static_cast<size_t>(endpoint);
  return label < kLabels && status < kStatuses ? requests_[label * kStatuses + status].load() : 0;
}

TransportRig::TransportRig(const Served& served, const RigOptions& options) : limits_(options.limits) {
  for (unsigned i = 0; i < options.threads; ++i) {
    workers_.push_back(std::make_unique<Worker>(limits_, counters_));
    workers_.back()->start();
  }
  listener_ = std::make_unique<Listener>(control_, workers_, caps_, served);
  const Status opened = listener_->open(ListenAddress{"127.0.0.1", 0});
  EXPECT_TRUE(opened.is_ok()) << opened.to_string();
  const std::string where = listener_->where();
  port_ = std::stoi(where.substr(where.rfind(':') + 1));
  listener_->start();
  control_thread_ = std::thread([this] { control_.run(); });
}

void TransportRig::drain() {
  for (auto& w : workers_) w->drain();
}

void TransportRig::stop(const std::function<bool()>& settled) {
  if (stopped_) return;
  stopped_ = true;
  std::promise<void> closed;
  boost::asio::post(control_, [this, &closed] {
    listener_->close();
    closed.set_value();
  });
  closed.get_future().wait();
  drain();
  using Clock = std::chrono::steady_clock;
  const auto settle_until = Clock::now() + std::chrono::seconds(7);
  while (settled && !settled() && Clock::now() < settle_until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // A worker's run() returns once its connections are gone; a client that keeps its
  // connection open is cut after 2 s.
  const auto drain_until = Clock::now() + std::chrono::seconds(2);
  for (auto& w : workers_) {
    while (!w->io_context().stopped() && Clock::now() < drain_until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    w->stop();
    w->join();
  }
  workers_.clear();  // their connections hold slots of caps_
  guard_.reset();
  control_.stop();
  control_thread_.join();
}

}  // namespace ratelimit::server::testing
