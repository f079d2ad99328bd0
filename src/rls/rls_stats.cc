// rls_stats.cc — per-key hit counters and their Prometheus rendering (see rls_stats.h).
#include "rls_stats.h"

#include <array>
#include <vector>

namespace ratelimit::rls {

void HitCounters::add(const HitStats& h) {
  constexpr auto r = std::memory_order_relaxed;
  if (h.total_hits) total_hits.fetch_add(h.total_hits, r);
  if (h.over_limit) over_limit.fetch_add(h.over_limit, r);
  if (h.near_limit) near_limit.fetch_add(h.near_limit, r);
  if (h.within_limit) within_limit.fetch_add(h.within_limit, r);
  if (h.shadow_mode) shadow_mode.fetch_add(h.shadow_mode, r);
}

RuleStats::RuleStats(size_t max_request_keys) : max_request_keys_(max_request_keys) {}

HitCounters* RuleStats::find_or_add(std::string_view domain, std::string_view key, bool request) {
  std::string id = std::to_string(domain.size());
  id += ':';
  id += domain;
  id += key;
  MutexLock lock(mu_);
  auto it = entries_.find(id);
  if (it != entries_.end()) return it->second.counters.get();
  if (request) {
    if (request_keys_ >= max_request_keys_) return nullptr;
    ++request_keys_;
  }
  Entry e{std::string(domain), std::string(key), std::make_unique<HitCounters>()};
  HitCounters* c = e.counters.get();
  entries_.emplace(std::move(id), std::move(e));
  return c;
}

HitCounters* RuleStats::configured(std::string_view domain, std::string_view key) {
  return find_or_add(domain, key, false);
}

HitCounters* RuleStats::request_key(std::string_view domain, std::string_view key) {
  return find_or_add(domain, key, true);
}

size_t RuleStats::request_keys() const {
  MutexLock lock(mu_);
  return request_keys_;
}

void append_label_value(std::string& out, std::string_view value) {
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
}

namespace {

struct Stat {
  const char* name;
  const char* help;
  std::atomic<uint64_t> HitCounters::*field;
};

constexpr std::array<Stat, 5> kStats = {{
    {"ratelimit_service_rate_limit_total_hits_total",
     "Hits (units) of requests that matched the rule, by metric key.", &HitCounters::total_hits},
    {"ratelimit_service_rate_limit_over_limit_total",
     "Hits over the rule's limit (denied, or would have been in shadow mode).",
     &HitCounters::over_limit},
    {"ratelimit_service_rate_limit_near_limit_total",
     "Hits above NEAR_LIMIT_RATIO of the limit but within it.", &HitCounters::near_limit},
    {"ratelimit_service_rate_limit_within_limit_total", "Hits within the limit.",
     &HitCounters::within_limit},
    {"ratelimit_service_rate_limit_shadow_mode_total",
     "Hits over the limit of a rule in shadow_mode (answered OK).", &HitCounters::shadow_mode},
}};

// domain="d",key1="k_v",key2="k2"
std::string labels_of(const std::string& domain, const std::string& key) {
  std::string l = "domain=\"";
  append_label_value(l, domain);
  l += '"';
  size_t from = 0, n = 0;
  while (from <= key.size() && !key.empty()) {
    const size_t dot = key.find('.', from);
    const std::string_view part =
        std::string_view(key).substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    l += ",key";
    l += std::to_string(++n);
    l += "=\"";
    append_label_value(l, part);
    l += '"';
    if (dot == std::string::npos) break;
    from = dot + 1;
  }
  return l;
}

void family_header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

}  // namespace

void RuleStats::render(std::string& out) const {
  std::vector<std::pair<std::string, const HitCounters*>> rows;
  size_t request_keys = 0;
  {
    MutexLock lock(mu_);
    rows.reserve(entries_.size());
    for (const auto& [id, e] : entries_) rows.emplace_back(labels_of(e.domain, e.key), e.counters.get());
    request_keys = request_keys_;
  }
  for (const Stat& s : kStats) {
    family_header(out, s.name, "counter", s.help);
    for (const auto& [labels, c] : rows) {
      out += s.name;
      out += '{';
      out += labels;
      out += "} ";
      out += std::to_string((c->*s.field).load(std::memory_order_relaxed));
      out += '\n';
    }
  }
  family_header(out, "ratelimitd_rls_stats_request_keys", "gauge",
                "Metric keys built from request values (detailed_metric, value_to_metric, limit "
                "overrides), capped.");
  out += "ratelimitd_rls_stats_request_keys " + std::to_string(request_keys) + "\n";
  family_header(out, "ratelimitd_rls_stats_request_keys_max", "gauge",
                "The cap on metric keys built from request values.");
  out += "ratelimitd_rls_stats_request_keys_max " + std::to_string(max_request_keys_) + "\n";
  family_header(out, "ratelimitd_rls_stats_overflow_hits_total", "counter",
                "Hits counted under the rule's own key because the request-key cap was reached.");
  out += "ratelimitd_rls_stats_overflow_hits_total " + std::to_string(overflow_hits()) + "\n";
}

}  // namespace ratelimit::rls
