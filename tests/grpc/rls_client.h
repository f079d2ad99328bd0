// rls_client.h — the test side of Envoy's rate-limit API, shared by the gRPC tests: building a
// RateLimitRequest from (key, value) lists, and firing many ShouldRateLimit calls at once.
//
// Why: the in-process and the end-to-end tests ask the same questions of two different
// servers; one client keeps them asking alike.
// Invariants: every call carries a deadline (20 s), so no wait is unbounded.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace ratelimit::grpc_test {

using RateLimitService = ::envoy::service::ratelimit::v3::RateLimitService;
using RateLimitRequest = ::envoy::service::ratelimit::v3::RateLimitRequest;
using RateLimitResponse = ::envoy::service::ratelimit::v3::RateLimitResponse;
using Entries = std::vector<std::pair<std::string, std::string>>;

inline RateLimitRequest make_request(const std::string& domain, const std::vector<Entries>& descriptors) {
  RateLimitRequest r;
  r.set_domain(domain);
  for (const auto& d : descriptors) {
    auto* desc = r.add_descriptors();
    for (const auto& [k, v] : d) {
      auto* e = desc->add_entries();
      e->set_key(k);
      e->set_value(v);
    }
  }
  return r;
}

struct CallCounts {
  int ok = 0;      // overall_code OK
  int over = 0;    // overall_code OVER_LIMIT
  int failed = 0;  // a gRPC error
};

// `n` asynchronous calls of `req`, all issued before any answer is read (so they are in flight
// together), spread round robin over `stubs`.
inline CallCounts concurrent_calls(const std::vector<RateLimitService::Stub*>& stubs,
                                   const RateLimitRequest& req, int n) {
  ::grpc::CompletionQueue cq;
  struct Pending {
    ::grpc::ClientContext ctx;
    RateLimitResponse resp;
    ::grpc::Status status;
    std::unique_ptr<::grpc::ClientAsyncResponseReader<RateLimitResponse>> reader;
  };
  std::vector<std::unique_ptr<Pending>> calls;
  for (int i = 0; i < n; ++i) {
    auto c = std::make_unique<Pending>();
    c->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    c->reader = stubs[static_cast<size_t>(i) % stubs.size()]->AsyncShouldRateLimit(&c->ctx, req, &cq);
    c->reader->Finish(&c->resp, &c->status, c.get());
    calls.push_back(std::move(c));
  }
  CallCounts counts;
  for (int i = 0; i < n; ++i) {
    void* tag = nullptr;
    bool fine = false;
    if (!cq.Next(&tag, &fine)) {
      counts.failed += n - i;
      break;
    }
    auto* c = static_cast<Pending*>(tag);
    if (!fine || !c->status.ok()) ++counts.failed;
    else if (c->resp.overall_code() == RateLimitResponse::OK) ++counts.ok;
    else ++counts.over;
  }
  return counts;
}

}  // namespace ratelimit::grpc_test
