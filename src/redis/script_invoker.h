// script_invoker.h — how decisions reach the Lua code: FCALL of the Redis Functions library
// (Redis >= 7) or EVALSHA of the scripts, to the node the router picks for the call's slot; one
// decision per call, or several queued decisions batched into one call; and the reloads that
// make a flushed server (restart, failover, SCRIPT FLUSH, FUNCTION FLUSH) invisible.
//
// Why a piece of its own: the transport (RespConnection) should not know what a script is, and
// the router should not know which commands are scripts.
//
// Functions or scripts: every connection's handshake loads both — SCRIPT LOAD of every script,
// then (unless options.use_functions is false) FUNCTION LOAD REPLACE of kLuaLibrary. A server
// that refuses FUNCTION (Redis < 7, the command renamed or disabled, an ACL) does not fail the
// connection: it switches the invoker to EVALSHA for good. FCALL is used once a handshake loaded
// the library and none refused it.
//
// Batching (invoke_batched): decisions are queued per slot group (the whole store for a
// standalone router; one slot for a cluster, where a call's keys must share a slot). A group has
// at most `lanes` calls in flight; a decision that finds a lane free is sent at once (a lone
// request waits for nothing: there is no timer), and whatever queued while every lane was busy
// goes out as soon as a lane frees, as one call in arrival order: an even share per lane of the
// decisions the group holds (queued and in flight), at most max_batch, so that L lanes carry
// L similar batches and Redis works on one while the client turns another around.
// A batch of one is sent as that decision's own call. With max_batch = 1 there are no lanes:
// every decision is its own call, pipelined as it comes.
// Invariants:
//   - load_steps() is part of every connection's handshake, so a ready connection's node has
//     every script (and the library, unless it refused it): NOSCRIPT or "Function not found"
//     happens only after a flush;
//   - a NOSCRIPT'd call is resent at most kMaxNoscriptRetries times, each preceded by its own
//     SCRIPT LOAD on the same connection; an FCALL answered "Function not found" is resent as
//     many times, each after its own FUNCTION LOAD REPLACE (another client's FUNCTION FLUSH can
//     land between a load and its call: a large load spans several of Redis' reads), then as
//     EVALSHA (and the invoker stays on EVALSHA). Every
//     resend is counted in `script_reloads`. Both errors mean the command did not run, so a
//     resend never decides twice;
//   - `done` is called exactly once per invoke() / invoke_batched(), with the reply (an error
//     reply included) or the router's error;
//   - items of one group leave in the order they were queued; a batch never mixes slots when
//     the router routes by slot.
// Thread-safety: invoke(), invoke_batched() from any thread; the invoker must outlive every
// pending call.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "mutex.h"
#include "resp_connection.h"
#include "router.h"
#include "script_codec.h"

namespace ratelimit::redis_detail {

inline constexpr int kMaxNoscriptRetries = 3;

// A batched decision's completion: the whole call's reply (valid only during the call) and this
// decision's position in it (its six integers start at 6 * index); or an error and null.
using ItemCallback = std::function<void(const Status& error, const redisReply* reply, size_t index,
                                        size_t count)>;

// Counters of the invoker (RedisStoreCounters).
struct InvokerCounters {
  std::atomic<uint64_t> script_reloads{0}, batches{0}, batched_decisions{0};
};

// Whether the servers took the function library; shared by the handshake steps and the invoker.
struct FunctionSupport {
  // -1 unknown (no handshake done yet), 0 refused somewhere (EVALSHA for good), 1 loaded.
  std::atomic<int> state{-1};
};

class ScriptInvoker {
 public:
  struct Options {
    bool use_functions = true;  // false: EVALSHA only (FUNCTION is never sent)
    size_t max_batch = 64;      // decisions per call, 1 ... kMaxBatch (1: no batching)
    size_t lanes = 4;           // calls in flight per slot group
  };

  // The handshake: SCRIPT LOAD of every script (each reply checked against its SHA1) and, with
  // use_functions, FUNCTION LOAD REPLACE of the library (a refusal recorded in `support`).
  static std::vector<HandshakeStep> load_steps(std::shared_ptr<FunctionSupport> support,
                                               bool use_functions);

  ScriptInvoker(Router& router, Options options, std::shared_ptr<FunctionSupport> support,
                InvokerCounters& counters);

  // One call of its own (acquire_all, reset-free scripts).
  void invoke(const ScriptCall& call, ReplyCallback done);
  // One single-policy decision (a decide_call), batched with whatever else is queued.
  void invoke_batched(ScriptCall item, ItemCallback done);

  // True once FCALL is in use (the library loaded, no server refused it).
  bool uses_functions() const;

 private:
  struct Call;
  struct Item {
    ScriptCall call;
    ItemCallback done;
  };
  struct Group {
    std::deque<Item> queue;
    size_t in_flight = 0;        // calls (lanes in use)
    size_t items_in_flight = 0;  // decisions those calls carry
  };

  bool functions_now() const;
  void send(const std::shared_ptr<Call>& call, std::string_view prelude);
  void on_reply(const std::shared_ptr<Call>& call, const Status& error, const redisReply* reply);
  // Sends `batch` (non-empty, one group) as one call; when it completes, the group's lane takes
  // the next queued batch or frees.
  void send_batch(int slot, std::vector<Item> batch);
  void send_batches(int slot, std::vector<std::vector<Item>> batches);
  // A call of `items` decisions completed: its lane takes the next batch or frees.
  void lane_free(int slot, size_t items);
  // The batches to send now, one per free lane while items are queued, each an even share of
  // the group's decisions (at most max_batch); counts them in flight. Caller holds mu_.
  std::vector<std::vector<Item>> take_locked(Group& g) RL_REQUIRES(mu_);

  Router& router_;
  const Options options_;
  const std::shared_ptr<FunctionSupport> support_;
  InvokerCounters& counters_;

  Mutex mu_;
  std::unordered_map<int, Group> groups_ RL_GUARDED_BY(mu_);  // by slot (kAnySlot: standalone)
};

}  // namespace ratelimit::redis_detail
