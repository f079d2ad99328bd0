// rls_daemon.h — the real ratelimitd with a gRPC listener (`grpc_listen` in its YAML), for
// the end-to-end gRPC tests: the daemon (tests/server/daemon.h), its gRPC port read from its
// log, and a channel and ShouldRateLimit stub on it.
// Invariants: every wait is bounded (Daemon's own bounds); the daemon is killed by pid when the
// object dies.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "daemon.h"
#include "rls_client.h"
#include "window_room.h"

namespace ratelimit::grpc_test {

// ratelimitd with its gRPC port read from its log.
struct Server {
  e2e::Daemon daemon;
  uint16_t grpc_port = 0;
  std::shared_ptr<::grpc::Channel> channel;
  std::unique_ptr<RateLimitService::Stub> stub;

  // Starts ratelimitd on `yaml` once the clock's minute, hour and day have 10 s left: the e2e
  // configurations count per minute, hour and day, in windows aligned to the clock, and a
  // boundary mid-test would give counts back (a test here takes well under 10 s).
  bool start(const std::string& yaml) {
    testing::await_window_room({std::chrono::seconds(60), std::chrono::hours(1), std::chrono::hours(24)},
                               std::chrono::seconds(10));
    if (!daemon.start(yaml)) {
      ADD_FAILURE() << "ratelimitd did not start:\n" << daemon.log();
      return false;
    }
    constexpr std::string_view kMarker = "grpc_listen 127.0.0.1:";
    if (!daemon.wait_log(kMarker, std::chrono::seconds(10))) {
      ADD_FAILURE() << "no gRPC listener in the log:\n" << daemon.log();
      return false;
    }
    const std::string log = daemon.log();
    grpc_port = static_cast<uint16_t>(std::atoi(log.c_str() + log.find(kMarker) + kMarker.size()));
    channel = ::grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port),
                                    ::grpc::InsecureChannelCredentials());
    stub = RateLimitService::NewStub(channel);
    return grpc_port != 0;
  }
};

}  // namespace ratelimit::grpc_test
