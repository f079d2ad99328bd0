// request.cc — JSON bodies and forward-auth queries -> DecisionRequest (see request.h).
//
// Boost.JSON parses into a monotonic arena on the stack, so a typical body costs no heap
// allocation; depth is capped and invalid UTF-8 is refused by the parser itself.
#include "request.h"

#include <cmath>

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "json_kind.h"

namespace ratelimit::server {
namespace {

namespace json = boost::json;

bool fail(RequestError& err, std::string_view code, std::string message) {
  err.status = 400;
  err.error = code;
  err.message = std::move(message);
  return false;
}

// Policy names: the shape validate_policy_name accepts. Checked here so an error message can
// quote the name safely (it is printable ASCII).
bool check_policy_name(std::string_view name, RequestError& err) {
  if (validate_policy_name(name).is_ok()) return true;
  if (name.size() > kMaxPolicyNameLength || name.empty()) {
    return fail(err, "unknown_policy", "policy names are 1 to 64 characters of [A-Za-z0-9_.:-]");
  }
  return fail(err, "unknown_policy", "policy names are made of [A-Za-z0-9_.:-]");
}

// A JSON object parsed into `mr` (depth at most `depth`), or false with `err` filled.
bool parse_object(std::string_view body, json::monotonic_resource& mr, int depth, json::value& v, RequestError& err) {
  json::parse_options opts;
  opts.max_depth = depth;
  boost::system::error_code ec;
  v = json::parse(body, ec, &mr, opts);
  if (ec) {
    if (body.empty()) return fail(err, "invalid_json", "the request body is empty; expected a JSON object");
    return fail(err, "invalid_json", "the body is not valid JSON: " + ec.message());
  }
  if (!v.is_object()) {
    return fail(err, "invalid_request", "the body must be a JSON object, got " + std::string(json_kind_name(v.kind())));
  }
  return true;
}

}  // namespace

bool check_key(std::string_view key, const RequestBounds& bounds, RequestError& err) {
  if (key.empty()) return fail(err, "invalid_key", "key must not be empty");
  if (key.size() > bounds.max_key_length) {
    return fail(err, "invalid_key", "key is " + std::to_string(key.size()) +
                                        " bytes; the limit is " +
                                        std::to_string(bounds.max_key_length));
  }
  return true;
}

bool parse_request_body(std::string_view body, BodyKind kind, const RequestBounds& bounds,
                        DecisionRequest& out, RequestError& err) {
  out.policy_count = 0;
  out.multi = false;
  out.cost = 1;
  out.limit = 0;
  out.max_wait_ms = -1;
  out.priority.clear();
  out.key.clear();

  // The common body, {"key": "...", "policy": "..."} with plain strings, means the same to
  // Boost.JSON; it is read directly and checked as below (same checks, same order).
  std::string_view plain_key, plain_policy;
  if (kind != BodyKind::kReport && plain_key_policy(body, plain_key, plain_policy)) {
    if (!check_key(plain_key, bounds, err) || !check_policy_name(plain_policy, err)) return false;
    out.policies[0].assign(plain_policy);
    out.policy_count = 1;
    out.key.assign(plain_key);
    return true;
  }

  alignas(std::max_align_t) unsigned char arena[2048];
  json::monotonic_resource mr(arena, sizeof arena);
  json::value v(&mr);  // the arena's: parse_object moves into it without a copy
  if (!parse_object(body, mr, 4, v, err)) return false;
  const json::object& obj = v.get_object();
  const json::value* key = nullptr;
  const json::value* policy = nullptr;
  const json::value* policies = nullptr;
  const json::value* cost = nullptr;
  const json::value* limit = nullptr;
  const json::value* max_wait = nullptr;
  const json::value* priority = nullptr;
  for (const auto& kv : obj) {
    const std::string_view k = kv.key();
    const json::value** slot = nullptr;
    if (k == "key") slot = &key;
    else if (k == "policy") slot = &policy;
    else if (k == "policies" && kind != BodyKind::kReset) slot = &policies;
    else if (k == "cost" && kind != BodyKind::kReset) slot = &cost;
    else if (k == "limit" && kind != BodyKind::kReset) slot = &limit;
    else if (k == "max_wait_ms" && kind == BodyKind::kDecision) slot = &max_wait;
    else if (k == "priority" && kind == BodyKind::kDecision) slot = &priority;
    if (slot == nullptr) {
      std::string m = "unknown field ";
      m += k.size() <= 64 ? "'" + std::string(k) + "'" : std::string("(a long name)");
      m += kind == BodyKind::kDecision ? " (allowed: key, policy or policies, cost, limit, max_wait_ms, priority)"
           : kind == BodyKind::kReport ? " (allowed: key, policy or policies, cost, limit)"
                                       : " (allowed: key, policy)";
      return fail(err, "invalid_request", std::move(m));
    }
    // Boost.JSON has already folded duplicate names (the last value wins), so each name is
    // seen once here.
    *slot = &kv.value();
  }

  if (key == nullptr) return fail(err, "invalid_request", "missing field 'key'");
  if (!key->is_string()) {
    return fail(err, "invalid_request", "'key' must be a string, got " + std::string(json_kind_name(key->kind())));
  }
  const json::string& ks = key->get_string();
  if (!check_key(std::string_view(ks.data(), ks.size()), bounds, err)) return false;

  if (policy != nullptr && policies != nullptr) {
    return fail(err, "invalid_request", "give either 'policy' or 'policies', not both");
  }
  if (policy == nullptr && policies == nullptr) {
    return fail(err, "invalid_request", kind != BodyKind::kReset ? "missing field 'policy' (or 'policies')" : "missing field 'policy'");
  }
  if (policy != nullptr) {
    if (!policy->is_string()) {
      return fail(err, "invalid_request", "'policy' must be a string, got " + std::string(json_kind_name(policy->kind())));
    }
    const json::string& ps = policy->get_string();
    if (!check_policy_name(std::string_view(ps.data(), ps.size()), err)) return false;
    out.policies[0].assign(ps.data(), ps.size());
    out.policy_count = 1;
  } else {
    if (!policies->is_array()) {
      return fail(err, "invalid_request", "'policies' must be an array of policy names, got " + std::string(json_kind_name(policies->kind())));
    }
    const json::array& arr = policies->get_array();
    if (arr.empty() || arr.size() > kMaxPoliciesPerCall) {
      return fail(err, "invalid_request", "'policies' must name 1 to " + std::to_string(kMaxPoliciesPerCall) + " policies");
    }
    for (const json::value& e : arr) {
      if (!e.is_string()) {
        return fail(err, "invalid_request", "'policies' must hold strings, got " + std::string(json_kind_name(e.kind())));
      }
      const std::string_view name(e.get_string().data(), e.get_string().size());
      if (!check_policy_name(name, err)) return false;
      for (size_t i = 0; i < out.policy_count; ++i) {
        if (out.policies[i] == name) {
          return fail(err, "invalid_request", "policy '" + std::string(name) + "' is listed twice in 'policies'");
        }
      }
      out.policies[out.policy_count++].assign(name);
    }
    out.multi = true;
  }

  if (cost != nullptr) {
    int64_t c = 0;
    if (cost->is_int64()) {
      c = cost->get_int64();
    } else if (cost->is_uint64() ||
               (cost->is_double() && std::fabs(cost->get_double()) >= 9.2e18)) {
      c = INT64_MAX;  // above any bound (Boost.JSON reads integers beyond 2^64 as doubles)
    } else {
      return fail(err, "invalid_cost", "'cost' must be a whole number, got " + std::string(json_kind_name(cost->kind())) +
                                           (cost->is_double() ? " with a fraction or exponent" : ""));
    }
    if (kind == BodyKind::kReport) {
      // Usage after the fact, or units given back (a refund): never more than a cost may be.
      if (c < -bounds.max_cost || c > bounds.max_cost) {
        return fail(err, "invalid_cost", "'cost' of a report must be between -" + std::to_string(bounds.max_cost) +
                                             " and " + std::to_string(bounds.max_cost));
      }
    } else if (c < 1 || c > bounds.max_cost) {
      return fail(err, "invalid_cost", "'cost' must be between 1 and " + std::to_string(bounds.max_cost));
    }
    out.cost = c;
  } else if (kind == BodyKind::kReport) {
    return fail(err, "invalid_request", "missing field 'cost' (a report says how many units were used, or given back when negative)");
  }
  if (limit != nullptr) {
    // The caller's own limit for its one policy; the policy's request_limit bounds it (the
    // caller checks those: they are configuration, not request syntax).
    if (policies != nullptr) {
      return fail(err, "invalid_request", "'limit' applies to one 'policy', not to 'policies'");
    }
    if (!limit->is_int64() || limit->get_int64() < 1 || limit->get_int64() > kMaxLimit) {
      return fail(err, "invalid_limit", "'limit' must be a whole number between 1 and " + std::to_string(kMaxLimit));
    }
    out.limit = limit->get_int64();
  }
  if (max_wait != nullptr) {
    if (!max_wait->is_int64() || max_wait->get_int64() < 0 || max_wait->get_int64() > kMaxWaitMs) {
      return fail(err, "invalid_max_wait", "'max_wait_ms' must be a whole number of milliseconds between 0 and " +
                                               std::to_string(kMaxWaitMs));
    }
    out.max_wait_ms = max_wait->get_int64();
  }
  if (priority != nullptr) {
    if (!priority->is_string() || priority->get_string().empty() || priority->get_string().size() > 32) {
      return fail(err, "invalid_priority", "'priority' must be a class name of 1 to 32 characters (a string)");
    }
    out.priority.assign(priority->get_string().data(), priority->get_string().size());
  }
  out.key.assign(ks.data(), ks.size());
  return true;
}

bool parse_release_body(std::string_view body, adaptive::ReleaseReport& out, RequestError& err) {
  out = {};
  if (body.empty()) return true;
  alignas(std::max_align_t) unsigned char arena[512];
  json::monotonic_resource mr(arena, sizeof arena);
  json::value v(&mr);  // the arena's: parse_object moves into it without a copy
  if (!parse_object(body, mr, 2, v, err)) return false;
  for (const auto& kv : v.get_object()) {
    const std::string_view k = kv.key();
    const json::value& x = kv.value();
    if (k == "outcome") {
      const std::string_view o = x.is_string() ? std::string_view(x.get_string().data(), x.get_string().size()) : "";
      if (o != "ok" && o != "dropped" && o != "timeout") {
        return fail(err, "invalid_outcome", "'outcome' must be \"ok\", \"dropped\" or \"timeout\"");
      }
      out.dropped = o != "ok";
    } else if (k == "latency_ms") {
      // Whole or fractional milliseconds, kept to the microsecond; a NaN cannot be JSON, an
      // infinity or 1e400 fails the bound.
      const double ms = x.is_int64() ? static_cast<double>(x.get_int64())
                        : x.is_uint64() ? static_cast<double>(x.get_uint64())
                        : x.is_double() ? x.get_double()
                                        : -1;
      const double us = std::round(ms * 1000);
      if (!x.is_number() || !std::isfinite(us) || us < 0 || us > static_cast<double>(adaptive::kMaxSampleUs)) {
        return fail(err, "invalid_latency", "'latency_ms' must be a number of milliseconds, 0 or more and under 3600000 (an hour)");
      }
      out.latency_us = static_cast<int64_t>(us);
    } else {
      std::string m = "unknown field ";
      m += k.size() <= 64 ? "'" + std::string(k) + "'" : std::string("(a long name)");
      return fail(err, "invalid_request", m + " (allowed: outcome, latency_ms)");
    }
  }
  return true;
}

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes (and maps '+' to ' ') into `out`; false on a malformed escape.
bool url_decode(std::string_view in, std::string& out) {
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+') {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return true;
}

}  // namespace

