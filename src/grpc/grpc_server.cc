// grpc_server.cc — the completion-queue state machines of ShouldRateLimit and Health (see
// grpc_server.h). Each call object is a Tag: the queue hands back its address, proceed()
// advances it. Every call re-arms its method's slot as soon as it is accepted, with a few slots
// posted per queue, so accepting never waits for a call to finish.
#include "grpc_server.h"

#include <absl/synchronization/mutex.h>
#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace ratelimit::grpc_api {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using RateLimitService = ::envoy::service::ratelimit::v3::RateLimitService;
using PbRequest = ::envoy::service::ratelimit::v3::RateLimitRequest;
using PbResponse = ::envoy::service::ratelimit::v3::RateLimitResponse;

constexpr int kSlotsPerQueue = 16;  // calls accepted ahead, per queue and method

struct Tag {
  virtual ~Tag() = default;
  virtual void proceed(bool ok) = 0;
};

bool past(const ::grpc::ServerContext& ctx) {
  return ctx.deadline() <= std::chrono::system_clock::now();
}

::grpc::StatusCode grpc_code(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument: return ::grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kDeadlineExceeded: return ::grpc::StatusCode::DEADLINE_EXCEEDED;
    case StatusCode::kResourceExhausted: return ::grpc::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kNotFound: return ::grpc::StatusCode::NOT_FOUND;
    case StatusCode::kInternal: return ::grpc::StatusCode::INTERNAL;
    default: return ::grpc::StatusCode::UNAVAILABLE;
  }
}

// The message as an rls::RateLimitRequest, as sent: RateLimitService checks its shape (the
// proto's validation rules too), so gRPC and /json refuse alike.
void translate(const PbRequest& in, rls::RateLimitRequest& out) {
  out.clear();
  out.domain = in.domain();
  out.hits_addend = in.hits_addend();
  out.descriptors.resize(static_cast<size_t>(in.descriptors_size()));
  for (int i = 0; i < in.descriptors_size(); ++i) {
    const auto& d = in.descriptors(i);
    rls::RequestDescriptor& rd = out.descriptors[static_cast<size_t>(i)];
    rd.entries.resize(static_cast<size_t>(d.entries_size()));
    for (int j = 0; j < d.entries_size(); ++j) {
      const auto& e = d.entries(j);
      rd.entries[static_cast<size_t>(j)] = {e.key(), e.value()};
    }
    if (d.has_limit()) {
      rd.limit = rls::LimitOverride{d.limit().requests_per_unit(), static_cast<int64_t>(d.limit().unit())};
    }
    if (d.has_hits_addend()) rd.hits_addend = d.hits_addend().value();
  }
}

void render(const rls::RateLimitResponse& in, PbResponse& out) {
  out.Clear();
  out.set_overall_code(static_cast<PbResponse::Code>(in.overall_code));
  for (const rls::DescriptorStatus& s : in.statuses) {
    auto* st = out.add_statuses();
    st->set_code(static_cast<PbResponse::Code>(s.code));
    if (s.current_limit) {
      auto* l = st->mutable_current_limit();
      l->set_name(s.current_limit->name);
      l->set_requests_per_unit(s.current_limit->requests_per_unit);
      l->set_unit(static_cast<PbResponse::RateLimit::Unit>(s.current_limit->unit));
    }
    st->set_limit_remaining(s.limit_remaining);
    if (s.duration_until_reset_seconds) {
      st->mutable_duration_until_reset()->set_seconds(*s.duration_until_reset_seconds);
    }
  }
  for (const rls::HeaderValue& h : in.response_headers_to_add) {
    auto* hv = out.add_response_headers_to_add();
    hv->set_key(h.key);
    hv->set_value(h.value);
  }
}

}  // namespace

// One completion queue and its thread.
struct Queue {
  std::unique_ptr<::grpc::ServerCompletionQueue> cq;
};

struct GrpcServer::Impl {
  rls::RateLimitService* service = nullptr;
  RateLimitService::AsyncService rls;
  Health::AsyncService health;
  std::unique_ptr<::grpc::Server> server;
  std::vector<std::unique_ptr<Queue>> queues;
  std::vector<std::thread> threads;
  std::atomic<bool> serving{true};
  // Calls waiting for a store thread's answer: their alarm will be set on their queue, so the
  // queues must not shut down before they are back.
  std::atomic<int> awaiting_store{0};
  bool stopped = false;
  int port = 0;
};

