// script_codec.cc — key names and the calls (EVALSHA / FCALL) of the Redis store (see
// script_codec.h); their replies are read in script_reply.cc. Pure functions.
#include "script_codec.h"

#include <algorithm>

#include <hiredis/hiredis.h>

#include <charconv>
#include <cstdio>
#include <initializer_list>

namespace ratelimit::redis_detail {
namespace {

std::string int_arg(int64_t v) { return std::to_string(v); }

// Shortest text that parses back to exactly `v` (Lua's tonumber uses strtod): "%.17g".
std::string double_arg(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// The algorithm id the Lua entry points take: its index (the generated `algorithms` table).
std::string algorithm_arg(Algorithm a) { return std::to_string(algorithm_index(a)); }

std::string now_arg(std::optional<int64_t> now_us) {
  return now_us ? int_arg(*now_us) : std::string("-");
}

// limit, window_us, rate, shape, counting (read_policy in common.lua: 0, 1 count denied,
// 2 every hit).
void append_policy_args(const Policy& p, std::vector<std::string>& args) {
  args.push_back(int_arg(p.limit()));
  args.push_back(int_arg(p.window().count()));
  args.push_back(double_arg(p.rate()));
  if (const auto& c = p.adaptive()) {
    // An adaptive concurrency policy's estimator in the shape field, which concurrency has no
    // other use for (adaptive.lua read_config): "a:<estimator>:<min>:<initial>:<max>:<window_us>".
    args.push_back("a:" + std::to_string(static_cast<int>(c->estimator)) + ':' + int_arg(c->min_limit) + ':' +
                   int_arg(c->initial_limit) + ':' + int_arg(c->max_limit) + ':' + int_arg(c->window_us));
  } else {
    args.push_back(p.algorithm() == Algorithm::kLeakyBucket && p.leaky_mode() == LeakyMode::kShape ? "1" : "0");
  }
  args.push_back(p.counts_every_hit() ? "2" : p.count_denied() ? "1" : "0");
}

// algo::Op as common.lua numbers it: 0 acquire, 1 peek, 2 release, 3 renew, 4 report.
std::string op_arg(algo::Op op) {
  switch (op) {
    case algo::Op::kAcquire: return "0";
    case algo::Op::kPeek: return "1";
    case algo::Op::kRelease: return "2";
    case algo::Op::kRenew: return "3";
    case algo::Op::kReport: return "4";
  }
  return "1";
}

}  // namespace

std::string escape_key(std::string_view key) {
  std::string out;
  out.reserve(key.size() + 8);
  for (char c : key) {
    switch (c) {
      case '%': out += "%25"; break;
      case '{': out += "%7B"; break;
      case '}': out += "%7D"; break;
      default: out.push_back(c); break;
    }
  }
  return out;
}

std::optional<ReleasedKey> parse_released(std::string_view prefix, std::string_view message) {
  constexpr size_t kHex = 32;
  if (message.size() < kHex + 1 || message[kHex] != ' ') return std::nullopt;
  auto lease = LeaseId::from_hex(message.substr(0, kHex));
  std::string_view k = message.substr(kHex + 1);
  if (!lease || !k.starts_with(prefix)) return std::nullopt;
  k.remove_prefix(prefix.size());
  const size_t close = k.find('}');  // an escaped key has no brace
  if (k.empty() || k[0] != '{' || close == std::string_view::npos || close + 1 >= k.size() || k[close + 1] != ':') {
    return std::nullopt;
  }
  ReleasedKey out{*lease, {}, std::string(k.substr(close + 2))};
  const std::string_view escaped = k.substr(1, close - 1);
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] != '%') {
      out.key.push_back(escaped[i]);
      continue;
    }
    const std::string_view e = escaped.substr(i, 3);
    if (e == "%25") out.key.push_back('%');
    else if (e == "%7B") out.key.push_back('{');
    else if (e == "%7D") out.key.push_back('}');
    else return std::nullopt;
    i += 2;
  }
  if (out.policy.empty()) return std::nullopt;
  return out;
}

std::string log_key(const std::string& state_key) { return state_key + "#log"; }

std::string leases_key(const std::string& state_key) { return state_key + "#leases"; }

