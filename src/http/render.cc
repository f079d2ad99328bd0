// render.cc — Decision -> status, RateLimit headers and JSON body (see include/ratelimit/http.h
// for the rules). Pure functions: no I/O, no shared state, no HTTP library.
// Invariants: a denied answer (429) always carries Retry-After >= 1, whatever the header set;
// Retry-After == the t of the denying policy's RateLimit item with the longest wait (and the
// -Reset of the draft6 / x-ratelimit triples), so no two fields disagree about when to come
// back; every policy of the request has exactly one item in RateLimit-Policy and in RateLimit.
#include <algorithm>
#include <array>
#include <charconv>

#include "ratelimit/algorithms.h"
#include "ratelimit/http.h"

namespace ratelimit::http {
namespace {

void append_int(std::string& out, int64_t v) {
  std::array<char, 24> buf;  // written by to_chars: no need to zero it
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  (void)ec;  // 24 chars always hold an int64
  out.append(buf.data(), end);
}

std::string int_string(int64_t v) {
  std::string s;
  append_int(s, v);
  return s;
}

bool ascii_iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// Seconds a client should wait before retrying a denied request: never 0.
int64_t retry_after_seconds(const Decision& d) { return std::max<int64_t>(1, ceil_seconds(d.retry_after)); }

// t of the RateLimit field (also RateLimit-Reset).
int64_t reset_seconds(const Decision& d) {
  return d.allowed ? ceil_seconds(d.reset_after) : retry_after_seconds(d);
}

void add_policy_item(std::string& v, const PolicyInfo& p) {
  append_sf_string(v, p.name);
  v += ";q=";
  append_int(v, p.quota);
  if (!p.quota_unit.empty()) {
    v += ";qu=";
    append_sf_string(v, p.quota_unit);
    return;
  }
  v += ";w=";
  append_int(v, ceil_seconds(p.window));
}

void add_limit_item(std::string& v, std::string_view name, const LimitState& s) {
  append_sf_string(v, name);
  v += ";r=";
  append_int(v, s.remaining);
  v += ";t=";
  append_int(v, s.reset_seconds);
}

LimitState state_of(const Decision& d) { return {d.limit, d.remaining, reset_seconds(d)}; }

// An sf-list of one item per policy, in order ("a", "b" → `"a";…, "b";…`).
template <typename AddItem>
std::string sf_list(size_t n, AddItem add) {
  std::string v;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) v += ", ";
    add(v, i);
  }
  return v;
}

std::string policy_list(std::span<const PolicyInfo> policies) {
  return sf_list(policies.size(), [&](std::string& v, size_t i) { add_policy_item(v, policies[i]); });
}

