// render.cc — Decision -> status, RateLimit headers and JSON body (see include/ratelimit/http.h
// for the rules). Pure functions: no I/O, no shared state, no HTTP library.
// Invariants: a denied answer (429) always carries Retry-After >= 1, whatever the header set;
// Retry-After == the t of the denying policy's RateLimit item with the longest wait (and the
// -Reset of the draft6 / x-ratelimit triples), so no two fields disagree about when to come
// back; every policy of the request has exactly one item in RateLimit-Policy and in RateLimit.
// How: each field value and the body is one emitter run by append() (encoding.h): sized once,
// written through a pointer, no append per piece (issue 34: ~2.8k instructions per answer were
// spent in ~25 string appends).
#include <algorithm>

#include "encoding.h"
#include "ratelimit/algorithms.h"
#include "ratelimit/http.h"

namespace ratelimit::http {
namespace {

using wire::append_int;

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

// The items below are emitters: `w` is an encoding.h Measure, then a Writer.
template <class W>
void add_policy_item(W& w, const PolicyInfo& p) {
  w.sf(p.name);
  w.lit(";q=");
  w.num(p.quota);
  if (!p.quota_unit.empty()) {
    w.lit(";qu=");
    w.sf(p.quota_unit);
    return;
  }
  w.lit(";w=");
  w.num(ceil_seconds(p.window));
}

template <class W>
void add_limit_item(W& w, std::string_view name, const LimitState& s) {
  w.sf(name);
  w.lit(";r=");
  w.num(s.remaining);
  w.lit(";t=");
  w.num(s.reset_seconds);
}

LimitState state_of(const Decision& d) { return {d.limit, d.remaining, reset_seconds(d)}; }

// Appends an sf-list of one item per policy, in order ("a", "b" → `"a";…, "b";…`).
template <class AddItem>
void append_sf_list(std::string& out, size_t n, AddItem add) {
  append(out, [&](auto& w) {
    for (size_t i = 0; i < n; ++i) {
      if (i > 0) w.lit(", ");
      add(w, i);
    }
  });
}

void append_policy_list(std::string& out, std::span<const PolicyInfo> policies) {
  append_sf_list(out, policies.size(), [&](auto& w, size_t i) { add_policy_item(w, policies[i]); });
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
  if (o.headers == HeaderSet::kIetf) append_policy_list(out.add_field("RateLimit-Policy"), policies);
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
template <class W>
void append_decision_members(W& w, const Decision& d, const PolicyInfo& p) {
  if (d.allowed) {
    w.lit(R"("allowed":true,"policy":)");
  } else {
    w.lit(R"("allowed":false,"policy":)");
  }
  w.json(p.name);
  w.lit(R"(,"limit":)");
  w.num(d.limit);
  w.lit(R"(,"remaining":)");
  w.num(d.remaining);
  w.lit(R"(,"reset_ms":)");
  w.num(ceil_millis(d.reset_after));
  w.lit(R"(,"retry_after_ms":)");
  w.num(d.allowed ? int64_t{0} : ceil_millis(d.retry_after));
  w.lit(R"(,"delay_ms":)");
  w.num(ceil_millis(d.delay));
}

// RFC 9457 problem of draft-ietf-httpapi-ratelimit-headers section 5 for a 429. "status" is
// left out on purpose: ratelimitd may send the same answer as 403/401 to nginx auth_request,
// and a problem's status member must not disagree with the response's.
template <class W>
void append_problem(W& w, std::span<const Decision> decisions, std::span<const PolicyInfo> policies,
                    const Decision& reported) {
  const bool store = reported.reason == DecisionReason::kStoreFailedClosed;
  w.lit(R"({"type":)");
  w.json(store ? kTemporaryReducedCapacityType : kQuotaExceededType);
  using namespace std::string_view_literals;  // a literal of either length, without strlen
  w.lit(store ? R"(,"title":"Request cannot be satisfied due to temporary server capacity constraints")"sv
              : R"(,"title":"Request cannot be satisfied as assigned quota has been exceeded")"sv);
  w.lit(R"(,"violated-policies":[)");
  bool first = true;
  for (size_t i = 0; i < decisions.size(); ++i) {
    if (decisions[i].allowed) continue;
    if (!first) w.ch(',');
    first = false;
    w.json(policies[i].name);
  }
  w.lit("],");
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
    append_policy_list(out.add_field("RateLimit-Policy"), policies);
    append_sf_list(out.add_field("RateLimit"), policies.size(), [&](auto& w, size_t i) {
      add_limit_item(w, policies[i].name, state_of(decisions[i]));
    });
  } else if (const Triple* t = triple_of(o.headers)) {
    const LimitState s = state_of(d);
    append_int(out.add_field(t->limit), s.limit);
    append_int(out.add_field(t->remaining), s.remaining);
    append_int(out.add_field(t->reset), s.reset_seconds);
  }
  if (!d.allowed) {
    append_int(out.add_field("Retry-After"), retry_after_seconds(d));
    out.add_field("Cache-Control") = "no-store";
  }
  const bool problem = !d.allowed && o.problem_json;
  if (problem) out.content_type = "application/problem+json";
  append(out.body, [&](auto& w) {
    if (problem) {
      append_problem(w, decisions, policies, d);
    } else {
      w.ch('{');
    }
    append_decision_members(w, d, policies[k]);
    w.ch('}');
  });
}

}  // namespace

void append_triple(std::vector<Field>& out, const TripleNames& names, const LimitState& state) {
  out.push_back({names.limit, int_string(state.limit)});
  out.push_back({names.remaining, int_string(state.remaining)});
  out.push_back({names.reset, int_string(state.reset_seconds)});
}

void append_ietf_fields(std::vector<Field>& out, const PolicyInfo& policy, const LimitState& state) {
  std::string p;
  append(p, [&](auto& w) { add_policy_item(w, policy); });
  std::string l;
  append(l, [&](auto& w) { add_limit_item(w, policy.name, state); });
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
