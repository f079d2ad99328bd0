// http.h — rendering a Decision as an HTTP answer: status, the standard rate-limit headers and
// a JSON body, with no dependency on any HTTP library.
//
// Why a library function: ratelimitd and any C++ HTTP server that embeds the library (Beast,
// Drogon, Crow, a hand-written one) must answer a denied request the same way, so a client
// written against one works against all. The caller copies `fields` into its own response type.
//
// The rules (ratelimitd's HTTP contract, see README.md, ratelimitd):
//   - status 200 when allowed, 429 when denied. A request whose cost exceeds the policy's
//     capacity (DecisionReason::kExceedsCapacity) can never pass, so no wait would help: it
//     gets 400 with {"error":"cost_exceeds_capacity", ...} and no Retry-After, which tells a
//     client to fix the request instead of retrying it.
//   - RateLimit-Policy: one list member per policy involved, `"name";q=<limit>;w=<seconds>`,
//     w = the window rounded up to whole seconds (for buckets: the time to drain a full
//     bucket, burst / rate), as in draft-ietf-httpapi-ratelimit-headers.
//   - RateLimit: `"name";r=<remaining>;t=<seconds>` for the most restrictive policy
//     (algo::most_restrictive), plus RateLimit-Limit / -Remaining / -Reset mirroring q, r, t.
//   - t (and RateLimit-Reset) in whole seconds, rounded up: when allowed, until the limit is
//     fully available again (reset_after); when denied, until this request would be admitted,
//     the same instant as Retry-After, as the draft asks of a response carrying both.
//   - on 429: Retry-After = max(1, ceil(retry_after in seconds)) — never 0 for a denied request
//     (a failed-closed store denial carries no wait and gets 1) — and Cache-Control: no-store.
//   - body: {"allowed","policy","limit","remaining","reset_ms","retry_after_ms","delay_ms"};
//     the millisecond figures are rounded up, so waiting that long is always enough.
// Thread-safety: every function is pure (no shared state); safe from any thread.
#pragma once

#include <cstdint>
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

  static PolicyInfo of(const Policy& p) { return {p.name(), p.limit(), p.window()}; }
};

struct Field {
  std::string_view name;  // a static string ("RateLimit-Policy", ...)
  std::string value;
};

// An HTTP answer in library-neutral form. Reusable: the render functions clear it first and
// keep the buffers' capacity, so a server can render into one object per connection.
struct Response {
  unsigned status = 200;
  std::vector<Field> fields;  // in the order they should be sent; no Content-Type/Length
  std::string body;
  std::string_view content_type = "application/json";

  void clear() {
    status = 200;
    fields.clear();
    body.clear();
    content_type = "application/json";
  }
  // The value of the first field named `name` (ASCII case-insensitive), or nullptr.
  const std::string* field(std::string_view name) const;
};

// Renders one policy's decision (see the rules above). Overwrites `out`.
void render_decision(const Decision& decision, const PolicyInfo& policy, Response& out);
Response render_decision(const Decision& decision, const PolicyInfo& policy);

// Renders an all-or-nothing check over several policies: status and RateLimit come from the
// most restrictive decision (algo::most_restrictive), RateLimit-Policy lists every policy.
// Precondition: decisions.size() == policies.size() >= 1.
void render_decisions(std::span<const Decision> decisions, std::span<const PolicyInfo> policies,
                      Response& out);

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

// The reason phrase for the statuses this library and ratelimitd use ("Too Many Requests").
std::string_view reason_phrase(unsigned status);

}  // namespace ratelimit::http
