// resp_api.h — the commands ratelimitd answers on resp_listen (the Redis protocol,
// docs/redis-protocol.md): the connection's own (PING, ECHO, HELLO 2|3, AUTH, QUIT, SELECT 0,
// CLIENT SETNAME|SETINFO, INFO), redis-cell's CL.THROTTLE, and ratelimitd's own API as RL.* commands
// (resp_native.h), so any Redis client in any language is a rate-limit client, and redis-cell's
// users a drop-in.
//
// CL.THROTTLE key max_burst count period [quantity] answers as redis-cell does (its README and
// src/lib.rs): five integers — limited (0/1), limit (max_burst + 1), remaining, retry_after (whole
// seconds, rounded up; -1 when admitted, and when the quantity can never fit), reset_after (whole
// seconds, rounded up). The decision is a token bucket of capacity max_burst + 1 refilled at
// count/period per second: GCRA with its exact comparisons (redis-cell admits when the
// theoretical arrival time minus the tolerance is not after now, i.e. when the bucket holds the
// whole quantity). It is decided by src/core through the decision service, on ratelimitd's store
// (memory or Redis, shared with every other caller), under the policy name "cl.throttle": keys
// are redis-cell's keys, and like redis-cell's, a key keeps its state when the arguments change.
// Quantity 0 is redis-cell's peek: a kPeek of cost 0 (common/state_peek.h), admitted, answering
// what is left now and until the key is full, recording nothing.
// Not src/core's leaky_bucket: it admits one more as soon as any of its queue drained
// (⌊level⌋ + cost <= burst), so `CL.THROTTLE race 9 1 3600` would admit 11, not redis-cell's 10.
// Invariants: bad arguments are refused before the store is touched (nothing consumed); without
// the password (resp_password) only AUTH, HELLO ... AUTH and QUIT are answered; the password and
// the admin token are compared in constant time and never written anywhere.
// Thread-safety: one RespCommands for every connection; per-command state lives in the RespCall.
#pragma once

#include <string_view>

#include "decision_service.h"
#include "published.h"
#include "resp_connection.h"
#include "resp_native.h"

namespace ratelimit::server {

// The policy name CL.THROTTLE decides under (a configured policy may not take it).
inline constexpr std::string_view kThrottlePolicyName = "cl.throttle";

class RespCommands final : public RespHandler {
 public:
  // `throttle_counters` count CL.THROTTLE's outcomes (ratelimitd_decisions_total{policy="cl.throttle"});
  // `api` and `lease_metrics` serve the RL.* commands (resp_native.h). Everything must outlive
  // the handler.
  RespCommands(NativeApi api, LeaseMetrics& lease_metrics, service::RuleCounters* throttle_counters);

  bool handle(RespCall& call) override;
  void complete(RespCall& call) override;
  void cancel(RespCall& call) override;  // a waiting RL.* command leaves its queue

 private:
  service::DecisionService& decisions_;
  const ConfigCell& config_;
  RespNative native_;       // RL.ACQUIRE, RL.PEEK, RL.RESET, RL.LEASE.*
  service::Rule throttle_;  // the counters and name every CL.THROTTLE decides under
};

}  // namespace ratelimit::server
