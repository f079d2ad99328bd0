// resp_native.cc — ratelimitd's own API over the Redis protocol (see resp_native.h), and the
// argument helpers every RESP command shares (resp_words.h).
#include "resp_native.h"

#include <charconv>
#include <vector>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "resp_words.h"

namespace ratelimit::server {

bool resp_iequals(std::string_view a, std::string_view lower) {
  if (a.size() != lower.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

std::optional<int64_t> resp_integer(std::string_view s) {
  int64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

void resp_refuse(RespCall& call, std::string_view message, unsigned status) {
  call.reply().error(message);
  call.status = status;
}

void resp_wrong_arity(RespCall& call) {
  std::string name(call.args[0]);
  for (char& c : name) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  resp_refuse(call, "ERR wrong number of arguments for '" + name + "' command");
}

namespace {

enum class Command : uint8_t { kAcquire, kPeek, kReport, kReset, kLease, kRenew, kRelease };

std::optional<Command> command_of(std::string_view name) {
  if (resp_iequals(name, "rl.acquire")) return Command::kAcquire;
  if (resp_iequals(name, "rl.peek")) return Command::kPeek;
  if (resp_iequals(name, "rl.report")) return Command::kReport;
  if (resp_iequals(name, "rl.reset")) return Command::kReset;
  if (resp_iequals(name, "rl.lease.acquire")) return Command::kLease;
  if (resp_iequals(name, "rl.lease.renew")) return Command::kRenew;
  if (resp_iequals(name, "rl.lease.release")) return Command::kRelease;
  return std::nullopt;
}

// The options a command takes after its policies, and their JSON members.
struct Option {
  std::string_view word, member;
};
constexpr Option kCost{"cost", "cost"}, kLimit{"limit", "limit"}, kMaxWait{"max_wait", "max_wait_ms"};

// `key policy [policy ...] [OPTION n ...]` as the JSON body of /v1/acquire, /v1/peek,
// /v1/report or /v1/leases (`options`: the ones this command takes). False: refused, the error replied.
bool decision_body(RespCall& call, std::initializer_list<Option> options, std::string& body) {
  const auto a = call.args;
  if (a.size() < 3) return resp_wrong_arity(call), false;
  auto option = [&](std::string_view word) -> const Option* {
    for (const Option& o : options) {
      if (resp_iequals(word, o.word)) return &o;
    }
    return nullptr;
  };
  size_t i = 2;
  std::vector<std::string_view> policies;
  for (; i < a.size() && option(a[i]) == nullptr; ++i) policies.push_back(a[i]);
  if (policies.empty()) return resp_refuse(call, "ERR name at least one policy after the key"), false;
  std::string members;
  for (; i < a.size(); i += 2) {
    const Option* o = option(a[i]);
    if (o == nullptr) return resp_refuse(call, "ERR syntax error: a policy after an option, or an unknown option '" + std::string(a[i]) + "'"), false;
    if (i + 1 == a.size()) return resp_refuse(call, "ERR syntax error: " + std::string(a[i]) + " needs a value"), false;
    const std::optional<int64_t> v = resp_integer(a[i + 1]);
    if (!v) return resp_refuse(call, "ERR " + std::string(o->word) + " is not an integer: '" + std::string(a[i + 1]) + "'"), false;
    members += ",\"" + std::string(o->member) + "\":" + std::to_string(*v);
  }
  body = "{\"key\":";
  http::append_json_string(body, a[1]);
  if (policies.size() == 1) {
    body += ",\"policy\":";
    http::append_json_string(body, policies.front());
  } else {
    body += ",\"policies\":[";
    for (size_t k = 0; k < policies.size(); ++k) {
      if (k > 0) body += ',';
      http::append_json_string(body, policies[k]);
    }
    body += ']';
  }
  body += members;
  body += '}';
  return true;
}

// A lease token's characters only (lease_token.h: hex, '.', base64url), so it stays one path segment.
bool lease_id_chars(std::string_view id) {
  for (char c : id) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
                    c == '-' || c == '_';
    if (!ok) return false;
  }
  return !id.empty();
}

void write_json(const boost::json::value& v, RespReply& r) {
  switch (v.kind()) {
    case boost::json::kind::bool_: r.boolean(v.get_bool()); break;
    case boost::json::kind::int64: r.integer(v.get_int64()); break;
    case boost::json::kind::uint64: r.integer(static_cast<int64_t>(v.get_uint64())); break;
    case boost::json::kind::double_: r.bulk(std::to_string(v.get_double())); break;
    case boost::json::kind::string: r.bulk(v.get_string()); break;
    case boost::json::kind::null: r.null(); break;
    case boost::json::kind::array:
      r.array(v.get_array().size());
      for (const auto& e : v.get_array()) write_json(e, r);
      break;
    case boost::json::kind::object:
      r.map(v.get_object().size());
      for (const auto& [name, e] : v.get_object()) {
        r.bulk(name);
        write_json(e, r);
      }
      break;
  }
}

// The HTTP answer as the command's reply: its body's fields, or an error reply (see top).
void reply(RespCall& call, const RespBridge& b) {
  const http::Response& res = b.response;
  call.status = res.status;
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(res.body, ec);
  if (ec || !v.is_object()) return resp_refuse(call, "ERR the answer was not a JSON object (status " + std::to_string(res.status) + ")", 500);
  const boost::json::object& o = v.get_object();
  if (const boost::json::value* e = o.if_contains("error")) {
    const boost::json::value* m = o.if_contains("message");
    std::string text = res.status == 401 || res.status == 403 ? "NOPERM " : "ERR ";
    text += e->is_string() ? std::string(e->get_string()) : "error";
    if (m != nullptr && m->is_string()) text += ": " + std::string(m->get_string());
    return resp_refuse(call, text, res.status);
  }
  RespReply r = call.reply();
  write_json(v, r);
}

}  // namespace

std::optional<bool> RespNative::handle(RespCall& call, RespBridge& b, const Config& cfg) {
  const std::optional<Command> command = command_of(call.args[0]);
  if (!command) return std::nullopt;
  const size_t n = call.args.size();
  b.headers.clear();
  b.body.clear();
  Method method = Method::kPost;
  switch (*command) {
    case Command::kAcquire:
      call.endpoint = Endpoint::kRespAcquire;
      if (!decision_body(call, {kCost, kLimit, kMaxWait}, b.body)) return true;
      b.target = "/v1/acquire", b.handler = &acquire_;
      break;
    case Command::kPeek:
      call.endpoint = Endpoint::kRespPeek;
      if (!decision_body(call, {kCost, kLimit}, b.body)) return true;
      b.target = "/v1/peek", b.handler = &peek_;
      break;
    case Command::kReport:  // usage known after the fact: COST is required (negative: refund)
      call.endpoint = Endpoint::kRespReport;
      if (!decision_body(call, {kCost, kLimit}, b.body)) return true;
      b.target = "/v1/report", b.handler = &report_;
      break;
    case Command::kReset:
      call.endpoint = Endpoint::kRespReset;
      if (n != 3) return resp_wrong_arity(call), true;
      b.body = "{\"key\":";
      http::append_json_string(b.body, call.args[1]);
      b.body += ",\"policy\":";
      http::append_json_string(b.body, call.args[2]);
      b.body += '}';
      b.target = "/v1/reset", b.handler = &reset_;
      break;
    case Command::kLease:
      call.endpoint = Endpoint::kRespLeases;
      if (!decision_body(call, {kCost}, b.body)) return true;
      b.target = "/v1/leases", b.handler = &leases_;
      break;
    case Command::kRenew:
    case Command::kRelease:
      call.endpoint = Endpoint::kRespLeases;
      if (n != 2) return resp_wrong_arity(call), true;
      if (!lease_id_chars(call.args[1])) {
        return resp_refuse(call, "ERR invalid_lease_id: not a lease id this service issued (the lease_id of RL.LEASE.ACQUIRE)"), true;
      }
      b.target = "/v1/leases/" + std::string(call.args[1]);
      if (*command == Command::kRenew) b.target += "/renew";
      method = *command == Command::kRenew ? Method::kPost : Method::kDelete;
      b.handler = &leases_;
      break;
  }
  // A connection that gave the admin token (AUTH) carries it as an HTTP caller would.
  if (call.session.admin && cfg.admin_token) b.headers.add("authorization", "Bearer " + *cfg.admin_token);
  Request& r = b.request;
  r.method = method;
  r.protocol = Protocol::kHttp1;
  r.target = b.target;
  r.body = b.body;
  r.headers = &b.headers;
  r.peer = call.peer;
  r.listener = call.listener;
  b.response.clear();
  if (!b.handler->handle(b)) return false;
  reply(call, b);
  return true;
}

void RespNative::complete(RespCall& call, RespBridge& b) {
  b.handler->complete(b);
  reply(call, b);
}

}  // namespace ratelimit::server
