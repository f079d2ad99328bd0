// rlqs_load.cc — `ratelimit-bench rlqs`: a fleet of Envoy quota clients for Envoy's Rate Limit
// Quota Service (StreamRateLimitQuotas): `streams` bidirectional streams, each as one Envoy's
// quota filter keeps it (its own HTTP/2 connection unless --channels says fewer), each reporting
// `buckets` buckets per message, either every `interval` seconds (the fleet Envoy runs: the
// question "how many clients × buckets does one core serve at a 1 s report interval") or as
// fast as the answers come (--interval 0: the ceiling, reports/s and, with the script's CPU
// figure, CPU per report). Reports messages answered/s, bucket reports answered/s, p50/p99 of
// report → answer, late reports (paced mode: an answer that came after the next report was due)
// and errors (a failed stream, or an answer without one action per bucket).
//
// Why a generator of our own: no load tool speaks a gRPC bidirectional stream (h2load sends one
// fixed request per stream and waits for its end); this one uses the stubs the tests use.
// Why one thread and one completion queue: the generator must cost less than the server it
// measures; the lean client stack of `rls` (no retries, minimal filters) is used for the same reason.
// Invariants: every wait is bounded (each stream's deadline is the run's length + 30 s; the
// drain after the measured window at most 10 s); only the given target is contacted; bucket ids
// are {name: b<k>} with k in [0, bucket_space), stream i reporting (i·buckets + j) mod
// bucket_space for j < buckets — so with bucket_space = buckets (the default) every stream
// reports the same buckets and each bucket has `streams` clients to divide among.
#include <absl/synchronization/mutex.h>
#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"

namespace ratelimit::bench {
namespace {

namespace rlqs_pb = ::envoy::service::rate_limit_quota::v3;
using steady = std::chrono::steady_clock;
using Stream = ::grpc::ClientAsyncReaderWriter<rlqs_pb::RateLimitQuotaUsageReports, rlqs_pb::RateLimitQuotaResponse>;

enum class Op { kStart, kWrite, kRead, kAlarm, kFinish };

struct Client;
struct Tag {
  Client* client;
  Op op;
};

// One Envoy's stream: start → (write report → read answer → [wait for the next tick]) repeated.
struct Client {
  ::grpc::ClientContext ctx;
  std::unique_ptr<Stream> rw;
  ::grpc::Alarm alarm;
  rlqs_pb::RateLimitQuotaUsageReports first, next;  // the first names the domain
  rlqs_pb::RateLimitQuotaResponse answer;
  ::grpc::Status status;
  bool sent_first = false;
  int outstanding = 0;          // tags this client has in the queue
  steady::time_point sent{};    // when the last report was written
  steady::time_point due{};     // paced: when the next report is due
  Tag start{this, Op::kStart}, write{this, Op::kWrite}, read{this, Op::kRead}, tick{this, Op::kAlarm},
      finish{this, Op::kFinish};
};

void fill_report(rlqs_pb::RateLimitQuotaUsageReports& r, int64_t first_bucket, int64_t buckets,
                 int64_t bucket_space, double interval) {
  for (int64_t j = 0; j < buckets; ++j) {
    auto& usage = (*r.mutable_bucket_quota_usages())[static_cast<uint64_t>(j)];
    (*usage.mutable_bucket_id()->mutable_bucket())["name"] = "b" + std::to_string((first_bucket + j) % bucket_space);
    usage.set_num_requests_allowed(50);
    usage.set_num_requests_denied(0);
    usage.mutable_time_elapsed()->set_seconds(std::max<int64_t>(1, static_cast<int64_t>(interval)));
  }
}

std::chrono::system_clock::time_point wall_at(steady::time_point t) {
  return std::chrono::system_clock::now() + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                                t - steady::now());
}

}  // namespace

