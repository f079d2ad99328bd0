// script_invoker.cc — FCALL or EVALSHA, batching and the reloads (see script_invoker.h).
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

// RESP of FUNCTION LOAD REPLACE <library>; built once.
const std::string& function_load() {
  static const std::string load = [] {
    std::string argv[] = {"FUNCTION", "LOAD", "REPLACE", std::string(kLuaLibrary.text)};
    return encode_command(argv);
  }();
  return load;
}

// Runs the batches that inline completions (a router with nowhere to send) ask for as a loop on
// this thread instead of recursing through them.
struct Trampoline {
  bool active = false;
  std::vector<std::function<void()>> owed;
};
thread_local Trampoline tls_trampoline;

void run_or_defer(std::function<void()> f) {
  Trampoline& t = tls_trampoline;
  if (t.active) {
    t.owed.push_back(std::move(f));
    return;
  }
  t.active = true;
  f();
  while (!t.owed.empty()) {
    auto next = std::move(t.owed.back());
    t.owed.pop_back();
    next();
  }
  t.active = false;
}

}  // namespace

struct ScriptInvoker::Call {
  ScriptInvoker* invoker;
  ScriptCall call;
  std::string command;  // FCALL or EVALSHA of `call`
  bool fcall = false;
  int slot;
  int noscript_retries = 0;
  int function_reloads = 0;
  ReplyCallback done;

  void encode(bool use_fcall) {
    fcall = use_fcall;
    command = fcall ? encode_fcall(call) : encode_evalsha(call);
  }
};

std::vector<HandshakeStep> ScriptInvoker::load_steps(std::shared_ptr<FunctionSupport> support,
                                                     bool use_functions) {
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
  if (use_functions) {
    steps.push_back({function_load(), [support](const redisReply* reply) -> Status {
                       // Loaded: the reply is the library's name. Anything else (an unknown or
                       // renamed command, a refusal by ACL, a server too old) leaves EVALSHA.
                       if (reply != nullptr && reply->type == REDIS_REPLY_STRING &&
                           reply_text(reply) == kLuaLibrary.name) {
                         int unknown = -1;
                         support->state.compare_exchange_strong(unknown, 1);
                       } else {
                         support->state.store(0);
                       }
                       return {};
                     }});
  }
  return steps;
}

ScriptInvoker::ScriptInvoker(Router& router, Options options,
                             std::shared_ptr<FunctionSupport> support, InvokerCounters& counters)
    : router_(router), options_(options), support_(std::move(support)), counters_(counters) {}

bool ScriptInvoker::functions_now() const {
  return options_.use_functions && support_->state.load(std::memory_order_relaxed) == 1;
}

bool ScriptInvoker::uses_functions() const { return functions_now(); }

void ScriptInvoker::invoke(const ScriptCall& call, ReplyCallback done) {
  auto c = std::make_shared<Call>();
  c->invoker = this;
  c->call = call;
  c->encode(functions_now());
  c->slot = router_.routes_by_slot() ? key_hash_slot(call.keys.front()) : kAnySlot;
  c->done = std::move(done);
  send(c, {});
}

void ScriptInvoker::send(const std::shared_ptr<Call>& call, std::string_view prelude) {
  std::shared_ptr<const std::string> command(call, &call->command);
  router_.send(
      call->slot, std::move(command),
      [call](const Status& error, const redisReply* reply) {
        call->invoker->on_reply(call, error, reply);
      },
      prelude);
}

void ScriptInvoker::on_reply(const std::shared_ptr<Call>& call, const Status& error,
                             const redisReply* reply) {
  if (error.is_ok() && call->fcall && is_function_not_found(reply)) {
    counters_.script_reloads.fetch_add(1, std::memory_order_relaxed);
    if (call->function_reloads < kMaxNoscriptRetries) {
      ++call->function_reloads;
      send(call, function_load());
      return;
    }
    // Reloading did not help (this node cannot keep the library): scripts from now on.
    support_->state.store(0);
    call->encode(false);
    send(call, {});
    return;
  }
  if (error.is_ok() && !call->fcall && call->noscript_retries < kMaxNoscriptRetries &&
      is_noscript(reply)) {
    ++call->noscript_retries;
    counters_.script_reloads.fetch_add(1, std::memory_order_relaxed);
    send(call, script_loads()[call->call.script]);
    return;
  }
  call->done(error, reply);
}

