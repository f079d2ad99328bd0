// resp_api.cc — the commands of resp_listen (see resp_api.h).
//
// One way to the store, as the native API: a command becomes service Items and goes through
// DecisionService::decide, answered inline (memory store) or later (a networked store: the call
// is resumed and complete() writes the reply on the connection's thread). Both end in the same
// reply function.
#include "resp_api.h"

#include <charconv>
#include <optional>
#include <vector>

#include "native_api.h"  // token_matches
#include "resp_words.h"
#include "ratelimit/version.h"

namespace ratelimit::server {
namespace {

// What the commands keep with a connection: the decision in flight, the configuration it was
// decided against, and the policy CL.THROTTLE built from its arguments (read by the store until
// the decision completes).
class RespState final : public RespCallState, public service::Pending {
 public:
  explicit RespState(RespCall& call) : bridge(call), call_(call) {}
  void resume() override { call_.resume(); }

  ConfigCell::Cache cache;
  std::optional<Policy> policy;
  std::vector<service::Item> items;
  RespBridge bridge;    // ratelimitd's own commands: the HTTP handler's exchange (resp_native.h)
  bool native = false;  // the command in flight is one of those

 private:
  RespCall& call_;
};

// Redis's words for a command it does not know.
void unknown_command(RespCall& call) {
  std::string m = "ERR unknown command '" + std::string(call.args[0].substr(0, 128)) + "', with args beginning with: ";
  size_t room = 128;
  for (size_t i = 1; i < call.args.size() && room > 0; ++i) {
    const std::string_view a = call.args[i].substr(0, room);
    m += "'" + std::string(a) + "' ";
    room -= a.size();
  }
  resp_refuse(call, m);
}

// redis-cell's seconds: whole seconds, plus one when a millisecond is left over.
int64_t cell_seconds(Micros d) {
  const int64_t us = d.count();
  return us / 1'000'000 + ((us % 1'000'000) / 1'000 > 0 ? 1 : 0);
}

void reply_throttle(const RespState& st, RespCall& call) {
  if (!st.status.is_ok()) {
    const bool bad = st.status.code() == StatusCode::kInvalidArgument;
    resp_refuse(call, bad ? "ERR " + st.status.message() : "ERR store_error " + std::string(status_code_name(st.status.code())),
           bad ? 400 : 503);
    return;
  }
  const Decision& d = st.decisions.front();
  if (d.reason == DecisionReason::kPolicyConflict) {  // the key holds another definition's state
    resp_refuse(call, "ERR policy_conflict the key holds live state of another definition of this policy name; "
                      "retry in " + std::to_string(cell_seconds(d.retry_after)) + " s",
                409);
    return;
  }
  RespReply r = call.reply();
  r.array(5);
  r.integer(d.allowed ? 0 : 1);
  r.integer(d.limit);
  r.integer(d.remaining);
  // -1 when admitted, and when no wait can ever admit the quantity (redis-cell's conventions).
  r.integer(!d.allowed && d.reason != DecisionReason::kExceedsCapacity ? cell_seconds(d.retry_after) : -1);
  r.integer(cell_seconds(d.reset_after));
  call.status = d.allowed ? 200 : 429;
}

// PING [message]
void ping(RespCall& call) {
  if (call.args.size() > 2) return resp_wrong_arity(call);
  if (call.args.size() == 2) {
    call.reply().bulk(call.args[1]);
  } else {
    call.reply().simple("PONG");
  }
}

// AUTH [username] password, and HELLO's AUTH: the admin token (admin commands too) or the
// password. Only Redis's "default" user exists.
void authenticate(RespCall& call, const Config& cfg, std::string_view user, std::string_view password, bool reply_ok) {
  if (!cfg.resp_password && !cfg.admin_token) {
    return resp_refuse(call, "ERR AUTH <password> called without any password configured for the default user. "
                        "Are you sure your configuration is correct?");
  }
  const bool admin = cfg.admin_token && token_matches(password, *cfg.admin_token);
  const bool user_ok = resp_iequals(user, "default");
  if (!user_ok || (!admin && !(cfg.resp_password && token_matches(password, *cfg.resp_password)))) {
    return resp_refuse(call, "WRONGPASS invalid username-password pair or user is disabled.", 401);
  }
  call.session.authenticated = true;
  call.session.admin = admin;
  if (reply_ok) call.reply().simple("OK");
}

// HELLO [protover [AUTH username password] [SETNAME name]]: the protocol, and who we are.
void hello(RespCall& call, const Config& cfg) {
  const auto args = call.args;
  int protocol = call.session.protocol;
  if (args.size() >= 2) {
    const std::optional<int64_t> v = resp_integer(args[1]);
    if (!v) return resp_refuse(call, "ERR Protocol version is not an integer or out of range");
    if (*v != 2 && *v != 3) return resp_refuse(call, "NOPROTO unsupported protocol version");
    protocol = static_cast<int>(*v);
  }
  for (size_t i = 2; i < args.size(); ++i) {
    if (resp_iequals(args[i], "auth") && i + 2 < args.size()) {
      authenticate(call, cfg, args[i + 1], args[i + 2], false);
      if (call.status != 200) return;
      i += 2;
    } else if (resp_iequals(args[i], "setname") && i + 1 < args.size()) {
      ++i;  // accepted and not kept: nothing here names clients
    } else {
      return resp_refuse(call, "ERR Syntax error in HELLO option '" + std::string(args[i]) + "'");
    }
  }
  if (cfg.resp_password && !call.session.authenticated) {
    return resp_refuse(call, "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO "
                        "<proto> AUTH <user> <pass> option can be used to authenticate the client and select the "
                        "RESP protocol version at the same time", 401);
  }
  call.session.protocol = protocol;
  RespReply r = call.reply();
  r.map(7);
  r.bulk("server"), r.bulk("ratelimitd");
  r.bulk("version"), r.bulk(RATELIMIT_VERSION);
  r.bulk("proto"), r.integer(protocol);
  r.bulk("id"), r.integer(0);
  r.bulk("mode"), r.bulk("standalone");
  r.bulk("role"), r.bulk("master");
  r.bulk("modules"), r.array(0);
}

// The connection commands; false when `call` names none of them.
bool connection_command(RespCall& call) {
  const std::string_view name = call.args[0];
  const size_t n = call.args.size();
  if (resp_iequals(name, "ping")) {
    ping(call);
  } else if (resp_iequals(name, "echo")) {
    if (n != 2) return resp_wrong_arity(call), true;
    call.reply().bulk(call.args[1]);
  } else if (resp_iequals(name, "info")) {  // ioredis's ready check reads loading:0 from it
    call.reply().bulk("# Server\r\nratelimitd_version:" RATELIMIT_VERSION "\r\nredis_mode:standalone\r\n"
                      "# Persistence\r\nloading:0\r\n# Replication\r\nrole:master\r\n");
  } else if (resp_iequals(name, "select")) {  // one database: 0
    if (n != 2) return resp_wrong_arity(call), true;
    if (call.args[1] != "0") return resp_refuse(call, "ERR DB index is out of range"), true;
    call.reply().simple("OK");
  } else if (resp_iequals(name, "client")) {  // what client libraries send on connect
    if (n < 2 || !(resp_iequals(call.args[1], "setname") || resp_iequals(call.args[1], "setinfo"))) {
      return resp_refuse(call, "ERR unknown subcommand or wrong number of arguments for 'client'; SETNAME and SETINFO "
                          "are accepted"), true;
    }
    call.reply().simple("OK");
  } else {
    return false;
  }
  return true;
}

// CL.THROTTLE key max_burst count period [quantity]: a token bucket of max_burst + 1 refilled
// at count/period per second (see resp_api.h), decided under `rule`'s name and counters.
bool throttle(service::DecisionService& decisions, const service::Rule& rule, RespCall& call, RespState& st,
              const Published& snap) {
  const Config& cfg = *snap.config;
  const size_t n = call.args.size();
  call.endpoint = Endpoint::kRespThrottle;
  if (n != 5 && n != 6) return resp_wrong_arity(call), true;
  const std::string_view key = call.args[1];
  static constexpr const char* kNames[] = {"max_burst", "count", "period", "quantity"};
  int64_t v[4] = {0, 0, 0, 1};
  for (size_t i = 2; i < n; ++i) {
    const std::optional<int64_t> x = resp_integer(call.args[i]);
    if (!x) return resp_refuse(call, std::string("ERR ") + kNames[i - 2] + " is not an integer: '" + std::string(call.args[i]) + "'"), true;
    v[i - 2] = *x;
  }
  const auto [max_burst, count, period, quantity] = v;
  if (key.empty() || key.size() > cfg.limits.max_key_length) {
    return resp_refuse(call, "ERR key must be 1 to " + std::to_string(cfg.limits.max_key_length) + " bytes (limits.max_key_length)"), true;
  }
  if (max_burst < 0) return resp_refuse(call, "ERR max_burst must be 0 or more"), true;
  if (count <= 0 || period <= 0) return resp_refuse(call, "ERR count and period must be positive (zero rates are not supported)"), true;
  if (quantity < 0 || quantity > cfg.limits.max_cost) {
    return resp_refuse(call, "ERR quantity must be 0 to " + std::to_string(cfg.limits.max_cost) + " (limits.max_cost)"), true;
  }
  auto policy = Policy::token_bucket(static_cast<double>(count) / static_cast<double>(period),
                                     max_burst < kMaxLimit ? max_burst + 1 : kMaxLimit + 1);
  if (policy) policy = policy->with_name(std::string(kThrottlePolicyName));
  if (!policy) return resp_refuse(call, "ERR " + policy.status().message()), true;
  st.policy = std::move(*policy);
  // Quantity 0 is redis-cell's peek: the key's state as it is, nothing recorded (state_peek.h).
  const auto kind = quantity == 0 ? StoreOp::Kind::kPeek : StoreOp::Kind::kAcquire;
  st.items.assign(1, service::Item{&rule, key, quantity, kind, &*st.policy});
  if (!decisions.decide(*snap.rules, st.items, Atomicity::kIndependent, st)) return false;
  reply_throttle(st, call);
  return true;
}

}  // namespace

RespCommands::RespCommands(NativeApi api, LeaseMetrics& lease_metrics, service::RuleCounters* throttle_counters)
    : decisions_(api.decisions),
      config_(api.config),
      native_(api, lease_metrics),
      throttle_{Policy::token_bucket(1, 1).value().with_name(std::string(kThrottlePolicyName)).value(), false,
                throttle_counters} {}

bool RespCommands::handle(RespCall& call) {
  RespState& st = call.state<RespState>();
  const Published& snap = config_.get(st.cache);
  const Config& cfg = *snap.config;
  const std::string_view name = call.args[0];
  const size_t n = call.args.size();
  call.endpoint = Endpoint::kResp;
  // Before a password: only what authenticates, and QUIT.
  if (resp_iequals(name, "quit")) {
    call.reply().simple("OK");
    call.close_after = true;
    return true;
  }
  if (resp_iequals(name, "auth")) {
    if (n != 2 && n != 3) return resp_wrong_arity(call), true;
    authenticate(call, cfg, n == 3 ? call.args[1] : "default", call.args[n - 1], true);
    return true;
  }
  if (resp_iequals(name, "hello")) return hello(call, cfg), true;
  if (cfg.resp_password && !call.session.authenticated) {
    return resp_refuse(call, "NOAUTH Authentication required.", 401), true;
  }
  if (connection_command(call)) return true;
  st.native = false;
  if (resp_iequals(name, "cl.throttle")) return throttle(decisions_, throttle_, call, st, snap);
  const std::optional<bool> native = native_.handle(call, st.bridge, cfg);
  if (!native) return unknown_command(call), true;
  st.native = !*native;
  return *native;
}

void RespCommands::cancel(RespCall& call) {
  RespState& st = call.state<RespState>();
  if (st.native) native_.cancel(st.bridge);  // CL.THROTTLE never waits: its store call just ends
}

void RespCommands::complete(RespCall& call) {
  RespState& st = call.state<RespState>();
  if (st.native) return native_.complete(call, st.bridge);
  reply_throttle(st, call);
}

}  // namespace ratelimit::server