ScriptCall decide_call(std::string_view prefix, const Policy& policy, std::string_view key,
                       int64_t cost, algo::Op op, std::optional<int64_t> now_us,
                       const LeaseId& lease, const adaptive::ReleaseReport& report) {
  ScriptCall call;
  call.script = script_of(policy.algorithm());
  call.keys.push_back(redis_state_key(prefix, key, policy.name()));
  if (policy.algorithm() == Algorithm::kSlidingWindowLog) call.keys.push_back(log_key(call.keys[0]));
  if (policy.is_concurrency()) call.keys.push_back(leases_key(call.keys[0]));
  call.args.reserve(9);
  call.args.push_back(now_arg(now_us));
  call.args.push_back(int_arg(cost));
  call.args.push_back(op_arg(op));
  append_policy_args(policy, call.args);
  if (policy.is_concurrency()) call.args.push_back(lease.to_hex());
  if (policy.adaptive() && op == algo::Op::kRelease) {
    // The release's sample (concurrency.lua run): "<id>,<dropped 0|1>,<latency_us, -1: none>".
    call.args.back() += std::string(report.dropped ? ",1," : ",0,") + int_arg(report.latency_us);
  }
  return call;
}

ScriptCall acquire_all_call(std::string_view prefix, std::span<const Policy> policies,
                            std::string_view key, int64_t cost, algo::Op op,
                            std::optional<int64_t> now_us) {
  ScriptCall call;
  call.script = kScriptAcquireAll;
  call.args.push_back(now_arg(now_us));
  call.args.push_back(int_arg(cost));
  call.args.push_back(op_arg(op));
  for (const Policy& p : policies) {
    call.keys.push_back(redis_state_key(prefix, key, p.name()));
    call.keys.push_back(log_key(call.keys.back()));
    call.args.push_back(algorithm_arg(p.algorithm()));
    append_policy_args(p, call.args);
  }
  return call;
}

ScriptCall decide_many_call(std::string_view prefix, std::span<const StoreOp> ops,
                            std::optional<int64_t> now_us) {
  ScriptCall call;
  call.script = kScriptDecideMany;
  call.keys.reserve(2 * ops.size());
  call.args.reserve(1 + 8 * ops.size());
  call.args.push_back(now_arg(now_us));
  for (const StoreOp& op : ops) {
    call.keys.push_back(redis_state_key(prefix, op.key, op.policy->name()));
    call.keys.push_back(log_key(call.keys.back()));
    call.args.push_back(algorithm_arg(op.policy->algorithm()));
    call.args.push_back(int_arg(op.cost));
    call.args.push_back(op_arg(algo::op_of(op.kind)));
    append_policy_args(*op.policy, call.args);
  }
  return call;
}

namespace {

// The distributed modes' calls on one key's state: now, the algorithm, `ints` (the call's own
// arguments), then the policy's fields — one layout for distributed.lua's readers.
ScriptCall distributed_call(ScriptId script, std::string_view prefix, const Policy& policy,
                            std::string_view key, std::optional<int64_t> now_us,
                            std::initializer_list<int64_t> ints) {
  ScriptCall call;
  call.script = script;
  call.keys.push_back(redis_state_key(prefix, key, policy.name()));
  call.args.reserve(2 + ints.size() + 5);  // + append_policy_args's five fields
  call.args.push_back(now_arg(now_us));
  call.args.push_back(algorithm_arg(policy.algorithm()));
  for (const int64_t v : ints) call.args.push_back(int_arg(v));
  append_policy_args(policy, call.args);
  return call;
}

}  // namespace

ScriptCall reserve_call(std::string_view prefix, const Policy& policy, std::string_view key,
                        int64_t give_back_window_us, int64_t give_back, int64_t want,
                        std::optional<int64_t> now_us) {
  return distributed_call(kScriptReserve, prefix, policy, key, now_us, {want, give_back_window_us, give_back});
}

ScriptCall add_hits_call(std::string_view prefix, const Policy& policy, std::string_view key,
                         int64_t window_us, int64_t hits, std::optional<int64_t> now_us) {
  return distributed_call(kScriptAddHits, prefix, policy, key, now_us, {window_us, hits});
}

std::vector<std::string> reset_keys(std::string_view prefix, const Policy& policy,
                                    std::string_view key) {
  std::string state = redis_state_key(prefix, key, policy.name());
  std::string second = policy.is_concurrency() ? leases_key(state) : log_key(state);
  return {std::move(state), std::move(second)};
}

std::string function_name(ScriptId id) {
  return std::string("rl") + kLuaLibrary.version + "_" + kLuaScripts[id].name;
}