// The names of the draft-06 triple per header set (kIetf and kNone have no triple).
using Triple = TripleNames;
constexpr Triple kDraft6Triple{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"};
constexpr Triple kXTriple{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"};

const Triple* triple_of(HeaderSet set) {
  switch (set) {
    case HeaderSet::kDraft6: return &kDraft6Triple;
    case HeaderSet::kXRateLimit: return &kXTriple;
    case HeaderSet::kIetf:
    case HeaderSet::kNone: return nullptr;
  }
  return nullptr;
}

void render_exceeds_capacity(std::span<const PolicyInfo> policies, const Decision& d,
                             const PolicyInfo& p, const RenderOptions& o, Response& out) {
  out.status = 400;
  // The capacity is what the client must learn: the quota fields only, no remaining or wait.
  if (o.headers == HeaderSet::kIetf) out.fields.push_back({"RateLimit-Policy", policy_list(policies)});
  if (const Triple* t = triple_of(o.headers)) out.fields.push_back({t->limit, int_string(d.limit)});
  out.fields.push_back({"Cache-Control", "no-store"});
  std::string& b = out.body;
  b = R"({"error":"cost_exceeds_capacity","message":)";
  std::string msg = "the request's cost exceeds the capacity (";
  append_int(msg, d.limit);
  msg += ") of policy '";
  msg.append(p.name);
  msg += "': it can never be admitted";
  append_json_string(b, msg);
  b += R"(,"policy":)";
  append_json_string(b, p.name);
  b += R"(,"limit":)";
  append_int(b, d.limit);
  b += '}';
}

// A key holding live state of another definition of a policy's name (kPolicyConflict, issue
// 31): 409, because the request conflicts with the key's state, not with its quota; the body
// names the policy and when the other definition's state ends (Retry-After too).
void render_policy_conflict(const Decision& d, const PolicyInfo& p, Response& out) {
  out.status = 409;
  out.fields.push_back({"Retry-After", int_string(retry_after_seconds(d))});
  out.fields.push_back({"Cache-Control", "no-store"});
  std::string& b = out.body;
  b = R"({"error":"policy_conflict","message":)";
  std::string msg = "the key holds live state of another definition of policy '";
  msg.append(p.name);
  msg += "' (another algorithm, window or counting mode): nothing was counted; give a changed "
         "definition a new name, or retry after that state ends";
  append_json_string(b, msg);
  b += R"(,"policy":)";
  append_json_string(b, p.name);
  b += R"(,"retry_after_ms":)";
  append_int(b, ceil_millis(d.retry_after));
  b += '}';
}

// The decision members of every decision body (after '{' or after a problem's members).
void append_decision_members(std::string& b, const Decision& d, const PolicyInfo& p) {
  b += d.allowed ? R"("allowed":true,"policy":)" : R"("allowed":false,"policy":)";
  append_json_string(b, p.name);
  b += R"(,"limit":)";
  append_int(b, d.limit);
  b += R"(,"remaining":)";
  append_int(b, d.remaining);
  b += R"(,"reset_ms":)";
  append_int(b, ceil_millis(d.reset_after));
  b += R"(,"retry_after_ms":)";
  append_int(b, d.allowed ? 0 : ceil_millis(d.retry_after));
  b += R"(,"delay_ms":)";
  append_int(b, ceil_millis(d.delay));
}

// RFC 9457 problem of draft-ietf-httpapi-ratelimit-headers section 5 for a 429. "status" is
// left out on purpose: ratelimitd may send the same answer as 403/401 to nginx auth_request,
// and a problem's status member must not disagree with the response's.
void append_problem(std::string& b, std::span<const Decision> decisions,
                    std::span<const PolicyInfo> policies, const Decision& reported) {
  const bool store = reported.reason == DecisionReason::kStoreFailedClosed;
  b += R"({"type":)";
  append_json_string(b, store ? kTemporaryReducedCapacityType : kQuotaExceededType);
  b += store ? R"(,"title":"Request cannot be satisfied due to temporary server capacity constraints")"
             : R"(,"title":"Request cannot be satisfied as assigned quota has been exceeded")";
  b += R"(,"violated-policies":[)";
  bool first = true;
  for (size_t i = 0; i < decisions.size(); ++i) {
    if (decisions[i].allowed) continue;
    if (!first) b += ',';
    first = false;
    append_json_string(b, policies[i].name);
  }
  b += "],";
}

void render_group(std::span<const Decision> decisions, std::span<const PolicyInfo> policies,
                  const RenderOptions& o, Response& out) {
  out.clear();
  for (size_t i = 0; i < decisions.size(); ++i) {
    if (decisions[i].reason == DecisionReason::kPolicyConflict) {
      render_policy_conflict(decisions[i], policies[i], out);
      return;
    }
  }
  const size_t k = algo::most_restrictive(decisions);
  const Decision& d = decisions[k];
  if (d.reason == DecisionReason::kExceedsCapacity) {
    render_exceeds_capacity(policies, d, policies[k], o, out);
    return;
  }
  out.status = d.allowed ? 200 : 429;
  // Into field values an earlier answer left (Response::add_field): no allocation per answer.
  if (o.headers == HeaderSet::kIetf) {
    std::string& policy = out.add_field("RateLimit-Policy");
    for (size_t i = 0; i < policies.size(); ++i) {
      if (i > 0) policy += ", ";
      add_policy_item(policy, policies[i]);
    }
    std::string& limit = out.add_field("RateLimit");  // `policy` is not used past here
    for (size_t i = 0; i < policies.size(); ++i) {
      if (i > 0) limit += ", ";
      add_limit_item(limit, policies[i].name, state_of(decisions[i]));
    }
  } else if (const Triple* t = triple_of(o.headers)) {
    const LimitState s = state_of(d);
    append_int(out.add_field(t->limit), s.limit);
    append_int(out.add_field(t->remaining), s.remaining);
    append_int(out.add_field(t->reset), s.reset_seconds);
  }
  if (!d.allowed) {
    out.fields.push_back({"Retry-After", int_string(retry_after_seconds(d))});
    out.fields.push_back({"Cache-Control", "no-store"});
  }
  std::string& b = out.body;
  if (!d.allowed && o.problem_json) {
    out.content_type = "application/problem+json";
    append_problem(b, decisions, policies, d);
  } else {
    b += '{';
  }
  append_decision_members(b, d, policies[k]);
  b += '}';
}

}  // namespace

void append_triple(std::vector<Field>& out, const TripleNames& names, const LimitState& state) {
  out.push_back({names.limit, int_string(state.limit)});
  out.push_back({names.remaining, int_string(state.remaining)});
  out.push_back({names.reset, int_string(state.reset_seconds)});
}

void append_ietf_fields(std::vector<Field>& out, const PolicyInfo& policy, const LimitState& state) {
  std::string p;
  add_policy_item(p, policy);
  std::string l;
  add_limit_item(l, policy.name, state);
  out.push_back({"RateLimit-Policy", std::move(p)});
  out.push_back({"RateLimit", std::move(l)});
}

const std::string* Response::field(std::string_view name) const {
  for (const Field& f : fields) {
    if (ascii_iequal(f.name, name)) return &f.value;
  }
  return nullptr;
}

int64_t ceil_seconds(Micros d) {
  const int64_t us = d.count();
  return us <= 0 ? 0 : (us - 1) / 1'000'000 + 1;
}

int64_t ceil_millis(Micros d) {
  const int64_t us = d.count();
  return us <= 0 ? 0 : (us - 1) / 1'000 + 1;
}

void render_decision(const Decision& decision, const PolicyInfo& policy, Response& out,
                     const RenderOptions& options) {
  render_group(std::span<const Decision>(&decision, 1), std::span<const PolicyInfo>(&policy, 1),
               options, out);
}

Response render_decision(const Decision& decision, const PolicyInfo& policy,
                         const RenderOptions& options) {
  Response r;
  render_decision(decision, policy, r, options);
  return r;
}

void render_decisions(std::span<const Decision> decisions, std::span<const PolicyInfo> policies,
                      Response& out, const RenderOptions& options) {
  render_group(decisions, policies, options, out);
}

std::string_view header_set_name(HeaderSet set) {
  switch (set) {
    case HeaderSet::kIetf: return "ietf";
    case HeaderSet::kDraft6: return "draft6";
    case HeaderSet::kXRateLimit: return "x-ratelimit";
    case HeaderSet::kNone: return "none";
  }
  return "ietf";
}

std::optional<HeaderSet> parse_header_set(std::string_view name) {
  for (HeaderSet s : {HeaderSet::kIetf, HeaderSet::kDraft6, HeaderSet::kXRateLimit, HeaderSet::kNone}) {
    if (name == header_set_name(s)) return s;
  }
  return std::nullopt;
}

void render_error(unsigned status, std::string_view error, std::string_view message,
                  Response& out) {
  out.clear();
  out.status = status;
  out.body = R"({"error":)";
  append_json_string(out.body, error);
  out.body += R"(,"message":)";
  append_json_string(out.body, message);
  out.body += '}';
}

}  // namespace ratelimit::http
