// script_invoker.cc — EVALSHA with the NOSCRIPT reload (see script_invoker.h).
#include "script_invoker.h"

#include <hiredis/hiredis.h>

#include "hash_slot.h"
#include "lua_scripts.h"

namespace ratelimit::redis_detail {
namespace {

// RESP of SCRIPT LOAD <text>, per script; built once.
const std::vector<std::string>& script_loads() {
  static const std::vector<std::string> loads = [] {
    std::vector<std::string> out;
    for (const auto& script : kLuaScripts) {
      std::string argv[] = {"SCRIPT", "LOAD", std::string(script.text)};
      out.push_back(encode_command(argv));
    }
    return out;
  }();
  return loads;
}

}  // namespace

struct ScriptInvoker::Call {
  ScriptInvoker* invoker;
  std::string command;  // EVALSHA ...
  ScriptId script;
  int slot;
  int noscript_retries = 0;
  ReplyCallback done;
};

std::vector<HandshakeStep> ScriptInvoker::load_steps() {
  std::vector<HandshakeStep> steps;
  for (size_t i = 0; i < kScriptCount; ++i) {
    steps.push_back({script_loads()[i], [i](const redisReply* reply) -> Status {
                       if (reply != nullptr && reply->type == REDIS_REPLY_STRING &&
                           reply_text(reply) == kLuaScripts[i].sha1) {
                         return {};
                       }
                       if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
                         return Status::unavailable("Redis refused SCRIPT LOAD: " +
                                                    reply_text(reply));
                       }
                       return Status::internal(std::string("SCRIPT LOAD of ") +
                                               kLuaScripts[i].name +
                                               " answered an unexpected SHA1: " +
                                               reply_text(reply));
                     }});
  }
  return steps;
}

void ScriptInvoker::invoke(const ScriptCall& call, ReplyCallback done) {
  auto c = std::make_shared<Call>();
  c->invoker = this;
  c->command = encode_evalsha(call);
  c->script = call.script;
  c->slot = router_.routes_by_slot() ? key_hash_slot(call.keys.front()) : kAnySlot;
  c->done = std::move(done);
  send(c, {});
}

void ScriptInvoker::send(const std::shared_ptr<Call>& call, std::string_view prelude) {
  std::shared_ptr<const std::string> command(call, &call->command);
  router_.send(
      call->slot, std::move(command),
      [call](const Status& error, const redisReply* reply) {
        if (error.is_ok() && call->noscript_retries < kMaxNoscriptRetries && is_noscript(reply)) {
          ++call->noscript_retries;
          call->invoker->script_reloads_.fetch_add(1, std::memory_order_relaxed);
          call->invoker->send(call, script_loads()[call->script]);
          return;
        }
        call->done(error, reply);
      },
      prelude);
}

}  // namespace ratelimit::redis_detail