int run_rlqs(const RlqsOptions& o) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const int channels = o.channels > 0 ? std::min(o.channels, o.streams) : o.streams;
  std::vector<std::shared_ptr<::grpc::Channel>> chans;
  for (int c = 0; c < channels; ++c) {
    ::grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    args.SetInt(GRPC_ARG_MINIMAL_STACK, 1);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection per channel, as per Envoy
    chans.push_back(::grpc::CreateCustomChannel(o.target, ::grpc::InsecureChannelCredentials(), args));
  }
  for (auto& ch : chans) {
    if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      std::cerr << "ratelimit-bench rlqs: cannot connect to " << o.target << "\n";
      return 1;
    }
  }
  std::vector<std::unique_ptr<rlqs_pb::RateLimitQuotaService::Stub>> stubs;
  for (auto& ch : chans) stubs.push_back(rlqs_pb::RateLimitQuotaService::NewStub(ch));

  const int64_t space = o.bucket_space > 0 ? o.bucket_space : o.buckets;
  const auto run_for = std::chrono::duration<double>(o.warmup_seconds + o.seconds + 30);
  const auto period = std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(o.interval));
  ::grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<Client>> clients;
  const auto t_start = steady::now();
  for (int i = 0; i < o.streams; ++i) {
    auto c = std::make_unique<Client>();
    c->first.set_domain(o.domain);
    fill_report(c->first, static_cast<int64_t>(i) * o.buckets, o.buckets, space, o.interval);
    fill_report(c->next, static_cast<int64_t>(i) * o.buckets, o.buckets, space, o.interval);
    c->ctx.set_deadline(std::chrono::system_clock::now() +
                        std::chrono::duration_cast<std::chrono::system_clock::duration>(run_for));
    // Paced: the fleet's reports spread over one interval, as independent Envoys' are.
    c->due = t_start + period * i / std::max(1, o.streams);
    c->rw = stubs[static_cast<size_t>(i % channels)]->PrepareAsyncStreamRateLimitQuotas(&c->ctx, &cq);
    c->rw->StartCall(&c->start);
    c->outstanding = 1;
    clients.push_back(std::move(c));
  }

  const auto [t_measure, t_end] = measured_window(t_start, o.warmup_seconds, o.seconds);
  std::vector<double> lat_us;
  lat_us.reserve(1 << 20);
  uint64_t answered = 0, late = 0, errors = 0, bad_answers = 0;
  bool stopping = false;
  steady::time_point measured_from{}, measured_to{};
  int64_t outstanding = o.streams;
  auto send = [&](Client& c) {
    c.sent = steady::now();
    if (period.count() > 0) c.due += period;
    c.rw->Write(c.sent_first ? c.next : c.first, &c.write);
    c.sent_first = true;
    ++c.outstanding;
    ++outstanding;
  };
  auto stop_all = [&] {
    stopping = true;
    for (auto& c : clients) {
      c->ctx.TryCancel();
      c->alarm.Cancel();
    }
  };
  const auto drain_limit = t_end + std::chrono::seconds(10);
  while (outstanding > 0) {
    void* raw = nullptr;
    bool fine = false;
    const auto st = cq.AsyncNext(&raw, &fine, std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    const auto now = steady::now();
    if (!stopping && now >= t_end) {
      measured_to = now;
      stop_all();
    }
    if (st == ::grpc::CompletionQueue::SHUTDOWN) break;
    if (st == ::grpc::CompletionQueue::TIMEOUT) {
      if (now > drain_limit) {
        std::cerr << "ratelimit-bench rlqs: streams did not end\n";
        return 1;
      }
      continue;
    }
    if (measured_from == steady::time_point{} && now >= t_measure) measured_from = now;
    auto* tag = static_cast<Tag*>(raw);
    Client& c = *tag->client;
    --c.outstanding;
    --outstanding;
    if (stopping) continue;
    if (!fine && tag->op != Op::kAlarm) {  // the stream failed: why, from its status
      ++errors;
      c.rw->Finish(&c.status, &c.finish);
      ++c.outstanding;
      ++outstanding;
      continue;
    }
    switch (tag->op) {
      case Op::kStart:
        if (period.count() > 0 && c.due > now) {
          c.alarm.Set(&cq, wall_at(c.due), &c.tick);
          ++c.outstanding;
          ++outstanding;
        } else {
          send(c);
        }
        break;
      case Op::kAlarm:
        send(c);
        break;
      case Op::kWrite:
        c.rw->Read(&c.answer, &c.read);
        ++c.outstanding;
        ++outstanding;
        break;
      case Op::kRead: {
        if (measured_from != steady::time_point{}) {
          ++answered;
          lat_us.push_back(std::chrono::duration<double, std::micro>(now - c.sent).count());
          if (c.answer.bucket_action_size() != static_cast<int>(o.buckets)) ++bad_answers;
        }
        if (period.count() > 0 && c.due > now) {
          c.alarm.Set(&cq, wall_at(c.due), &c.tick);
          ++c.outstanding;
          ++outstanding;
        } else {
          if (period.count() > 0 && measured_from != steady::time_point{}) ++late;
          if (period.count() > 0) c.due = now;  // behind: report now, the next one period later
          send(c);
        }
        break;
      }
      case Op::kFinish:
        std::cerr << "ratelimit-bench rlqs: a stream ended: " << c.status.error_message() << "\n";
        break;
    }
  }
  cq.Shutdown();
  void* raw = nullptr;
  bool fine = false;
  while (cq.Next(&raw, &fine)) {
  }
  const double elapsed = std::chrono::duration<double>(measured_to - measured_from).count();
  if (elapsed <= 0 || answered == 0) {
    std::cerr << "ratelimit-bench rlqs: nothing measured\n";
    return 1;
  }
  const double rate = static_cast<double>(answered) / elapsed;
  const double p50 = percentile(lat_us, 0.50), p99 = percentile(lat_us, 0.99);
  std::printf("target=%s streams=%d channels=%d buckets=%lld bucket_space=%lld interval_s=%.3f seconds=%.1f "
              "reports/s=%.1f bucket_reports/s=%.0f p50_us=%.1f p99_us=%.1f late=%llu bad_answers=%llu "
              "errors=%llu\n",
              o.target.c_str(), o.streams, channels, static_cast<long long>(o.buckets),
              static_cast<long long>(space), o.interval, elapsed, rate, rate * static_cast<double>(o.buckets),
              p50, p99, static_cast<unsigned long long>(late), static_cast<unsigned long long>(bad_answers),
              static_cast<unsigned long long>(errors));
  if (!o.json_peer.empty()) {
    std::printf("{\"peer\": \"%s\", \"workload\": \"%s\", \"metric\": \"reports_per_s\", \"value\": %.1f, "
                "\"unit\": \"reports/s\", \"bucket_reports_per_s\": %.0f, \"streams\": %d, \"buckets\": %lld, "
                "\"interval_s\": %.3f, \"seconds\": %.3f, \"p50_us\": %.0f, \"p99_us\": %.0f, \"late\": %llu, "
                "\"bad_answers\": %llu, \"errors\": %llu}\n",
                o.json_peer.c_str(), o.workload.c_str(), rate, rate * static_cast<double>(o.buckets), o.streams,
                static_cast<long long>(o.buckets), o.interval, elapsed, p50, p99, static_cast<unsigned long long>(late),
                static_cast<unsigned long long>(bad_answers), static_cast<unsigned long long>(errors));
  }
  return errors == 0 && bad_answers == 0 ? 0 : 1;
}

}  // namespace ratelimit::bench
