// http.h — rendering a Decision as an HTTP answer: status, the standard rate-limit headers and
// a JSON body, with no dependency on any HTTP library.
//
// Why a library function: ratelimitd and any C++ HTTP server that embeds the library (Beast,
// Drogon, Crow, a hand-written one) must answer a denied request the same way, so a client
// written against one works against all. The caller copies `fields` into its own response type.
//
// The rules (ratelimitd's HTTP contract, see docs/http-api.md):
//   - status 200 when allowed, 429 when denied. A request whose cost exceeds the policy's
//     capacity (DecisionReason::kExceedsCapacity) can never pass, so no wait would help: it
//     gets 400 with {"error":"cost_exceeds_capacity", ...} and no Retry-After, which tells a
//     client to fix the request instead of retrying it.
//   - the rate-limit fields depend on the HeaderSet (RenderOptions::headers):
//       kIetf (default), draft-ietf-httpapi-ratelimit-headers (-08 … -11 syntax):
//         RateLimit-Policy: one item per policy, `"name";q=<quota>;w=<seconds>`, or for a
//                           concurrency policy `"name";q=<limit>;qu="concurrent-requests"`;
//         RateLimit:        one item per policy, `"name";r=<remaining>;t=<seconds>`,
//         in the order the policies were given; names are sf-strings (see append_sf_string).
//         w = the window rounded up to whole seconds (for buckets: the time to drain a full
//         bucket, burst / rate);
//       kDraft6: RateLimit-Limit / -Remaining / -Reset of the most restrictive decision
//         (algo::most_restrictive), the field triple of drafts 00 … 06;
//       kXRateLimit: the same three values as X-RateLimit-Limit / -Remaining / -Reset
//         (Reset in seconds from now, never a timestamp);
//       kNone: no rate-limit fields.
//   - t (and the -Reset fields) in whole seconds, rounded up: when allowed, until the limit is
//     fully available again (reset_after); when denied, until this request would be admitted,
//     the same instant as Retry-After, as the draft asks of a response carrying both.
//   - on 429, whatever the HeaderSet: Retry-After = max(1, ceil(retry_after in seconds)) of the
//     most restrictive decision — never 0 for a denied request (a failed-closed store denial
//     carries no wait and gets 1) — and Cache-Control: no-store.
//   - body: {"allowed","policy","limit","remaining","reset_ms","retry_after_ms","delay_ms"} of
//     the most restrictive decision; the millisecond figures are rounded up, so waiting that
//     long is always enough. With RenderOptions::problem_json a 429's body is instead an RFC 9457
//     problem (application/problem+json) of the draft's type
//     "https://iana.org/assignments/http-problem-types#quota-exceeded" (or
//     "…#temporary-reduced-capacity" when the store failed closed), with "title",
//     "violated-policies" (every denying policy, in order) and the members above.
// Thread-safety: every function is pure (no shared state); safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/clock.h"
#include "ratelimit/decision.h"
#include "ratelimit/policy.h"

namespace ratelimit::http {

// What the headers need to know about a policy besides its Decision.
struct PolicyInfo {
  std::string_view name;  // must outlive the render call only
  int64_t quota = 0;      // q: the policy's capacity (limit or burst)
  Micros window{0};       // w: the window, or the time to drain a full bucket
  // qu: the quota unit when it is not requests — "concurrent-requests" for a concurrency policy
  // (then no w: its quota is not per time window). Empty: requests (qu omitted, the default).
  std::string_view quota_unit{};

  static PolicyInfo of(const Policy& p) {
    if (p.is_concurrency()) return {p.name(), p.limit(), Micros{0}, "concurrent-requests"};
    return {p.name(), p.limit(), p.window()};
  }
};

struct Field {
  std::string_view name;  // a static string ("RateLimit-Policy", ...)
  std::string value;
};

// An HTTP answer in library-neutral form. Reusable: the render functions clear it first and
// keep the buffers' capacity — the body's, and the field values' (clear() keeps them aside for
// add_field()) — so a server rendering into one object per connection does not allocate per
// answer.
class Response {
 public:
  unsigned status = 200;
  std::vector<Field> fields;  // in the order they should be sent; no Content-Type/Length
  std::string body;
  std::string_view content_type = "application/json";

  void clear() {
    status = 200;
    for (Field& f : fields) {
      f.value.clear();
      spare_.push_back(std::move(f.value));
    }
    fields.clear();
    body.clear();
    content_type = "application/json";
  }
  // Appends a field named `name` (a static string) with an empty value, whose buffer is one an
  // earlier answer's field left behind when there is one, and returns that value to fill. The
  // reference is valid until the next change to `fields`.
  std::string& add_field(std::string_view name) {
    if (spare_.empty()) return fields.emplace_back(Field{name, {}}).value;
    fields.push_back(Field{name, std::move(spare_.back())});
    spare_.pop_back();
    return fields.back().value;
  }
  // The value of the first field named `name` (ASCII case-insensitive), or nullptr.
  const std::string* field(std::string_view name) const;