ScriptCall batch_call(std::span<const ScriptCall* const> items) {
  // decide_call's args: now, cost, op, then the five policy fields (then a concurrency
  // policy's lease id, which is the item's, not the policy's).
  constexpr size_t kPolicyFirst = 3, kPolicyFields = 5, kPolicyEnd = kPolicyFirst + kPolicyFields;
  auto same_policy = [](const ScriptCall& a, const ScriptCall& b) {
    return a.script == b.script && std::equal(a.args.begin() + kPolicyFirst,
                                              a.args.begin() + kPolicyEnd,
                                              b.args.begin() + kPolicyFirst);
  };
  // Every distinct (algorithm, policy) once, in first-seen order; an item names its entry.
  // Arguments are what a call costs Redis most per item (each one is parsed, interned and
  // pushed into Lua: about 1,600 instructions), so a batch of one policy sends its six policy
  // arguments once instead of per item. The search is bounded: from kMaxDistinct entries on, a
  // new item's policy is appended without looking (a repeat entry is valid, only longer).
  constexpr size_t kMaxDistinct = 32;
  std::vector<const ScriptCall*> distinct;
  std::vector<size_t> entry(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    size_t e = distinct.size();
    if (distinct.size() < kMaxDistinct) {
      e = 0;
      while (e < distinct.size() && !same_policy(*distinct[e], *items[i])) ++e;
    }
    if (e == distinct.size()) distinct.push_back(items[i]);
    entry[i] = e;
  }

  // The clock: one "-" for the batch (the server's TIME) unless a test clock gave an item its
  // time; then every item carries its now.
  bool timed = false;
  for (const ScriptCall* item : items) timed = timed || item->args[0] != "-";

  ScriptCall call;
  call.script = kScriptBatch;
  size_t keys = 0;
  for (const ScriptCall* item : items) keys += item->keys.size();
  call.keys.reserve(keys);
  call.args.reserve(2 + (1 + kPolicyFields) * distinct.size() + (timed ? 2 : 1) * items.size());
  call.args.push_back(int_arg(static_cast<int64_t>(distinct.size())));
  call.args.push_back(timed ? "t" : "-");
  for (const ScriptCall* d : distinct) {
    call.args.push_back(int_arg(static_cast<int64_t>(d->script)));
    call.args.insert(call.args.end(), d->args.begin() + kPolicyFirst, d->args.begin() + kPolicyEnd);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const ScriptCall& item = *items[i];
    call.keys.insert(call.keys.end(), item.keys.begin(), item.keys.end());
    // The policy's index (Lua indices from 1); cost and op only when not an acquire of 1.
    std::string arg = int_arg(static_cast<int64_t>(entry[i] + 1));
    const bool lease = item.args.size() > kPolicyEnd;
    if (lease || item.args[1] != "1" || item.args[2] != op_arg(algo::Op::kAcquire)) {
      arg += ':' + item.args[1] + ':' + item.args[2];
    }
    if (lease) arg += ':' + item.args[kPolicyEnd];
    call.args.push_back(std::move(arg));
    if (timed) call.args.push_back(item.args[0]);
  }
  return call;
}

namespace {

std::string encode_call(const ScriptCall& call, bool function) {
  std::vector<std::string> argv;
  argv.reserve(3 + call.keys.size() + call.args.size());
  argv.emplace_back(function ? "FCALL" : "EVALSHA");
  argv.push_back(function ? function_name(call.script)
                          : std::string(kLuaScripts[call.script].sha1));
  argv.push_back(std::to_string(call.keys.size()));
  argv.insert(argv.end(), call.keys.begin(), call.keys.end());
  argv.insert(argv.end(), call.args.begin(), call.args.end());
  return encode_command(argv);
}

}  // namespace

std::string encode_evalsha(const ScriptCall& call) { return encode_call(call, false); }

std::string encode_fcall(const ScriptCall& call) { return encode_call(call, true); }

}  // namespace ratelimit::redis_detail

namespace ratelimit {

std::string redis_state_key(std::string_view prefix, std::string_view key,
                            std::string_view policy_name) {
  std::string out;
  out.reserve(prefix.size() + key.size() + policy_name.size() + 8);
  out.append(prefix);
  out.push_back('{');
  out += redis_detail::escape_key(key);
  out += "}:";
  out.append(policy_name);
  return out;
}

}  // namespace ratelimit
