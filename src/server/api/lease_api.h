// lease_api.h — ratelimitd's lease endpoints for concurrency policies, as one Handler on the
// subtree /v1/leases:
//   POST   /v1/leases              {"key", "policy", "cost"}  -> 200 the lease, or 429
//   POST   /v1/leases/{id}/renew                              -> 200 renewed, or 404 not held
//   DELETE /v1/leases/{id} [{"outcome", "latency_ms"}]        -> 200 {"released": true|false}
// {id} is the lease token (lease_token.h): the store's random 128-bit lease id with the policy
// and key, so any ratelimitd on the same store answers it and no body is needed. Every answer
// carries RateLimit-Policy with qu="concurrent-requests". The contract: docs/http-api.md and
// docs/throttling.md.
//
// Invariants:
//   - only concurrency policies are accepted here (400 otherwise), and nothing else in the API
//     takes a lease (native_api.cc refuses them), so every unit taken can be given back by id;
//   - a release is idempotent and ownership-checked by the store: an expired, released or
//     foreign id frees nothing (200 {"released": false});
//   - bad input (a malformed token, an unknown policy) is refused before the store is touched.
// Metrics: LeaseMetrics (lease_metrics.h), which the handler reports each answer to.
// Thread-safety: the handler is shared by every worker; per-request state lives in the
// Exchange; LeaseMetrics is guarded by its own mutex.
#pragma once

#include "handler.h"
#include "lease_metrics.h"
#include "native_api.h"

namespace ratelimit::server {

class LeaseHandler final : public Handler {
 public:
  LeaseHandler(NativeApi api, LeaseMetrics& metrics) : api_(api), metrics_(metrics) {}
  bool handle(Exchange& x) override;
  void complete(Exchange& x) override;
  void cancel(Exchange& x) override;

 private:
  NativeApi api_;
  LeaseMetrics& metrics_;
};

}  // namespace ratelimit::server
