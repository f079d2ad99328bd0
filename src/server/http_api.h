// http_api.h — ratelimitd's HTTP endpoints: routing, admin auth, request parsing and
// rendering. Every decision is the decision service's (src/service): this file turns an HTTP
// request into service Items and the service's answer into an http::Response. No socket code:
// the Beast layer (server.cc) parses a request into a RequestView and sends back the Response.
//
// Why apart from the I/O: the contract (statuses, headers, bodies, what counts as bad input)
// is the product; keeping it out of the connection code keeps both readable.
// Invariants:
//   - a request is decided against one published configuration (Config and rules together)
//     from start to end, even if a reload lands meanwhile;
//   - bad input is refused before the store is touched, so it never consumes a unit;
//   - the admin token is compared in constant time and never written anywhere.
// Threading: one HttpApi is shared by all I/O threads; each thread passes its own
// ThreadContext (scratch buffers and a cached snapshot), each connection its own Exchange.
// handle() may be called concurrently from several threads with distinct contexts.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "config.h"
#include "decision_service.h"
#include "handler.h"
#include "metrics.h"
#include "ratelimit/http.h"
#include "request.h"
#include "rls_service.h"
#include "snapshot.h"

namespace ratelimit::server {

// What the endpoints need from one HTTP request (views into the connection's buffers).
struct RequestView {
  Method method = Method::kOther;
  std::string_view target;  // path and query
  std::string_view body;
  const std::string* authorization = nullptr;  // nullptr: header absent
  const std::string* forwarded_for = nullptr;  // X-Forwarded-For, every occurrence joined by ", "
  const std::string* forwarded = nullptr;      // RFC 7239 Forwarded, likewise
  const std::string* key_header = nullptr;     // the configured forward-auth key header
  std::string_view peer;                       // client address, for forward-auth
  uint8_t listener = 0;                        // which listener accepted it (EnvoyFront's roles)
  bool admin_listener = false;                 // arrived on admin_listen (operator endpoints only)
};

class EnvoyFront;

// One configuration in use: the daemon's Config (limits, forward-auth, admin) and the decision
// service's rules built from it, published together so a request never mixes two of them.
struct Published {
  std::shared_ptr<const Config> config;
  std::shared_ptr<const service::Snapshot> rules;
};

// The decision service's rules for `config`'s policies, counted in `metrics`.
std::shared_ptr<const service::Snapshot> build_rules(const Config& config, Metrics& metrics);

class HttpApi {
 public:
  // Per-thread state: reused buffers, and the cached published configuration.
  struct ThreadContext {
    service::SnapshotCell<Published>::Cache cache;
    DecisionRequest request;
    RequestError error;
    std::vector<service::Item> items;
  };

  // One connection's request in flight. The connection implements resume() (inherited from
  // service::Pending): it is called from a store thread when handle() returned false; the
  // connection then posts to its own thread and calls complete() there.
  class Exchange : public service::Pending {
   private:
    friend class HttpApi;
    friend class EnvoyFront;
    enum class Kind : uint8_t { kDecision, kReset, kEnvoy };
    Kind kind_ = Kind::kDecision;
    unsigned deny_status_ = 429;                 // forward-auth: what a denial is answered with
    http::RenderOptions render_;                 // the configuration's header set, problem_json
    std::vector<http::PolicyInfo> infos_;        // views into the rules of `hold_`
    std::shared_ptr<const Published> hold_;      // kept only while answered asynchronously
    std::unique_ptr<rls::Call> envoy_call_;      // --envoy-env POST /json (created on first use)
  };

  HttpApi(service::DecisionService& decisions, Metrics& metrics,
          std::shared_ptr<const Config> config);

  // The configuration this thread should use now (refreshed when a reload has been published).
  const Published& snapshot(ThreadContext& tc) const { return published_.get(tc.cache); }
  std::shared_ptr<const Config> config() const { return published_.get()->config; }

  // Answers `req` into `out`. Returns true when `out` is complete; false when the answer
  // comes later: exchange.resume() is then called once, from another thread, and the
  // connection calls complete() on its own thread. `endpoint` is set for the metrics (the
  // caller counts the final status).
  bool handle(const RequestView& req, ThreadContext& tc, http::Response& out, Exchange& exchange,
              Endpoint& endpoint);
  // Renders an answer that completed asynchronously (after exchange.resume()).
  void complete(Exchange& exchange, http::Response& out) const;

  // Re-reads `path`, applies `overrides`, validates, and swaps the new configuration in if it
  // may replace the running one (check_reloadable). On error nothing changes. Records the
  // result in the metrics. Thread-safe; reloads are serialised.
  Status reload(const std::string& path, const Overrides& overrides);

  // /readyz answers 503 with the probe's reason while it is not OK. Set before serving.
  void set_readiness(std::function<Status()> probe) { readiness_ = std::move(probe); }
  // /readyz answers 503 from now on (the server is draining). Any thread.
  void set_draining() { draining_.store(true, std::memory_order_relaxed); }
  bool draining() const { return draining_.load(std::memory_order_relaxed); }

  // --envoy-env: every request is routed to `front` (envoyproxy/ratelimit's endpoints) instead
  // of the native API. Set before serving; `front` must outlive the server.
  void set_envoy(EnvoyFront* front) { envoy_ = front; }

  Metrics& metrics() { return metrics_; }
  // Generation of the configuration published last (1 = the one loaded at start).
  uint64_t generation() const { return published_.generation(); }

 private:
  void publish(std::shared_ptr<const Config> config);
  bool decide(ThreadContext& tc, const Published& snap, bool peek, http::Response& out,
              Exchange& exchange);
  bool reset(const RequestView& req, ThreadContext& tc, const Published& snap, http::Response& out,
             Exchange& exchange);
  void render(const Exchange& exchange, http::Response& out) const;
  void error(ThreadContext& tc, http::Response& out) const;

  service::DecisionService& decisions_;
  Metrics& metrics_;
  service::SnapshotCell<Published> published_;
  std::mutex reload_mu_;
  std::function<Status()> readiness_;
  std::atomic<bool> draining_{false};
  EnvoyFront* envoy_ = nullptr;
};

// Constant-time comparison of a presented bearer credential with the configured token.
bool token_matches(std::string_view presented, std::string_view expected);

}  // namespace ratelimit::server