 private:
  std::vector<std::string> spare_;  // cleared values kept for add_field (bounded by the most fields of one answer)
};

// Which rate-limit header fields an answer carries (see the rules above).
enum class HeaderSet : uint8_t { kIetf, kDraft6, kXRateLimit, kNone };

// "ietf", "draft6", "x-ratelimit", "none" — the names ratelimitd's `headers:` setting takes.
std::string_view header_set_name(HeaderSet set);
// The inverse of header_set_name (exact, lower case); nullopt for any other text.
[[nodiscard]] std::optional<HeaderSet> parse_header_set(std::string_view name);

struct RenderOptions {
  HeaderSet headers = HeaderSet::kIetf;
  bool problem_json = false;  // a 429's body as application/problem+json (quota-exceeded)
};

// The problem types of draft-ietf-httpapi-ratelimit-headers (section 5), for problem_json.
inline constexpr std::string_view kQuotaExceededType =
    "https://iana.org/assignments/http-problem-types#quota-exceeded";
inline constexpr std::string_view kTemporaryReducedCapacityType =
    "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

// Renders one policy's decision (see the rules above). Overwrites `out`.
void render_decision(const Decision& decision, const PolicyInfo& policy, Response& out,
                     const RenderOptions& options = {});
Response render_decision(const Decision& decision, const PolicyInfo& policy,
                         const RenderOptions& options = {});

// Renders a check over several policies (all or nothing, or independent): status, Retry-After,
// the body and the single-valued fields (draft6, x-ratelimit) come from the most restrictive
// decision (algo::most_restrictive); RateLimit-Policy and RateLimit carry one item per policy.
// Precondition: decisions.size() == policies.size() >= 1.
void render_decisions(std::span<const Decision> decisions, std::span<const PolicyInfo> policies,
                      Response& out, const RenderOptions& options = {});

// The pieces of the rules above, for a front-end whose own protocol carries the fields and
// chooses their values (Envoy's RLS response_headers_to_add: the descriptor closest to its
// limit, reset = its duration_until_reset): the same names, order and syntax as an HTTP answer.
// The single-valued triple's names (kDraft6, kXRateLimit, or an operator's own).
struct TripleNames {
  std::string_view limit, remaining, reset;
};
// What one limit's fields say; reset already in whole seconds.
struct LimitState {
  int64_t limit = 0;
  int64_t remaining = 0;
  int64_t reset_seconds = 0;
};
// Appends names.limit, names.remaining and names.reset with `state`'s values.
void append_triple(std::vector<Field>& out, const TripleNames& names, const LimitState& state);
// Appends RateLimit-Policy and RateLimit, one item each for `policy` (q and w, r and t).
void append_ietf_fields(std::vector<Field>& out, const PolicyInfo& policy, const LimitState& state);

// {"error": <error>, "message": <message>} with the given status. Overwrites `out`.
void render_error(unsigned status, std::string_view error, std::string_view message,
                  Response& out);

// Whole seconds, rounded up (0 stays 0). Negative durations count as 0.
int64_t ceil_seconds(Micros d);
// Whole milliseconds, rounded up (0 stays 0). Negative durations count as 0.
int64_t ceil_millis(Micros d);

// Appends `s` as a JSON string literal (quotes included). Bytes that are not valid UTF-8 are
// replaced by U+FFFD so the output is always valid JSON.
void append_json_string(std::string& out, std::string_view s);

// Appends `s` as a Structured Field sf-string (RFC 9651 section 3.3.3; quotes included):
// '"' and '\' are escaped, any byte outside printable ASCII (0x20-0x7e) becomes '?', which an
// sf-string cannot carry; so the field always parses. Policy names of ratelimitd's files are
// [A-Za-z0-9_.:-] and come out unchanged.
void append_sf_string(std::string& out, std::string_view s);

// True when `name` can be an HTTP field name: a non-empty RFC 9110 token (tchar: letters,
// digits and !#$%&'*+-.^_`|~). Every configured header name (ratelimitd's file, the
// envoyproxy/ratelimit environment) is checked with this one function, so none can carry a
// space, a colon or a CR/LF into a response.
bool is_field_name(std::string_view name);

// The reason phrase for the statuses this library and ratelimitd use ("Too Many Requests").
std::string_view reason_phrase(unsigned status);

}  // namespace ratelimit::http