namespace {

class RlsCallData final : public Tag, public rls::Call {
 public:
  RlsCallData(GrpcServer::Impl& impl, Queue& q) : impl_(impl), q_(q) {
    impl_.rls.RequestShouldRateLimit(&ctx_, &request_, &responder_, q_.cq.get(), q_.cq.get(), this);
  }

  void proceed(bool ok) override {
    switch (state_) {
      case State::kAccepting: {
        if (!ok) {  // the queue is shutting down
          delete this;
          return;
        }
        new RlsCallData(impl_, q_);  // the next call of this slot
        state_ = State::kDeciding;
        if (past(ctx_)) {  // nothing decided yet, so nothing is counted
          return fail(::grpc::Status(::grpc::StatusCode::DEADLINE_EXCEEDED,
                                     "the call's deadline passed before it was decided"));
        }
        translate(request_, request);
        impl_.awaiting_store.fetch_add(1);
        if (impl_.service->should_rate_limit(*this)) {
          impl_.awaiting_store.fetch_sub(1);
          answer();
        }
        return;
      }
      case State::kDeciding:  // the alarm: the store answered on its own thread
        // Pairs with done()'s release: the answer written on the store thread is visible here
        // (the alarm's own hand-off already orders it; this says so where tools can see it).
        (void)answered_.load(std::memory_order_acquire);
        impl_.awaiting_store.fetch_sub(1);
        answer();
        return;
      case State::kFinishing:
        delete this;
        return;
    }
  }

  // From a store thread: hand the answer back to this call's queue (its thread renders).
  // The Alarm is made here, so an answer given inline (the memory store) allocates none.
  void done() override {
    // Everything this thread reads of the call is read before the release below: once the
    // alarm fires the queue's thread may finish and delete the call.
    ::grpc::CompletionQueue* cq = q_.cq.get();
    ::grpc::Alarm& alarm = alarm_.emplace();
    Tag* tag = this;
    answered_.store(true, std::memory_order_release);
    alarm.Set(cq, gpr_now(GPR_CLOCK_MONOTONIC), tag);
  }

 private:
  enum class State : uint8_t { kAccepting, kDeciding, kFinishing };

  void fail(const ::grpc::Status& why) {
    state_ = State::kFinishing;
    responder_.FinishWithError(why, static_cast<Tag*>(this));
  }

  void answer() {
    if (past(ctx_)) {
      return fail(::grpc::Status(::grpc::StatusCode::DEADLINE_EXCEEDED,
                                 "the call's deadline passed while it was decided"));
    }
    if (!status.is_ok()) return fail(::grpc::Status(grpc_code(status), status.message()));
    render(response, response_);
    state_ = State::kFinishing;
    responder_.Finish(response_, ::grpc::Status::OK, static_cast<Tag*>(this));
  }

  GrpcServer::Impl& impl_;
  Queue& q_;
  ::grpc::ServerContext ctx_;
  PbRequest request_;
  PbResponse response_;
  ::grpc::ServerAsyncResponseWriter<PbResponse> responder_{&ctx_};
  // Set by done() only.
  std::optional<::grpc::Alarm> alarm_;
  std::atomic<bool> answered_{false};
  State state_ = State::kAccepting;
};

HealthCheckResponse::ServingStatus health_of(const GrpcServer::Impl& impl, const std::string& name,
                                             bool* known) {
  *known = name.empty() || name == RateLimitService::service_full_name();
  return impl.serving.load() ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
}

class CheckCallData final : public Tag {
 public:
  CheckCallData(GrpcServer::Impl& impl, Queue& q) : impl_(impl), q_(q) {
    impl_.health.RequestCheck(&ctx_, &request_, &responder_, q_.cq.get(), q_.cq.get(), this);
  }
  void proceed(bool ok) override {
    if (!ok || done_) {
      delete this;
      return;
    }
    new CheckCallData(impl_, q_);
    done_ = true;
    bool known = false;
    HealthCheckResponse response;
    response.set_status(health_of(impl_, request_.service(), &known));
    if (!known) {
      responder_.FinishWithError(::grpc::Status(::grpc::StatusCode::NOT_FOUND, "unknown service"), this);
      return;
    }
    responder_.Finish(response, ::grpc::Status::OK, this);
  }

