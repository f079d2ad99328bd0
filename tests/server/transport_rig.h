// transport_rig.h — ratelimitd's transport in process for tests: its Listener on 127.0.0.1 (a
// free port), Workers, ConnectionCaps and the Served the test describes, with fixed limits and
// counters the test reads. No configuration, metrics, API or service: the rig links only
// ratelimit_server_transport, as the transport itself does.
//
// Used by the transport's own tests (http1_test.cc) and by the gRPC tests' host
// (tests/grpc/grpc_host.h), which plug the gRPC streams into `served.h2c`.
// Thread-safety: construction, limits(), stop() and the destructor from the test's thread;
// the counters may be read from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "caps.h"
#include "listener.h"
#include "transport_host.h"
#include "worker.h"

namespace ratelimit::server::testing {

// The transport's counters, kept for the test to read. Requests are kept by (label, status)
// in a small table: labels are whatever the routes carry.
class RigCounters final : public TransportCounters {
 public:
  void count_request(Endpoint endpoint, unsigned status) override;
  void connection_opened() override { open_.fetch_add(1); }
  void connection_closed() override { open_.fetch_sub(1); }
  void connection_rejected() override { rejected_.fetch_add(1); }
  void connection_rejected_per_client() override { rejected_per_client_.fetch_add(1); }
  void connection_first_byte_timeout() override { first_byte_timeouts_.fetch_add(1); }
  int64_t open_connections() const override { return open_.load(); }

  // Answers counted with this label and status.
  uint64_t requests(Endpoint endpoint, unsigned status) const;
  uint64_t rejected_per_client() const { return rejected_per_client_.load(); }
  uint64_t first_byte_timeouts() const { return first_byte_timeouts_.load(); }

 private:
  static constexpr size_t kLabels = 16, kStatuses = 600;
  std::unique_ptr<std::atomic<uint64_t>[]> requests_{new std::atomic<uint64_t>[kLabels * kStatuses]()};
  std::atomic<int64_t> open_{0};
  std::atomic<uint64_t> rejected_{0}, rejected_per_client_{0}, first_byte_timeouts_{0};
};

struct RigOptions {
  unsigned threads = 1;
  ConnectionLimits limits;
};

class TransportRig {
 public:
  // Serves `served` (which must outlive the rig) from now on.
  explicit TransportRig(const Served& served, const RigOptions& options = {});
  ~TransportRig() { stop(); }
  TransportRig(const TransportRig&) = delete;
  TransportRig& operator=(const TransportRig&) = delete;

  int port() const { return port_; }
  RigCounters& counters() { return counters_; }
  // The server drains (Worker::drain: idle connections close, busy ones after their answer).
  void drain();
  // Stops as ratelimitd does: listener closed, workers drained, then — once `settled` holds
  // (answers still with a store; bounded 7 s) and the connections are gone (bounded 2 s) — the
  // workers stopped and joined. Idempotent.
  void stop(const std::function<bool()>& settled = {});

 private:
  class FixedLimits final : public LimitsSource {
   public:
    explicit FixedLimits(const ConnectionLimits& l) : limits_(l) {}
    const ConnectionLimits& get(Cache&) const override { return limits_; }

   private:
    ConnectionLimits limits_;
  };

  FixedLimits limits_;
  RigCounters counters_;
  ConnectionCaps caps_{limits_, counters_};
  boost::asio::io_context control_{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_{control_.get_executor()};
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<Listener> listener_;
  std::thread control_thread_;
  int port_ = 0;
  bool stopped_ = false;
};

}  // namespace ratelimit::server::testing
