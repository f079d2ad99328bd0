// config_rlqs.cc — the `rlqs:` section: the rules of Envoy's Rate Limit Quota Service
// (rlqs::QuotaRules, quota_rules.h), with a precise "file:line: reason" for anything wrong.
//
//   rlqs:
//     buckets:                     # first match wins
//       - match: {name: api}       # pairs the bucket_id must hold ("*": any value)
//         domain: envoy            # optional: any domain when absent
//         limit: 300               # a global limit, divided among the Envoys by demand
//         unit: second             # second | minute | hour | day
//       - match: {name: internal}
//         action: allow            # or deny (ALLOW_ALL / DENY_ALL), instead of limit/unit
//     unmatched: allow             # allow (default) | deny | {limit: N, unit: U}
//     max_buckets: 100000          # buckets tracked at once (the least recently reported go)
//     reporting_interval: 1s       # the Envoys' reporting_interval: a first assignment's TTL
//     sync_interval: 500ms         # store: redis — how often replicas exchange their demands
//
// Invariants: every limit gives a capacity fair_share accepts (capacity_mrps); match keys and
// values are non-empty, within the bucket_id bounds, and no key is given twice (a YAML map).
#include <algorithm>

#include "config_sections.h"
#include "ratelimit/fair_share.h"

namespace ratelimit::server {
namespace {

using config_detail::Parser;

// limit + unit (both required) into a kLimit action.
Status parse_limit(const Parser& p, const YAML::Node& n, const std::string& what, rlqs::QuotaAction& out) {
  if (!n["limit"] || !n["unit"]) return p.error(n, what + " needs both limit and unit (or action: allow | deny)");
  out.kind = rlqs::QuotaAction::Kind::kLimit;
  RL_TRY_ASSIGN(out.limit, p.integer(n["limit"], what + ".limit", 0, 1'000'000'000'000));
  RL_TRY_ASSIGN(out.unit_s, p.one_of<int64_t>(n["unit"], what + ".unit",
                                               {{"second", 1}, {"minute", 60}, {"hour", 3600}, {"day", 86400}}));
  auto capacity = fair_share::capacity_mrps(out.limit, out.unit_s);
  if (!capacity) return p.error(n["limit"], what + ": " + capacity.status().message());
  out.capacity_mrps = *capacity;
  return {};
}

Status parse_action(const Parser& p, const YAML::Node& n, const std::string& what, rlqs::QuotaAction& out) {
  if (n["action"]) {
    if (n["limit"] || n["unit"]) return p.error(n["action"], what + ": action and limit/unit are exclusive");
    RL_TRY_ASSIGN(out.kind, p.one_of<rlqs::QuotaAction::Kind>(n["action"], what + ".action",
                                                               {{"allow", rlqs::QuotaAction::Kind::kAllow},
                                                                {"deny", rlqs::QuotaAction::Kind::kDeny}}));
    return {};
  }
  return parse_limit(p, n, what, out);
}

Result<rlqs::QuotaRule> parse_rule(const Parser& p, const YAML::Node& n, size_t index) {
  const std::string what = "rlqs.buckets[" + std::to_string(index) + "]";
  if (!n.IsMap()) return p.error(n, what + " must be a map (match, and limit/unit or action)");
  RL_TRY(p.check_map(n, what, {"match", "domain", "limit", "unit", "action"}));
  rlqs::QuotaRule r;
  r.line = n.Mark().line + 1;
  if (n["domain"]) {
    RL_TRY_ASSIGN(r.domain, p.string(n["domain"], what + ".domain"));
    if (r.domain.empty()) return p.error(n["domain"], what + ".domain must not be empty (leave it out for any domain)");
  }
  const YAML::Node m = n["match"];
  if (!m || !m.IsMap() || m.size() == 0) {
    return p.error(m ? m : n, what + ".match must be a map of bucket_id keys to values (at least one)");
  }
  for (const auto& kv : m) {
    std::string key;
    std::string value;
    RL_TRY_ASSIGN(key, p.string(kv.first, what + ".match key"));
    RL_TRY_ASSIGN(value, p.string(kv.second, what + ".match." + key));
    if (key.empty() || value.empty()) return p.error(kv.first, what + ".match keys and values must not be empty");
    if (std::any_of(r.match.begin(), r.match.end(), [&](const auto& e) { return e.first == key; })) {
      return p.error(kv.first, what + ".match names '" + key + "' twice");
    }
    r.match.emplace_back(std::move(key), std::move(value));
  }
  std::sort(r.match.begin(), r.match.end());
  if (!rlqs::QuotaService::valid_bucket(r.match)) {
    return p.error(m, what + ".match is larger than any bucket_id ratelimitd accepts (" +
                          std::to_string(rlqs::kMaxBucketPairs) + " pairs, " + std::to_string(rlqs::kMaxBucketBytes) +
                          " bytes)");
  }
  RL_TRY(parse_action(p, n, what, r.action));
  return r;
}

}  // namespace

Status parse_rlqs(const Parser& p, const YAML::Node& n, RlqsConfig& out) {
  if (!n.IsMap()) {
    return p.error(n, "rlqs must be a map (buckets, unmatched, max_buckets, reporting_interval, sync_interval)");
  }
  RL_TRY(p.check_map(n, "rlqs", {"buckets", "unmatched", "max_buckets", "reporting_interval", "sync_interval"}));
  auto rules = std::make_shared<rlqs::QuotaRules>();
  if (const YAML::Node b = n["buckets"]) {
    RL_TRY(p.sequence(b, "rlqs.buckets"));
    for (size_t i = 0; i < b.size(); ++i) {
      rlqs::QuotaRule r;
      RL_TRY_ASSIGN(r, parse_rule(p, b[i], i));
      rules->rules.push_back(std::move(r));
    }
  }
  if (const YAML::Node u = n["unmatched"]) {
    if (u.IsMap()) {
      RL_TRY(p.check_map(u, "rlqs.unmatched", {"limit", "unit"}));
      RL_TRY(parse_limit(p, u, "rlqs.unmatched", rules->unmatched));
    } else {
      RL_TRY_ASSIGN(rules->unmatched.kind, p.one_of<rlqs::QuotaAction::Kind>(
                                               u, "rlqs.unmatched", {{"allow", rlqs::QuotaAction::Kind::kAllow},
                                                                     {"deny", rlqs::QuotaAction::Kind::kDeny}}));
    }
  }
  if (const YAML::Node m = n["max_buckets"]) {
    int64_t v = 0;
    RL_TRY_ASSIGN(v, p.integer(m, "rlqs.max_buckets", 1, 10'000'000));
    out.max_buckets = static_cast<size_t>(v);
  }
  if (const YAML::Node i = n["reporting_interval"]) {
    Micros d{0};
    RL_TRY_ASSIGN(d, p.duration(i, "rlqs.reporting_interval"));
    // Envoy reports in whole seconds; a TTL is whole seconds too.
    if (d.count() % 1'000'000 != 0 || d < Micros{1'000'000} || d > Micros{86'400'000'000}) {
      return p.error(i, "rlqs.reporting_interval must be whole seconds from 1s to 1 day");
    }
    rules->reporting_interval_s = d.count() / 1'000'000;
  }
  if (const YAML::Node i = n["sync_interval"]) {
    Micros d{0};
    RL_TRY_ASSIGN(d, p.duration(i, "rlqs.sync_interval"));
    if (d < Micros{10'000} || d > Micros{60'000'000}) return p.error(i, "rlqs.sync_interval must be from 10ms to 60s");
    out.sync_interval = std::chrono::duration_cast<std::chrono::milliseconds>(d);
  }
  out.rules = std::move(rules);
  return {};
}

}  // namespace ratelimit::server
