// render_test.cc — the HTTP rendering rules of include/ratelimit/http.h, pinned down with
// hand-built Decisions (no clock, no server): statuses, the exact header values, rounding of
// every duration, the exceeds-capacity answer, several policies, JSON escaping.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "ratelimit/http.h"

namespace ratelimit::http {
namespace {

Decision allowed(int64_t limit, int64_t remaining, int64_t reset_us) {
  Decision d;
  d.allowed = true;
  d.reason = DecisionReason::kWithinLimit;
  d.limit = limit;
  d.remaining = remaining;
  d.reset_after = Micros{reset_us};
  return d;
}

Decision denied(int64_t limit, int64_t reset_us, int64_t retry_us) {
  Decision d;
  d.allowed = false;
  d.reason = DecisionReason::kOverLimit;
  d.limit = limit;
  d.remaining = 0;
  d.reset_after = Micros{reset_us};
  d.retry_after = Micros{retry_us};
  return d;
}

std::string field(const Response& r, std::string_view name) {
  const std::string* v = r.field(name);
  return v ? *v : std::string("<absent>");
}

TEST(Rounding, CeilSecondsAndMillis) {
  EXPECT_EQ(ceil_seconds(Micros{0}), 0);
  EXPECT_EQ(ceil_seconds(Micros{1}), 1);
  EXPECT_EQ(ceil_seconds(Micros{1'000'000}), 1);
  EXPECT_EQ(ceil_seconds(Micros{1'000'001}), 2);
  EXPECT_EQ(ceil_seconds(Micros{-5}), 0);
  EXPECT_EQ(ceil_millis(Micros{1}), 1);
  EXPECT_EQ(ceil_millis(Micros{1'000}), 1);
  EXPECT_EQ(ceil_millis(Micros{1'001}), 2);
  EXPECT_EQ(ceil_millis(Micros{0}), 0);
}

TEST(RenderDecision, AllowedHasRateLimitFieldsAndNoRetryAfter) {
  const Response r = render_decision(allowed(10, 9, 60'000'000), {"api", 10, Micros{60'000'000}});
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(field(r, "RateLimit-Policy"), "\"api\";q=10;w=60");
  EXPECT_EQ(field(r, "RateLimit"), "\"api\";r=9;t=60");
  EXPECT_EQ(r.fields.size(), 2u);  // the ietf set: the two structured fields, nothing else
  EXPECT_EQ(r.field("Retry-After"), nullptr);
  EXPECT_EQ(r.field("Cache-Control"), nullptr);
  EXPECT_EQ(r.body,
            R"({"allowed":true,"policy":"api","limit":10,"remaining":9,"reset_ms":60000,)"
            R"("retry_after_ms":0,"delay_ms":0})");
  EXPECT_EQ(r.content_type, "application/json");
}

TEST(RenderDecision, DeniedRoundsRetryAfterUpAndMatchesT) {
  // 41.000001 s to wait -> 42 s everywhere a whole second is given.
  const Response r = render_decision(denied(10, 59'000'000, 41'000'001), {"api", 10, Micros{60'000'000}});
  EXPECT_EQ(r.status, 429u);
  EXPECT_EQ(field(r, "Retry-After"), "42");
  EXPECT_EQ(field(r, "RateLimit"), "\"api\";r=0;t=42");
  EXPECT_EQ(field(render_decision(denied(10, 59'000'000, 41'000'001), {"api", 10, Micros{60'000'000}},
                                  {HeaderSet::kDraft6}),
                  "RateLimit-Reset"),
            "42");
  EXPECT_EQ(field(r, "Cache-Control"), "no-store");
  EXPECT_EQ(r.body,
            R"({"allowed":false,"policy":"api","limit":10,"remaining":0,"reset_ms":59000,)"
            R"("retry_after_ms":41001,"delay_ms":0})");
}

TEST(RenderDecision, RetryAfterIsNeverZeroForADenial) {
  const Response tiny = render_decision(denied(5, 1, 1), {"p", 5, Micros{1'000'000}});
  EXPECT_EQ(field(tiny, "Retry-After"), "1");
  EXPECT_EQ(field(tiny, "RateLimit"), "\"p\";r=0;t=1");
  // A fail-closed denial carries no wait at all: still 1.
  Decision closed = denied(5, 0, 0);
  closed.reason = DecisionReason::kStoreFailedClosed;
  const Response c = render_decision(closed, {"p", 5, Micros{1'000'000}});
  EXPECT_EQ(c.status, 429u);
  EXPECT_EQ(field(c, "Retry-After"), "1");
  EXPECT_EQ(field(c, "RateLimit"), "\"p\";r=0;t=1");
}

TEST(RenderDecision, ExactSecondIsNotRoundedFurther) {
  const Response r = render_decision(denied(1, 3'000'000, 3'000'000), {"p", 1, Micros{3'000'000}});
  EXPECT_EQ(field(r, "Retry-After"), "3");
  EXPECT_EQ(field(r, "RateLimit"), "\"p\";r=0;t=3");
}

TEST(RenderDecision, BucketWindowIsDrainTimeRoundedUp) {
  // rate 3/s, burst 10: a full bucket drains in 3.333.. s -> w=4.
  const Response r = render_decision(allowed(10, 9, 333'334), {"b", 10, Micros{3'333'334}});
  EXPECT_EQ(field(r, "RateLimit-Policy"), "\"b\";q=10;w=4");
  EXPECT_EQ(field(r, "RateLimit"), "\"b\";r=9;t=1");
  // A 500 ms window is advertised as w=1 (the field is in whole seconds).
  const Response h = render_decision(allowed(5, 4, 400'000), {"h", 5, Micros{500'000}});
  EXPECT_EQ(field(h, "RateLimit-Policy"), "\"h\";q=5;w=1");
}

TEST(RenderDecision, ShapingDelayIsReportedInMillisRoundedUp) {
  Decision d = allowed(10, 8, 400'000);
  d.delay = Micros{199'001};
  const Response r = render_decision(d, {"shaped", 10, Micros{2'000'000}});
  EXPECT_NE(r.body.find(R"("delay_ms":200})"), std::string::npos) << r.body;
}

TEST(RenderDecision, ExceedsCapacityIs400WithoutRetryAfter) {
  Decision d;
  d.allowed = false;
  d.reason = DecisionReason::kExceedsCapacity;
  d.limit = 20;
  const Response r = render_decision(d, {"uploads", 20, Micros{2'000'000}});
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(r.field("Retry-After"), nullptr);
  EXPECT_EQ(field(r, "RateLimit-Policy"), "\"uploads\";q=20;w=2");
  EXPECT_EQ(r.field("RateLimit"), nullptr);  // no remaining or wait: it can never pass
  EXPECT_EQ(field(render_decision(d, {"uploads", 20, Micros{2'000'000}}, {HeaderSet::kDraft6}),
                  "RateLimit-Limit"),
            "20");
  EXPECT_NE(r.body.find(R"("error":"cost_exceeds_capacity")"), std::string::npos);
  EXPECT_NE(r.body.find(R"("policy":"uploads","limit":20})"), std::string::npos);
}

TEST(RenderDecisions, OneRateLimitItemPerPolicyStatusFromTheMostRestrictive) {
  const std::vector<Decision> ds = {allowed(5, 4, 1'000'000), denied(100, 3'600'000'000, 1'800'000'000)};
  const std::vector<PolicyInfo> ps = {{"per_second", 5, Micros{1'000'000}},
                                      {"per_hour", 100, Micros{3'600'000'000}}};
  Response r;
  render_decisions(ds, ps, r);
  EXPECT_EQ(r.status, 429u);
  EXPECT_EQ(field(r, "RateLimit-Policy"), "\"per_second\";q=5;w=1, \"per_hour\";q=100;w=3600");
  // Every policy's remaining, in the order given; t of the denying one == Retry-After.
  EXPECT_EQ(field(r, "RateLimit"), "\"per_second\";r=4;t=1, \"per_hour\";r=0;t=1800");
  EXPECT_EQ(field(r, "Retry-After"), "1800");
  EXPECT_NE(r.body.find(R"("policy":"per_hour")"), std::string::npos);
}

TEST(RenderDecisions, AllAdmittedReportsFewestRemaining) {
  const std::vector<Decision> ds = {allowed(5, 4, 1'000'000), allowed(100, 2, 3'000'000)};
  const std::vector<PolicyInfo> ps = {{"a", 5, Micros{1'000'000}}, {"b", 100, Micros{60'000'000}}};
  Response r;
  render_decisions(ds, ps, r);
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(field(r, "RateLimit"), "\"a\";r=4;t=1, \"b\";r=2;t=3");
  // The single-valued sets report the fewest remaining.
  render_decisions(ds, ps, r, {HeaderSet::kDraft6});
  EXPECT_EQ(field(r, "RateLimit-Remaining"), "2");
  EXPECT_EQ(field(r, "RateLimit-Reset"), "3");
}

TEST(RenderResponse, ReuseClearsPreviousFields) {
  Response r;
  render_decision(denied(1, 1'000'000, 1'000'000), {"p", 1, Micros{1'000'000}}, r);
  render_decision(allowed(1, 0, 1'000'000), {"p", 1, Micros{1'000'000}}, r);
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.field("Retry-After"), nullptr);
  EXPECT_EQ(r.fields.size(), 2u);
}

// A reused Response renders its field values into buffers an earlier answer left
// (Response::add_field): whatever came before, every answer equals one rendered fresh.
TEST(RenderResponse, ReusedFieldBuffersHoldOnlyTheNewAnswer) {
  const std::vector<Decision> two = {allowed(5, 4, 1'000'000), denied(100, 3'600'000'000, 1'800'000'000)};
  const std::vector<PolicyInfo> two_ps = {{"per_second", 5, Micros{1'000'000}}, {"per_hour", 100, Micros{3'600'000'000}}};
  const std::vector<Decision> one = {allowed(7, 6, 2'000'000)};
  const std::vector<PolicyInfo> one_ps = {{"p", 7, Micros{2'000'000}}};
  struct Step {
    const std::vector<Decision>* ds;
    const std::vector<PolicyInfo>* ps;
    HeaderSet set;
  };
  const std::vector<Step> steps = {{&two, &two_ps, HeaderSet::kIetf}, {&one, &one_ps, HeaderSet::kIetf},
                                   {&two, &two_ps, HeaderSet::kXRateLimit}, {&one, &one_ps, HeaderSet::kDraft6},
                                   {&one, &one_ps, HeaderSet::kNone}, {&two, &two_ps, HeaderSet::kIetf},
                                   {&one, &one_ps, HeaderSet::kIetf}};
  Response reused;
  for (const Step& s : steps) {
    Response fresh;
    render_decisions(*s.ds, *s.ps, fresh, {s.set});
    render_decisions(*s.ds, *s.ps, reused, {s.set});
    ASSERT_EQ(reused.fields.size(), fresh.fields.size());
    for (size_t i = 0; i < fresh.fields.size(); ++i) {
      EXPECT_EQ(reused.fields[i].name, fresh.fields[i].name);
      EXPECT_EQ(reused.fields[i].value, fresh.fields[i].value);
    }
    EXPECT_EQ(reused.status, fresh.status);
    EXPECT_EQ(reused.body, fresh.body);
  }
}

TEST(RenderError, JsonShapeAndEscaping) {
  Response r;
  render_error(400, "invalid_json", "bad \"quote\" \\ and \x01 ctrl", r);
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(r.body, R"({"error":"invalid_json","message":"bad \"quote\" \\ and \u0001 ctrl"})");
}

TEST(AppendJsonString, KeepsValidUtf8AndReplacesInvalidBytes) {
  std::string out;
  append_json_string(out, "caf\xc3\xa9 \xff \xe2\x82");
  EXPECT_EQ(out, "\"caf\xc3\xa9 \xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\"");
  out.clear();
  append_json_string(out, "\xed\xa0\x80");  // a UTF-16 surrogate encoded in UTF-8: invalid
  EXPECT_EQ(out, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
}

TEST(StructuredFields, NamesAreQuotedSafely) {
  const Response r = render_decision(allowed(1, 0, 1), {"we\"ird\\", 1, Micros{1'000'000}});
  EXPECT_EQ(field(r, "RateLimit-Policy"), "\"we\\\"ird\\\\\";q=1;w=1");
}

TEST(StructuredFields, OddNamesStayOneParseableItem) {
  // Bytes an sf-string cannot carry (controls, DEL, non-ASCII) become '?'; ',' ';' '=' and
  // spaces are legal inside the quotes and must not split the item.
  const std::string odd = std::string("a,b;c=d e\x01\x7f") + "\xc3\xa9";
  const std::vector<Decision> ds = {allowed(1, 0, 1), allowed(2, 1, 1'000'000)};
  const std::vector<PolicyInfo> ps = {{odd, 1, Micros{1'000'000}}, {"\"", 2, Micros{1'000'000}}};
  Response r;
  render_decisions(ds, ps, r);
  EXPECT_EQ(field(r, "RateLimit-Policy"), "\"a,b;c=d e????\";q=1;w=1, \"\\\"\";q=2;w=1");
  EXPECT_EQ(field(r, "RateLimit"), "\"a,b;c=d e????\";r=0;t=1, \"\\\"\";r=1;t=1");
  std::string s;
  append_sf_string(s, "ok_name:1.v-2");
  EXPECT_EQ(s, "\"ok_name:1.v-2\"");
}

// The exact fields of every header set, for one policy and for three.
TEST(HeaderSets, ExactFieldsPerSetAndPolicyCount) {
  const Decision d = denied(10, 59'000'000, 41'000'001);
  const PolicyInfo p{"api", 10, Micros{60'000'000}};
  using F = std::vector<std::pair<std::string, std::string>>;
  auto fields = [](const Response& r) {
    F f;
    for (const Field& x : r.fields) f.emplace_back(std::string(x.name), x.value);
    return f;
  };
  EXPECT_EQ(fields(render_decision(d, p, {HeaderSet::kIetf})),
            (F{{"RateLimit-Policy", "\"api\";q=10;w=60"}, {"RateLimit", "\"api\";r=0;t=42"},
               {"Retry-After", "42"}, {"Cache-Control", "no-store"}}));
  EXPECT_EQ(fields(render_decision(d, p, {HeaderSet::kDraft6})),
            (F{{"RateLimit-Limit", "10"}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "42"},
               {"Retry-After", "42"}, {"Cache-Control", "no-store"}}));
  EXPECT_EQ(fields(render_decision(d, p, {HeaderSet::kXRateLimit})),
            (F{{"X-RateLimit-Limit", "10"}, {"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "42"},
               {"Retry-After", "42"}, {"Cache-Control", "no-store"}}));
  EXPECT_EQ(fields(render_decision(d, p, {HeaderSet::kNone})),
            (F{{"Retry-After", "42"}, {"Cache-Control", "no-store"}}));
  EXPECT_TRUE(fields(render_decision(allowed(10, 3, 2'500'000), p, {HeaderSet::kNone})).empty());

  const std::vector<Decision> ds = {allowed(5, 4, 1'000'000), allowed(100, 7, 3'000'000),
                                    allowed(1000, 999, 86'400'000'000)};
  const std::vector<PolicyInfo> ps = {{"s", 5, Micros{1'000'000}}, {"h", 100, Micros{3'600'000'000}},
                                      {"d", 1000, Micros{86'400'000'000}}};
  Response r;
  render_decisions(ds, ps, r, {HeaderSet::kIetf});
  EXPECT_EQ(fields(r), (F{{"RateLimit-Policy", "\"s\";q=5;w=1, \"h\";q=100;w=3600, \"d\";q=1000;w=86400"},
                          {"RateLimit", "\"s\";r=4;t=1, \"h\";r=7;t=3, \"d\";r=999;t=86400"}}));
  render_decisions(ds, ps, r, {HeaderSet::kDraft6});
  EXPECT_EQ(fields(r), (F{{"RateLimit-Limit", "5"}, {"RateLimit-Remaining", "4"}, {"RateLimit-Reset", "1"}}));
  render_decisions(ds, ps, r, {HeaderSet::kXRateLimit});
  EXPECT_EQ(fields(r), (F{{"X-RateLimit-Limit", "5"}, {"X-RateLimit-Remaining", "4"}, {"X-RateLimit-Reset", "1"}}));
  render_decisions(ds, ps, r, {HeaderSet::kNone});
  EXPECT_TRUE(fields(r).empty());
  EXPECT_EQ(r.status, 200u);
}

TEST(HeaderSets, NamesRoundTrip) {
  for (HeaderSet s : {HeaderSet::kIetf, HeaderSet::kDraft6, HeaderSet::kXRateLimit, HeaderSet::kNone}) {
    EXPECT_EQ(parse_header_set(header_set_name(s)), s);
  }
  EXPECT_EQ(header_set_name(HeaderSet::kXRateLimit), "x-ratelimit");
  EXPECT_EQ(parse_header_set("IETF"), std::nullopt);
  EXPECT_EQ(parse_header_set("draft-6"), std::nullopt);
  EXPECT_EQ(parse_header_set(""), std::nullopt);
}

TEST(ProblemJson, QuotaExceededBodyListsEveryViolatedPolicy) {
  const std::vector<Decision> ds = {denied(5, 1'000'000, 500'000), allowed(100, 7, 3'000'000),
                                    denied(1000, 86'400'000'000, 7'200'000'000)};
  const std::vector<PolicyInfo> ps = {{"s", 5, Micros{1'000'000}}, {"h", 100, Micros{3'600'000'000}},
                                      {"d", 1000, Micros{86'400'000'000}}};
  Response r;
  render_decisions(ds, ps, r, {HeaderSet::kIetf, true});
  EXPECT_EQ(r.status, 429u);
  EXPECT_EQ(r.content_type, "application/problem+json");
  EXPECT_EQ(field(r, "Retry-After"), "7200");
  EXPECT_EQ(r.body,
            R"({"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",)"
            R"("title":"Request cannot be satisfied as assigned quota has been exceeded",)"
            R"("violated-policies":["s","d"],)"
            R"("allowed":false,"policy":"d","limit":1000,"remaining":0,"reset_ms":86400000,)"
            R"("retry_after_ms":7200000,"delay_ms":0})");
}

TEST(ProblemJson, OnlyDenialsAndNeverTheCapacityError) {
  const PolicyInfo p{"api", 10, Micros{60'000'000}};
  const Response ok = render_decision(allowed(10, 9, 1), p, {HeaderSet::kIetf, true});
  EXPECT_EQ(ok.content_type, "application/json");
  EXPECT_EQ(ok.body.find("\"type\""), std::string::npos);
  Decision big;
  big.reason = DecisionReason::kExceedsCapacity;
  big.limit = 10;
  const Response cap = render_decision(big, p, {HeaderSet::kIetf, true});
  EXPECT_EQ(cap.status, 400u);
  EXPECT_EQ(cap.content_type, "application/json");
  // Off (the default): the plain decision body.
  const Response plain = render_decision(denied(10, 1, 1), p);
  EXPECT_EQ(plain.content_type, "application/json");
  EXPECT_EQ(plain.body.rfind(R"({"allowed":false)", 0), 0u);
}

TEST(ProblemJson, FailedClosedIsTemporaryReducedCapacity) {
  Decision closed = denied(5, 0, 0);
  closed.reason = DecisionReason::kStoreFailedClosed;
  const Response r = render_decision(closed, {"p", 5, Micros{1'000'000}}, {HeaderSet::kNone, true});
  EXPECT_EQ(r.status, 429u);
  EXPECT_EQ(field(r, "Retry-After"), "1");
  EXPECT_EQ(r.body.rfind(R"({"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity",)", 0), 0u)
      << r.body;
  EXPECT_NE(r.body.find(R"("violated-policies":["p"])"), std::string::npos);
}

// The integer fields at both ends of int64: every value is written in full, in every header set
// and in the body (ceil of INT64_MAX µs: 9223372036855 s, 9223372036854776 ms; negative
// durations count as 0, a negative count is written as it is).
TEST(Extremes, EveryIntegerFieldAtBothEnds) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const Decision a = allowed(kMax, kMin, kMax);
  Decision with_delay = a;
  with_delay.delay = Micros{kMax};
  const PolicyInfo p{"p", kMin, Micros{kMax}};
  Response r;
  render_decision(with_delay, p, r);
  EXPECT_EQ(field(r, "RateLimit-Policy"), "\"p\";q=-9223372036854775808;w=9223372036855");
  EXPECT_EQ(field(r, "RateLimit"), "\"p\";r=-9223372036854775808;t=9223372036855");
  EXPECT_EQ(r.body,
            R"({"allowed":true,"policy":"p","limit":9223372036854775807,"remaining":-9223372036854775808,)"
            R"("reset_ms":9223372036854776,"retry_after_ms":0,"delay_ms":9223372036854776})");
  render_decision(a, p, r, {HeaderSet::kDraft6});
  EXPECT_EQ(field(r, "RateLimit-Limit"), "9223372036854775807");
  EXPECT_EQ(field(r, "RateLimit-Remaining"), "-9223372036854775808");
  EXPECT_EQ(field(r, "RateLimit-Reset"), "9223372036855");
  render_decision(a, p, r, {HeaderSet::kXRateLimit});
  EXPECT_EQ(field(r, "X-RateLimit-Limit"), "9223372036854775807");
  EXPECT_EQ(field(r, "X-RateLimit-Remaining"), "-9223372036854775808");

  // Denied with the longest wait; zero and negative durations; the other end of each count.
  Decision d = denied(kMin, kMin, kMax);
  d.remaining = kMax;
  d.delay = Micros{-1};
  render_decision(d, {"p", 0, Micros{kMin}}, r, {HeaderSet::kIetf, true});
  EXPECT_EQ(r.status, 429u);
  EXPECT_EQ(field(r, "RateLimit-Policy"), "\"p\";q=0;w=0");
  EXPECT_EQ(field(r, "RateLimit"), "\"p\";r=9223372036854775807;t=9223372036855");
  EXPECT_EQ(field(r, "Retry-After"), "9223372036855");
  EXPECT_EQ(r.body,
            R"({"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",)"
            R"("title":"Request cannot be satisfied as assigned quota has been exceeded",)"
            R"("violated-policies":["p"],"allowed":false,"policy":"p","limit":-9223372036854775808,)"
            R"("remaining":9223372036854775807,"reset_ms":0,"retry_after_ms":9223372036854776,"delay_ms":0})");

  // Every digit count in one field: 10^k - 1 and 10^k.
  int64_t ten = 1;
  for (int k = 0; k <= 18; ++k, ten *= 10) {
    for (const int64_t v : {ten - 1, ten, -ten}) {
      render_decision(allowed(v, 0, 0), {"p", v, Micros{0}}, r, {HeaderSet::kDraft6});
      EXPECT_EQ(field(r, "RateLimit-Limit"), std::to_string(v));
    }
  }
}

TEST(Extremes, CapacityAndConflictAnswers) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  Decision cap;
  cap.reason = DecisionReason::kExceedsCapacity;
  cap.limit = kMax;
  Response r;
  render_decision(cap, {"big", kMax, Micros{1}}, r, {HeaderSet::kXRateLimit});
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(field(r, "X-RateLimit-Limit"), "9223372036854775807");
  EXPECT_EQ(r.body,
            R"({"error":"cost_exceeds_capacity","message":"the request's cost exceeds the capacity )"
            R"((9223372036854775807) of policy 'big': it can never be admitted","policy":"big",)"
            R"("limit":9223372036854775807})");
  Decision conflict = denied(5, 0, kMax);
  conflict.reason = DecisionReason::kPolicyConflict;
  render_decision(conflict, {"c", 5, Micros{1'000'000}}, r);
  EXPECT_EQ(r.status, 409u);
  EXPECT_EQ(field(r, "Retry-After"), "9223372036855");
  EXPECT_NE(r.body.find(R"("policy":"c","retry_after_ms":9223372036854776})"), std::string::npos) << r.body;
}

// A name needing every escape, in each place a name is written: sf-strings in the fields,
// JSON strings in the body and the problem's violated-policies.
TEST(Escapes, OneNameInEveryPlace) {
  const std::string name = "q\"b\\s\x01\x7f\xc3\xa9\xff";
  const std::string sf = "\"q\\\"b\\\\s?????\"";
  const std::string json = "\"q\\\"b\\\\s\\u0001\\u007f\xc3\xa9\xef\xbf\xbd\"";
  const std::vector<Decision> ds = {denied(3, 2'000'000, 1'500'000), allowed(9, 8, 1'000'000)};
  const std::vector<PolicyInfo> ps = {{name, 3, Micros{2'000'000}},
                                      {"u", 9, Micros{0}, "concurrent-requests"}};
  Response r;
  render_decisions(ds, ps, r, {HeaderSet::kIetf, true});
  EXPECT_EQ(field(r, "RateLimit-Policy"), sf + ";q=3;w=2, \"u\";q=9;qu=\"concurrent-requests\"");
  EXPECT_EQ(field(r, "RateLimit"), sf + ";r=0;t=2, \"u\";r=8;t=1");
  EXPECT_EQ(r.body,
            R"({"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",)"
            R"("title":"Request cannot be satisfied as assigned quota has been exceeded",)"
            R"("violated-policies":[)" + json + R"(],"allowed":false,"policy":)" + json +
                R"(,"limit":3,"remaining":0,"reset_ms":2000,"retry_after_ms":1500,"delay_ms":0})");
  render_decisions(ds, ps, r, {HeaderSet::kNone, false});
  EXPECT_EQ(r.body, R"({"allowed":false,"policy":)" + json +
                        R"(,"limit":3,"remaining":0,"reset_ms":2000,"retry_after_ms":1500,"delay_ms":0})");
  // append_triple / append_ietf_fields (the Envoy RLS front end's pieces): the same bytes.
  std::vector<Field> fs;
  append_ietf_fields(fs, ps[0], {3, -1, 7});
  append_triple(fs, {"L", "R", "T"}, {std::numeric_limits<int64_t>::min(), 0, 1});
  ASSERT_EQ(fs.size(), 5u);
  EXPECT_EQ(fs[0].value, sf + ";q=3;w=2");
  EXPECT_EQ(fs[1].value, sf + ";r=-1;t=7");
  EXPECT_EQ(fs[2].value, "-9223372036854775808");
  EXPECT_EQ(fs[3].value, "0");
  EXPECT_EQ(fs[4].value, "1");
}

}  // namespace
}  // namespace ratelimit::http
