// resp_native.h — ratelimitd's own API over the Redis protocol (resp_listen): the commands
//
//   RL.ACQUIRE key policy [policy ...] [COST n] [LIMIT n] [MAX_WAIT ms]   POST /v1/acquire
//   RL.PEEK    key policy [policy ...] [COST n] [LIMIT n]                 POST /v1/peek
//   RL.REPORT  key policy [policy ...] COST n [LIMIT n]                   POST /v1/report
//   RL.RESET   key policy                                  (admin)        POST /v1/reset
//   RL.LEASE.ACQUIRE key policy [COST n]                                  POST /v1/leases
//   RL.LEASE.RENEW   lease_id                                             POST /v1/leases/{id}/renew
//   RL.LEASE.RELEASE lease_id                                             DELETE /v1/leases/{id}
//
// Why through the HTTP handlers: each command is answered by the very handler of its endpoint
// (native_api.h, lease_api.h), called through a bridge Exchange with the request that endpoint
// takes — so a RESP caller and an HTTP caller get the same decision, the same bounds and the
// same refusals (several policies all or nothing, a caller's own limit, waiting, concurrency
// policies refused by acquire, the admin token for reset), and nothing is decided twice. The
// answer's JSON body becomes the reply with the same fields: a map in RESP3, a flat array of
// name, value pairs in RESP2 (true/false as 1/0); an answer whose body has "error" becomes an
// error reply "ERR <error>: <message>" ("NOPERM ..." for 401/403).
// RL.RESET needs a connection authenticated with the admin token (AUTH); it then carries that
// token to the reset handler as an HTTP caller would.
// Invariants: integer options are checked as integers before any JSON is written, and strings
// are JSON-escaped, so no argument can add a field to the request; a lease id is only the
// token's characters (hex, '.', base64url), so it cannot change the path.
// Thread-safety: RespNative is shared by every connection (the handlers are); per-command state
// lives in the call's RespBridge.
#pragma once

#include <optional>
#include <string>

#include "lease_api.h"
#include "native_api.h"
#include "resp_connection.h"

namespace ratelimit::server {

// The Exchange a RESP command calls an HTTP handler through: its request, and the handler
// whose answer is pending.
class RespBridge final : public Exchange {
 public:
  explicit RespBridge(RespCall& call) : call_(call) {}
  void resume() override { call_.resume(); }

  HeaderFields headers;
  std::string target, body;
  Handler* handler = nullptr;  // the handler that answers the command in flight

 private:
  RespCall& call_;
};

class RespNative {
 public:
  // `api` and `lease_metrics` must outlive it.
  RespNative(NativeApi api, LeaseMetrics& lease_metrics)
      : acquire_(api, DecisionVerb::kAcquire),
        peek_(api, DecisionVerb::kPeek),
        report_(api, DecisionVerb::kReport),
        reset_(api),
        leases_(api, lease_metrics) {}

  // When call.args names one of the commands above: handles it (as RespHandler::handle: true,
  // replied; false, complete() later). Nullopt when it names none of them.
  std::optional<bool> handle(RespCall& call, RespBridge& bridge, const Config& cfg);
  // Writes the reply of a command handle() left pending (after call.resume()).
  void complete(RespCall& call, RespBridge& bridge);
  // The client went away while that reply was pending: the HTTP handler's cancel (a waiter
  // leaves its queue; a lease it took meanwhile is released), as for an HTTP client gone.
  void cancel(RespBridge& bridge) {
    if (bridge.handler != nullptr) bridge.handler->cancel(bridge);
  }

 private:
  DecisionHandler acquire_, peek_, report_;
  ResetHandler reset_;
  LeaseHandler leases_;
};

}  // namespace ratelimit::server
