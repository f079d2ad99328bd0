// service.h — ratelimitd's endpoints: routing, admin auth, decisions against the store, and
// the configuration snapshot that every request reads. No socket code: the Beast layer
// (server.cc) parses a request into a RequestView and sends back the http::Response.
//
// Why apart from the I/O: the contract (statuses, headers, bodies, what counts as bad input)
// is the product; keeping it out of the connection code keeps both readable.
// Invariants:
//   - a request is decided against one configuration snapshot from start to end, even if a
//     reload lands meanwhile;
//   - bad input is refused before the store is touched, so it never consumes a unit;
//   - the admin token is compared in constant time and never written anywhere.
// Threading: one Service is shared by all I/O threads; each thread passes its own
// ThreadContext (scratch buffers and a cached snapshot). handle() may be called concurrently
// from several threads with distinct contexts.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config.h"
#include "metrics.h"
#include "ratelimit/decision.h"
#include "ratelimit/http.h"
#include "ratelimit/store.h"
#include "request.h"

namespace ratelimit {
class MemoryStore;
}

namespace ratelimit::server {

enum class Method : uint8_t { kGet, kHead, kPost, kOther };

// What the endpoints need from one HTTP request (views into the connection's buffers).
struct RequestView {
  Method method = Method::kOther;
  std::string_view target;  // path and query
  std::string_view body;
  const std::string* authorization = nullptr;  // nullptr: header absent
  const std::string* forwarded_for = nullptr;  // X-Forwarded-For
  const std::string* key_header = nullptr;     // the configured forward-auth key header
  std::string_view peer;                       // client address, for forward-auth
};

// Resumes a connection whose answer is produced asynchronously (a networked store). resume()
// is called exactly once, on any thread, after `out` has been filled.
class Waiter {
 public:
  virtual ~Waiter() = default;
  virtual void resume() = 0;
};

struct ActivePolicy {
  const PolicyConfig* config;  // owned by the snapshot's Config
  PolicyCounters* counters;
  http::PolicyInfo info;
};

// One immutable configuration in use, with everything derived from it for the hot path.
struct Snapshot {
  std::shared_ptr<const Config> config;
  std::unordered_map<std::string_view, ActivePolicy> policies;  // keys view config's names
  uint64_t generation = 0;

  const ActivePolicy* find(std::string_view name) const {
    auto it = policies.find(name);
    return it == policies.end() ? nullptr : &it->second;
  }
};

class Service {
 public:
  // Per-thread state: reuse buffers, and avoid touching the shared snapshot pointer (and its
  // reference count) on every request.
  struct ThreadContext {
    std::shared_ptr<const Snapshot> snapshot;
    uint64_t generation = 0;
    DecisionRequest request;
    RequestError error;
    std::vector<const ActivePolicy*> actives;
    std::vector<Policy> enforced;
    std::vector<Decision> decisions;
    std::vector<http::PolicyInfo> infos;
  };

  // `memory` is the store itself when it is the in-process MemoryStore (decisions are then made
  // inline on the calling thread), else nullptr.
  Service(std::shared_ptr<Store> store, MemoryStore* memory, Metrics& metrics,
          std::shared_ptr<const Config> config);

  // The snapshot this thread should use now (refreshed when a reload has been published).
  const Snapshot& snapshot(ThreadContext& tc) const;
  std::shared_ptr<const Config> config() const;

  // Answers `req` into `out`. Returns true when `out` is complete; false when the answer will
  // be written later, after which waiter->resume() is called exactly once. `endpoint` is set
  // for the metrics (the caller counts the final status).
  bool handle(const RequestView& req, ThreadContext& tc, http::Response& out,
              const std::shared_ptr<Waiter>& waiter, Endpoint& endpoint);

  // Re-reads `path`, applies `overrides`, validates, and swaps the new snapshot in if it may
  // replace the running one (check_reloadable). On error nothing changes. Records the result
  // in the metrics. Thread-safe; reloads are serialised.
  Status reload(const std::string& path, const Overrides& overrides);

  Metrics& metrics() { return metrics_; }
  // Generation of the snapshot published last (1 = the configuration loaded at start).
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  void publish(std::shared_ptr<const Config> config);
  bool decide(const RequestView& req, ThreadContext& tc, const Snapshot& snap, bool peek,
              http::Response& out, const std::shared_ptr<Waiter>& waiter);
  bool reset(const RequestView& req, ThreadContext& tc, const Snapshot& snap, http::Response& out,
             const std::shared_ptr<Waiter>& waiter);
  void error(ThreadContext& tc, http::Response& out) const;

  std::shared_ptr<Store> store_;
  MemoryStore* memory_;
  Metrics& metrics_;

  mutable std::mutex mu_;  // guards current_ and serialises reloads
  std::shared_ptr<const Snapshot> current_;
  std::atomic<uint64_t> generation_{0};
  std::mutex reload_mu_;
};

// Constant-time comparison of a presented bearer credential with the configured token.
bool token_matches(std::string_view presented, std::string_view expected);

}  // namespace ratelimit::server
