// script_invoker.h — how a decision reaches its Lua script: EVALSHA of the script's SHA1 to the
// node the router picks for the call's slot, and, when that node's script cache was flushed
// (NOSCRIPT: restart, failover, SCRIPT FLUSH — the command did not run, so sending it again is
// safe), SCRIPT LOAD and the same EVALSHA again, back to back on one connection.
//
// Why a piece of its own: the transport (RespConnection) should not know what a script is, and
// the router should not know which commands are scripts; the throughput work adds Redis
// Functions (FUNCTION LOAD on connect, FCALL) here without touching either.
// Invariants:
//   - load_steps() is part of every connection's handshake, so a ready connection's node has
//     every script: NOSCRIPT happens only after a flush, never in normal operation;
//   - a NOSCRIPT'd call is resent at most kMaxNoscriptRetries times (normally once; more only if
//     another flush lands between the reload and the resend), each time preceded by its own
//     SCRIPT LOAD on the same connection, so the resend never depends on another connection's
//     ordering; every resend is counted in `script_reloads`;
//   - `done` is called exactly once, with the script's reply (an error reply included) or the
//     router's error.
// Thread-safety: invoke() from any thread; the invoker must outlive every pending call.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "resp_connection.h"
#include "router.h"
#include "script_codec.h"

namespace ratelimit::redis_detail {

inline constexpr int kMaxNoscriptRetries = 3;

class ScriptInvoker {
 public:
  // SCRIPT LOAD of every script, each reply checked against the script's SHA1.
  static std::vector<HandshakeStep> load_steps();

  ScriptInvoker(Router& router, std::atomic<uint64_t>& script_reloads)
      : router_(router), script_reloads_(script_reloads) {}

  void invoke(const ScriptCall& call, ReplyCallback done);

 private:
  struct Call;
  void send(const std::shared_ptr<Call>& call, std::string_view prelude);

  Router& router_;
  std::atomic<uint64_t>& script_reloads_;
};

}  // namespace ratelimit::redis_detail
