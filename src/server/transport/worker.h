// worker.h — one I/O thread of ratelimitd: an io_context run by exactly one thread, the
// connections it serves, their timeouts and the drain at shutdown.
//
// Why one thread per io_context: a connection's handlers never race and need no strand; a
// request served by a store that answers inline (memory) is parsed, decided and answered on
// this thread with no hand-off. Timeouts: each connection keeps a deadline, and a sweep every
// 250 ms asks every tracked connection to check it — one integer store per request instead
// of a timer, so a slow or silent client (slowloris) cannot hold a connection.
// What it does not know: any protocol or API. A transport's connection registers itself
// (TrackedConnection) and is told when to check its deadline and when the server drains.
// Draining: run() returns as soon as the last connection is gone (the sweep is cancelled then,
// rather than left to expire up to 250 ms later).
// Thread-safety: start/drain/stop/join from the control thread; everything else only on the
// worker's own thread.
#pragma once

#include <chrono>
#include <thread>
#include <unordered_set>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "transport_host.h"

namespace ratelimit::server {

// A connection the worker supervises (implemented by each transport's connection).
class TrackedConnection {
 public:
  // Close if a deadline passed (idle, first byte, request). Worker thread.
  virtual void check_deadline(std::chrono::steady_clock::time_point now) = 0;
  // The server drains: close when idle, else after the answers in flight. Worker thread.
  virtual void on_drain() = 0;

 protected:
  ~TrackedConnection() = default;
};

class Worker {
 public:
  // `limits` and `counters` must outlive the worker.
  Worker(const LimitsSource& limits, TransportCounters& counters) : limits_(limits), counters_(counters) {}

  void start();
  // Drain: every tracked connection's on_drain(); run() returns once none is left.
  void drain();
  void stop() { ioc_.stop(); }
  void join() {
    if (thread_.joinable()) thread_.join();
  }

  boost::asio::io_context& io_context() { return ioc_; }
  // Worker thread only:
  bool draining() const { return draining_; }
  // The connection limits as now published (re-read only when a reload was published); valid
  // until the next call on this thread.
  const ConnectionLimits& limits() { return limits_.get(cache_); }
  TransportCounters& counters() { return counters_; }
  void track(TrackedConnection& c) {
    connections_.insert(&c);
    if (!sweep_armed_) arm_sweep();  // a connection that arrived after the drain emptied the worker
  }
  void untrack(TrackedConnection& c) {
    connections_.erase(&c);
    if (draining_ && connections_.empty()) sweep_.cancel();  // run() returns now, not at the next sweep
  }

 private:
  void arm_sweep();

  const LimitsSource& limits_;
  LimitsSource::Cache cache_;
  TransportCounters& counters_;
  bool draining_ = false;
  bool sweep_armed_ = false;  // a sweep wait is pending (cancelled once draining leaves nothing)
  // Declared before ioc_ so it outlives the handlers (and connections) the io_context destroys
  // when it is torn down.
  std::unordered_set<TrackedConnection*> connections_;
  boost::asio::io_context ioc_{1};
  boost::asio::steady_timer sweep_{ioc_};
  std::thread thread_;
};

}  // namespace ratelimit::server