 private:
  GrpcServer::Impl& impl_;
  Queue& q_;
  ::grpc::ServerContext ctx_;
  HealthCheckRequest request_;
  ::grpc::ServerAsyncResponseWriter<HealthCheckResponse> responder_{&ctx_};
  bool done_ = false;
};

class WatchCallData final : public Tag {
 public:
  WatchCallData(GrpcServer::Impl& impl, Queue& q) : impl_(impl), q_(q) {
    impl_.health.RequestWatch(&ctx_, &request_, &writer_, q_.cq.get(), q_.cq.get(), this);
  }
  void proceed(bool ok) override {
    if (!ok || step_ == 2) {
      delete this;
      return;
    }
    if (step_ == 0) {
      new WatchCallData(impl_, q_);
      step_ = 1;
      bool known = false;
      HealthCheckResponse response;
      response.set_status(health_of(impl_, request_.service(), &known));
      if (!known) response.set_status(HealthCheckResponse::SERVICE_UNKNOWN);
      writer_.Write(response, this);
      return;
    }
    step_ = 2;
    writer_.Finish(::grpc::Status::OK, this);
  }

 private:
  GrpcServer::Impl& impl_;
  Queue& q_;
  ::grpc::ServerContext ctx_;
  HealthCheckRequest request_;
  ::grpc::ServerAsyncWriter<HealthCheckResponse> writer_{&ctx_};
  int step_ = 0;
};

}  // namespace

Result<std::unique_ptr<GrpcServer>> GrpcServer::start(const GrpcServerOptions& options,
                                                      rls::RateLimitService& service) {
  // Debian builds abseil with its mutex deadlock detection on, which gRPC's every lock then
  // pays for (a lock-order graph update: ~10% of a call's CPU, measured with perf).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto impl = std::make_unique<Impl>();
  impl->service = &service;
  ::grpc::ServerBuilder builder;
  builder.AddListeningPort(options.address, ::grpc::InsecureServerCredentials(), &impl->port);
  builder.RegisterService(&impl->rls);
  builder.RegisterService(&impl->health);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  const unsigned threads = std::max(1u, options.threads);
  for (unsigned i = 0; i < threads; ++i) {
    impl->queues.push_back(std::make_unique<Queue>());
    impl->queues.back()->cq = builder.AddCompletionQueue();
  }
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    if (impl->server != nullptr) impl->server->Shutdown();
    for (auto& q : impl->queues) {
      q->cq->Shutdown();
      void* tag = nullptr;
      bool ok = false;
      while (q->cq->Next(&tag, &ok)) {
      }
    }
    return Status::unavailable("cannot listen on " + options.address);
  }
  for (auto& q : impl->queues) {
    for (int k = 0; k < kSlotsPerQueue; ++k) new RlsCallData(*impl, *q);
    new CheckCallData(*impl, *q);
    new WatchCallData(*impl, *q);
  }
  for (auto& q : impl->queues) {
    impl->threads.emplace_back([cq = q->cq.get()] {
      void* tag = nullptr;
      bool ok = false;
      while (cq->Next(&tag, &ok)) static_cast<Tag*>(tag)->proceed(ok);
    });
  }
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(impl)));
}

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcServer::~GrpcServer() { shutdown(); }

int GrpcServer::port() const { return impl_->port; }

void GrpcServer::drain() { impl_->serving.store(false); }

void GrpcServer::shutdown(std::chrono::milliseconds grace) {
  if (impl_->stopped) return;
  impl_->stopped = true;
  drain();
  // The queues keep running while Shutdown waits, so calls in flight can finish.
  impl_->server->Shutdown(std::chrono::system_clock::now() + grace);
  // The store answers within its own timeouts; bounded anyway.
  const auto until = std::chrono::steady_clock::now() + grace + std::chrono::seconds(5);
  while (impl_->awaiting_store.load() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& q : impl_->queues) q->cq->Shutdown();
  for (auto& t : impl_->threads) t.join();
}

}  // namespace ratelimit::grpc_api