bool parse_forward_auth_query(std::string_view query, DecisionRequest& out, RequestError& err) {
  out.policy_count = 0;
  out.multi = false;
  out.cost = 1;
  out.deny_status = 0;
  out.max_wait_ms = -1;
  std::string name;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    const std::string_view k = part.substr(0, eq);
    const std::string_view v = eq == std::string_view::npos ? std::string_view{} : part.substr(eq + 1);
    if (k == "deny_status") {
      if (out.deny_status != 0) return fail(err, "invalid_request", "deny_status is given twice");
      if (v == "429" || v == "403" || v == "401") {
        out.deny_status = static_cast<unsigned>((v[0] - '0') * 100 + (v[1] - '0') * 10 + (v[2] - '0'));
        continue;
      }
      return fail(err, "invalid_request", "deny_status must be 429, 403 or 401");
    }
    if (k == "max_wait_ms") {
      if (out.max_wait_ms >= 0) return fail(err, "invalid_request", "max_wait_ms is given twice");
      int64_t ms = 0;
      bool ok = !v.empty() && v.size() <= 7;
      for (const char c : v) {
        ok = ok && c >= '0' && c <= '9';
        if (ok) ms = ms * 10 + (c - '0');
      }
      if (!ok || ms > kMaxWaitMs) {
        return fail(err, "invalid_max_wait", "max_wait_ms must be a whole number of milliseconds between 0 and " +
                                                 std::to_string(kMaxWaitMs));
      }
      out.max_wait_ms = ms;
      continue;
    }
    if (k != "policy") {
      return fail(err, "invalid_request", k.size() <= 64 ? "unknown query parameter '" + std::string(k) + "' (allowed: policy, deny_status, max_wait_ms)"
                                                          : std::string("unknown query parameter (allowed: policy, deny_status, max_wait_ms)"));
    }
    if (v.size() > 3 * kMaxPolicyNameLength || !url_decode(v, name)) {
      return fail(err, "unknown_policy", "malformed policy name in the query");
    }
    if (!check_policy_name(name, err)) return false;
    if (out.policy_count == kMaxPoliciesPerCall) {
      return fail(err, "invalid_request", "at most " + std::to_string(kMaxPoliciesPerCall) + " policies");
    }
    for (size_t i = 0; i < out.policy_count; ++i) {
      if (out.policies[i] == name) return fail(err, "invalid_request", "policy '" + name + "' is listed twice");
    }
    out.policies[out.policy_count++] = name;
  }
  if (out.policy_count == 0) return fail(err, "invalid_request", "missing query parameter 'policy' (e.g. ?policy=api)");
  out.multi = out.policy_count > 1;
  return true;
}

}  // namespace ratelimit::server
