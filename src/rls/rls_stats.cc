// rls_stats.cc — per-key hit counters and their Prometheus rendering (see rls_stats.h); the
// families (names, types, help) are declared in the one table, src/common/metric_families.h.
#include "rls_stats.h"

#include <array>
#include <vector>

#include "metric_families.h"

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


namespace {

// The five per-rule counters, each with its family in the one table (metric_families.h).
struct Stat {
  const metrics::Family& family;
  std::atomic<uint64_t> HitCounters::*field;
};

constexpr std::array<Stat, 5> kStats = {{
    {metrics::kRlsTotalHits, &HitCounters::total_hits},
    {metrics::kRlsOverLimit, &HitCounters::over_limit},
    {metrics::kRlsNearLimit, &HitCounters::near_limit},
    {metrics::kRlsWithinLimit, &HitCounters::within_limit},
    {metrics::kRlsShadowMode, &HitCounters::shadow_mode},
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
    metrics::append_family_header(out, s.family);
    for (const auto& [labels, c] : rows) {
      out += s.family.name;
      out += '{';
      out += labels;
      out += "} ";
      out += std::to_string((c->*s.field).load(std::memory_order_relaxed));
      out += '\n';
    }
  }
  metrics::append_family(out, metrics::kRlsRequestKeys, request_keys);
  metrics::append_family(out, metrics::kRlsRequestKeysMax, max_request_keys_);
  metrics::append_family(out, metrics::kRlsOverflowHits, overflow_hits());
}

}  // namespace ratelimit::rls
