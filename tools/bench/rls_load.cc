// rls_load.cc — `ratelimit-bench rls`: a closed-loop gRPC load generator for Envoy's
// ShouldRateLimit. `inflight` calls are kept outstanding on one channel (one HTTP/2
// connection, as Envoy's rate-limit cluster uses); each completion records its latency and
// issues the next call, from one client thread polling one completion queue. Reports
// decisions/s (completed RPCs, OK or OVER_LIMIT), p50/p99 latency and the counts of each answer.
//
// Why a generator of our own: wrk speaks HTTP/1.1 only and ghz is not packaged in Debian;
// this one uses the same generated stubs as the tests.
// Why a lean client stack by default: the generator must cost less per call than the server
// it measures, or it is the ceiling (with gRPC's default client stack it took ~30 µs per call,
// as much as the server, on one core each). The retry filter (which copies every call's
// metadata to be able to replay it) and the rest of the default filters (client-side deadline
// timer, message-size and compression filters) are left out unless --full-stack; the deadline
// still travels to the server as grpc-timeout, and the drain below bounds every wait. Envoy's
// own client is its HTTP/2 codec, not gRPC's C++ stack, so neither stack is Envoy's cost.
// Invariants: every wait is bounded (a deadline of 5 s per call; the drain after the measured
// window at most 10 s); nothing but loopback or the given target is contacted.
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace ratelimit::bench {
namespace {

using RateLimitService = ::envoy::service::ratelimit::v3::RateLimitService;
using RateLimitRequest = ::envoy::service::ratelimit::v3::RateLimitRequest;
using RateLimitResponse = ::envoy::service::ratelimit::v3::RateLimitResponse;
using steady = std::chrono::steady_clock;

// One call in flight; reused by the next call (a ClientContext serves one call only, so it is
// rebuilt in place rather than the slot reallocated).
struct Slot {
  std::optional<::grpc::ClientContext> ctx;
  RateLimitResponse resp;
  ::grpc::Status status;
  std::unique_ptr<::grpc::ClientAsyncResponseReader<RateLimitResponse>> reader;
  steady::time_point sent;
};

}  // namespace

int run_rls(const RlsOptions& o) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  ::grpc::ChannelArguments args;
  if (!o.full_stack) {
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    args.SetInt(GRPC_ARG_MINIMAL_STACK, 1);
  }
  auto channel = ::grpc::CreateCustomChannel(o.target, ::grpc::InsecureChannelCredentials(), args);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
    std::cerr << "ratelimit-bench rls: cannot connect to " << o.target << "\n";
    return 1;
  }
  auto stub = RateLimitService::NewStub(channel);
  std::vector<RateLimitRequest> requests(static_cast<size_t>(o.keys));
  for (int64_t k = 0; k < o.keys; ++k) {
    RateLimitRequest& r = requests[static_cast<size_t>(k)];
    r.set_domain(o.domain);
    auto* e = r.add_descriptors()->add_entries();
    e->set_key(o.key);
    e->set_value(o.keys == 1 ? std::string("hot") : "v" + std::to_string(k));
  }
  ::grpc::CompletionQueue cq;
  std::vector<Slot> slots(static_cast<size_t>(o.inflight));
  uint64_t next_request = 0;
  auto issue = [&](Slot& s) {
    s.reader.reset();  // before its call's context goes
    s.ctx.emplace();
    s.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    s.sent = steady::now();
    s.reader = stub->AsyncShouldRateLimit(&*s.ctx, requests[next_request++ % requests.size()], &cq);
    s.reader->Finish(&s.resp, &s.status, &s);
  };
  for (Slot& s : slots) issue(s);

  const auto [t_measure, t_end] = measured_window(steady::now(), o.warmup_seconds, o.seconds);
  std::vector<double> lat_us;
  lat_us.reserve(1 << 20);
  uint64_t done = 0, ok = 0, over = 0, errors = 0;
  size_t outstanding = slots.size();
  bool measuring = false, stopping = false;
  steady::time_point measured_from{}, measured_to{};
  const auto drain_limit = t_end + std::chrono::seconds(10);
  while (outstanding > 0) {
    void* tag = nullptr;
    bool fine = false;
    const auto status = cq.AsyncNext(&tag, &fine, std::chrono::system_clock::now() + std::chrono::seconds(1));
    const auto now = steady::now();
    if (status == ::grpc::CompletionQueue::SHUTDOWN) break;
    if (status == ::grpc::CompletionQueue::TIMEOUT) {
      if (now > drain_limit) {
        std::cerr << "ratelimit-bench rls: calls did not complete\n";
        return 1;
      }
      continue;
    }
    if (!measuring && !stopping && now >= t_measure) {
      measuring = true;
      measured_from = now;
    }
    if (measuring && now >= t_end) {
      measuring = false;
      stopping = true;
      measured_to = now;
    }
    auto* s = static_cast<Slot*>(tag);
    if (measuring) {
      ++done;
      lat_us.push_back(std::chrono::duration<double, std::micro>(now - s->sent).count());
      if (!fine || !s->status.ok()) ++errors;
      else if (s->resp.overall_code() == RateLimitResponse::OK) ++ok;
      else ++over;
    } else if (!fine || !s->status.ok()) {
      ++errors;
    }
    if (stopping) {
      --outstanding;
    } else {
      issue(*s);
    }
  }
  const double elapsed = std::chrono::duration<double>(measured_to - measured_from).count();
  if (elapsed <= 0) {
    std::cerr << "ratelimit-bench rls: nothing measured\n";
    return 1;
  }
  const double rate = static_cast<double>(done) / elapsed;
  const double p50 = percentile(lat_us, 0.50), p99 = percentile(lat_us, 0.99);
  std::printf("target=%s domain=%s keys=%lld inflight=%d seconds=%.1f decisions/s=%.0f "
              "p50_us=%.1f p99_us=%.1f ok=%llu over_limit=%llu errors=%llu\n",
              o.target.c_str(), o.domain.c_str(), static_cast<long long>(o.keys), o.inflight,
              elapsed, rate, p50, p99, static_cast<unsigned long long>(ok),
              static_cast<unsigned long long>(over), static_cast<unsigned long long>(errors));
  if (!o.json_peer.empty()) {
    const std::string workload = (o.workload.empty() ? "rls.c" + std::to_string(o.inflight) : o.workload);
    std::printf("{\"peer\": \"%s\", \"workload\": \"%s\", \"metric\": \"requests_per_s\", "
                "\"value\": %.1f, \"unit\": \"req/s\", \"requests\": %llu, \"seconds\": %.3f, "
                "\"p50_us\": %.0f, \"p99_us\": %.0f, \"denied\": %llu, \"errors\": %llu}\n",
                o.json_peer.c_str(), workload.c_str(), rate, static_cast<unsigned long long>(done),
                elapsed, p50, p99, static_cast<unsigned long long>(over),
                static_cast<unsigned long long>(errors));
  }
  return errors == 0 ? 0 : 1;
}

}  // namespace ratelimit::bench
