// rls_answer.cc — ShouldRateLimit's answer (RateLimitService::finish, see rls_service.h): each
// descriptor's status from its decision, its statistics, the overall code, and the limit
// headers of the descriptor closest to its limit, rendered by src/http as every other answer's
// limit fields are.
//
// Statistics: a configured rule's own key is looked up once per snapshot (its name was made at
// load); only keys built from request values (detailed_metric, value_to_metric, overrides) are
// named here, per request, and capped by RuleStats. A decision the store failed (open or
// closed) counts nothing, as envoyproxy/ratelimit counts nothing it did not decide.
#include <limits>

#include "ratelimit/http.h"
#include "rls_call.h"

namespace ratelimit::rls {

namespace {

constexpr uint32_t kMaxU32 = std::numeric_limits<uint32_t>::max();

uint32_t clamp_u32(int64_t v) {
  if (v <= 0) return 0;
  return v > int64_t{kMaxU32} ? kMaxU32 : static_cast<uint32_t>(v);
}

// envoyproxy/ratelimit's choice of the descriptor whose limit headers are sent, and the
// overall code's tallies.
struct Tally {
  size_t failed = 0, quota_total = 0, quota_failed = 0;
  const DescriptorStatus* closest = nullptr;
  const Rule* closest_rule = nullptr;
  uint32_t closest_remaining = kMaxU32;

  // The fewest remaining so far, then any over-limit descriptor outside quota mode (the last
  // one wins).
  void add(const DescriptorStatus& ds, const Rule& rule) {
    if (ds.limit_remaining < closest_remaining) {
      closest = &ds;
      closest_rule = &rule;
      closest_remaining = ds.limit_remaining;
    }
    if (rule.quota_mode) ++quota_total;
    if (ds.code != Code::kOverLimit) return;
    if (rule.quota_mode) {
      ++quota_failed;
    } else {
      ++failed;
      closest = &ds;
      closest_rule = &rule;
      closest_remaining = 0;
    }
  }
  Code overall(bool shadow_mode) const {
    const bool over = failed > 0 || (quota_total > 0 && quota_total == quota_failed);
    return over && !shadow_mode ? Code::kOverLimit : Code::kOk;
  }
};

}  // namespace

HitCounters* RateLimitService::counters_for(const Call::State& st, std::string_view domain, size_t i,
                                            uint64_t total_hits) {
  const Applied& a = st.applied[i];
  const Rule& rule = *a.rule();
  const bool own_key = !a.override_rule && !a.detailed && a.stats_key == rule.full_key;
  if (own_key) {
    auto& slot = st.snap->per_rule.at(&rule)->stats;
    HitCounters* c = slot.load(std::memory_order_acquire);
    if (c == nullptr) {
      c = stats_.configured(domain, rule.stats_name);
      slot.store(c, std::memory_order_release);
    }
    return c;
  }
  if (HitCounters* c = stats_.request_key(domain, stat_name(a.stats_key, domain))) return c;
  stats_.count_overflow(total_hits);
  return stats_.configured(domain, a.override_rule ? std::string_view("limit_override") : rule.stats_name);
}

void RateLimitService::answer_descriptor(Call& call, size_t i, DescriptorStatus& ds) {
  const Call::State& st = *call.state_;
  const Applied& a = st.applied[i];
  ds = DescriptorStatus{};
  ds.code = Code::kOk;
  if (a.unlimited) {
    ds.limit_remaining = kMaxU32;
    return;
  }
  const Rule* rule = a.rule();
  if (rule == nullptr || st.item_of[i] < 0) return;
  const auto k = static_cast<size_t>(st.item_of[i]);
  const Decision& d = st.pending.decisions[k];
  const bool admitted = d.allowed && st.pending.shadow_denied[k] == 0;
  ds.code = d.allowed ? Code::kOk : Code::kOverLimit;
  ds.current_limit = CurrentLimit{rule->requests_per_unit, rule->unit, rule->name};
  ds.limit_remaining = admitted ? clamp_u32(d.remaining) : 0;
  ds.duration_until_reset_seconds = http::ceil_seconds(d.reset_after);
  if (d.reason == DecisionReason::kStoreFailedOpen || d.reason == DecisionReason::kStoreFailedClosed) return;
  const HitStats h = hit_stats(rule->requests_per_unit, options_.near_limit_ratio, static_cast<uint64_t>(st.hits[i]),
                               admitted, d.remaining, rule->shadow_mode);
  counters_for(st, call.request.domain, i, h.total_hits)->add(h);
}

// The limit headers of the closest descriptor (when enabled): the configured triple, and with
// ietf_headers also RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-headers: its
// quota per window, then what is left and when it resets; named by the rule's name, else its
// key).
void RateLimitService::add_headers(const DescriptorStatus& closest, const Rule& rule, RateLimitResponse& resp) const {
  const CurrentLimit& limit = *closest.current_limit;
  const http::LimitState state{limit.requests_per_unit, closest.limit_remaining,
                               closest.duration_until_reset_seconds.value_or(0)};
  std::vector<http::Field> fields;
  http::append_triple(fields, {options_.limit_header, options_.remaining_header, options_.reset_header}, state);
  if (options_.ietf_headers) {
    const http::PolicyInfo policy{limit.name.empty() ? rule.full_key : limit.name, limit.requests_per_unit,
                                  Micros{unit_seconds(limit.unit) * 1'000'000}};
    http::append_ietf_fields(fields, policy, state);
  }
  for (http::Field& f : fields) resp.response_headers_to_add.push_back({std::string(f.name), std::move(f.value)});
}

void RateLimitService::finish(Call& call) {
  if (!call.status.is_ok()) return;
  const Call::State& st = *call.state_;
  RateLimitResponse& resp = call.response;
  const size_t n = call.request.descriptors.size();
  resp.statuses.resize(n);
  Tally tally;
  for (size_t i = 0; i < n; ++i) {
    answer_descriptor(call, i, resp.statuses[i]);
    if (resp.statuses[i].current_limit) tally.add(resp.statuses[i], *st.applied[i].rule());
  }
  resp.overall_code = tally.overall(options_.shadow_mode);
  if (options_.response_headers && tally.closest != nullptr) add_headers(*tally.closest, *tally.closest_rule, resp);
}

}  // namespace ratelimit::rls