void ScriptInvoker::invoke_batched(ScriptCall item, ItemCallback done) {
  if (options_.max_batch == 1) {  // no batching: plain pipelining, no lanes
    invoke(item, [done = std::move(done)](const Status& error, const redisReply* reply) {
      done(error, reply, 0, 1);
    });
    return;
  }
  const int slot = router_.routes_by_slot() ? key_hash_slot(item.keys.front()) : kAnySlot;
  std::vector<std::vector<Item>> batches;
  {
    MutexLock lock(mu_);
    Group& g = groups_[slot];
    g.queue.push_back({std::move(item), std::move(done)});
    batches = take_locked(g);  // none when every lane is busy: a lane frees soon, takes it along
  }
  send_batches(slot, std::move(batches));
}

std::vector<std::vector<ScriptInvoker::Item>> ScriptInvoker::take_locked(Group& g) {
  std::vector<std::vector<Item>> out;
  while (!g.queue.empty() && g.in_flight < options_.lanes) {
    // An even share of what the group holds (queued and in flight) per lane, not all that is
    // queued: a closed loop of N requests on L lanes otherwise settles into one batch of
    // N - L + 1 and L - 1 batches of one, and Redis and the client take turns instead of
    // working at once. What this leaves queued goes with the next lane to free.
    const size_t held = g.queue.size() + g.items_in_flight;
    const size_t share = (held + options_.lanes - 1) / options_.lanes;
    const size_t n = std::min({g.queue.size(), std::max<size_t>(share, 1), options_.max_batch});
    std::vector<Item> batch;
    batch.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      batch.push_back(std::move(g.queue.front()));
      g.queue.pop_front();
    }
    ++g.in_flight;
    g.items_in_flight += n;
    out.push_back(std::move(batch));
  }
  return out;
}

void ScriptInvoker::send_batches(int slot, std::vector<std::vector<Item>> batches) {
  for (auto& batch : batches) {
    run_or_defer([this, slot, batch = std::move(batch)]() mutable {
      send_batch(slot, std::move(batch));
    });
  }
}

void ScriptInvoker::send_batch(int slot, std::vector<Item> batch) {
  if (batch.size() == 1) {
    auto item = std::make_shared<Item>(std::move(batch.front()));
    invoke(item->call, [this, slot, item](const Status& error, const redisReply* reply) {
      item->done(error, reply, 0, 1);
      lane_free(slot, 1);
    });
    return;
  }
  std::vector<const ScriptCall*> calls;
  calls.reserve(batch.size());
  for (const Item& i : batch) calls.push_back(&i.call);
  const ScriptCall call = batch_call(calls);
  counters_.batches.fetch_add(1, std::memory_order_relaxed);
  counters_.batched_decisions.fetch_add(batch.size(), std::memory_order_relaxed);
  auto items = std::make_shared<std::vector<Item>>(std::move(batch));
  invoke(call, [this, slot, items](const Status& error, const redisReply* reply) {
    for (size_t i = 0; i < items->size(); ++i) (*items)[i].done(error, reply, i, items->size());
    lane_free(slot, items->size());
  });
}

void ScriptInvoker::lane_free(int slot, size_t items) {
  std::vector<std::vector<Item>> next;
  {
    MutexLock lock(mu_);
    auto it = groups_.find(slot);
    Group& g = it->second;
    --g.in_flight;
    g.items_in_flight -= items;
    if (g.queue.empty()) {
      if (g.in_flight == 0) groups_.erase(it);
      return;
    }
    next = take_locked(g);
  }
  send_batches(slot, std::move(next));
}

}  // namespace ratelimit::redis_detail
