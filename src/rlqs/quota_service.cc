// quota_service.cc — RLQS buckets and their clients (see quota_service.h).
// Invariants: buckets_ and recency_ hold the same keys; recency_ is in order of last report,
// newest first; buckets_.size() <= max_buckets after every report().
#include "quota_service.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "metric_families.h"

namespace ratelimit::rlqs {
namespace {

// A bucket's key in the table: the domain and each pair, each length-prefixed (no separator can
// be forged by a key or value).
void append_field(std::string& out, std::string_view s) {
  out += std::to_string(s.size());
  out += ':';
  out += s;
}

std::string table_key(std::string_view domain, const BucketKey& id) {
  std::string k;
  append_field(k, domain);
  for (const auto& [key, value] : id) {
    append_field(k, key);
    append_field(k, value);
  }
  return k;
}

int64_t as_count(uint64_t v) {
  // Above int64's range is as absurd as anything above fair_share's bound: refused there.
  return v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                        : static_cast<int64_t>(v);
}

// A blanket answer (allow/deny rules): only the TTL follows the client's interval (this
// report's, else the configured one).
fair_share::Assignment blanket(fair_share::Assignment::Kind kind, int64_t elapsed_us, int64_t default_interval_s) {
  fair_share::Assignment a;
  a.kind = kind;
  a.ttl_s = fair_share::assignment_ttl_s(elapsed_us >= 1'000'000 ? elapsed_us / 1'000'000 : default_interval_s);
  return a;
}

}  // namespace

QuotaService::QuotaService(std::shared_ptr<const QuotaRules> rules, QuotaOptions options)
    : options_(options),
      clock_(options.clock != nullptr ? *options.clock : MonotonicClock::instance()),
      rules_(std::move(rules)) {}

void QuotaService::set_rules(std::shared_ptr<const QuotaRules> rules) {
  MutexLock lock(mu_);
  rules_ = std::move(rules);
}

std::shared_ptr<const QuotaRules> QuotaService::rules() const {
  MutexLock lock(mu_);
  return rules_;
}

uint64_t QuotaService::new_client() {
  MutexLock lock(mu_);
  return next_client_++;
}

bool QuotaService::valid_bucket(const BucketKey& id) {
  if (id.empty() || id.size() > kMaxBucketPairs) return false;
  size_t bytes = 0;
  for (const auto& [key, value] : id) {
    if (key.empty() || value.empty()) return false;
    bytes += key.size() + value.size();
  }
  return bytes <= kMaxBucketBytes;
}

void QuotaService::report(uint64_t client, std::string_view domain, std::span<const BucketReport> reports,
                          std::vector<BucketAnswer>& out) {
  out.clear();
  const int64_t now_us = clock_.now().count();
  MutexLock lock(mu_);
  forget_idle(now_us);
  for (size_t i = 0; i < reports.size(); ++i) {
    const BucketReport& r = reports[i];
    const int64_t allowed = as_count(r.allowed);
    const int64_t denied = as_count(r.denied);
    if (!valid_bucket(r.id) || !fair_share::report_demand(allowed, denied, r.elapsed_us).ok()) {
      ++stats_.ignored;
      continue;
    }
    const QuotaAction& action = rules_->find(domain, r.id);
    ++stats_.reports;
    if (action.kind == QuotaAction::Kind::kAllow) {
      out.push_back({i, blanket(fair_share::Assignment::Kind::kAllowAll, r.elapsed_us, rules_->reporting_interval_s)});
      continue;
    }
    if (action.kind == QuotaAction::Kind::kDeny) {
      out.push_back({i, blanket(fair_share::Assignment::Kind::kDenyAll, r.elapsed_us, rules_->reporting_interval_s)});
      continue;
    }
    Entry& e = touch(table_key(domain, r.id), domain, r.id);
    e.capacity_mrps = action.capacity_mrps;
    auto a = e.shares.report(client, allowed, denied, r.elapsed_us, action.capacity_mrps, now_us,
                             rules_->reporting_interval_s);
    if (a.ok()) out.push_back({i, *a});  // checked above: report_demand accepted these counts
  }
  while (buckets_.size() > options_.max_buckets) {
    buckets_.erase(recency_.back());
    recency_.pop_back();
    ++stats_.forgotten;
  }
}

QuotaService::Entry& QuotaService::touch(const std::string& key, std::string_view domain, const BucketKey& id) {
  auto it = buckets_.find(key);
  if (it != buckets_.end()) {
    recency_.splice(recency_.begin(), recency_, it->second.recency);
    return it->second;
  }
  recency_.push_front(key);
  Entry& e = buckets_[key];
  e.recency = recency_.begin();
  e.domain = std::string(domain);
  e.id = id;
  return e;
}

void QuotaService::forget_idle(int64_t now_us) {
  while (!recency_.empty()) {
    auto it = buckets_.find(recency_.back());
    if (it->second.shares.busy_until_us() > now_us) return;
    buckets_.erase(it);
    recency_.pop_back();
    ++stats_.forgotten;
  }
}

std::vector<BucketClients> QuotaService::local_clients() {
  const int64_t now = now_us();
  MutexLock lock(mu_);
  std::vector<BucketClients> out;
  for (auto& [key, e] : buckets_) {
    std::vector<fair_share::RemoteClient> clients = e.shares.local(now);
    if (!clients.empty()) out.push_back({key, std::move(clients)});
  }
  return out;
}

void QuotaService::set_remote(const std::string& key, std::vector<fair_share::RemoteClient> remote) {
  MutexLock lock(mu_);
  auto it = buckets_.find(key);
  if (it != buckets_.end()) it->second.shares.set_remote(std::move(remote));
}

QuotaStats QuotaService::stats() const {
  MutexLock lock(mu_);
  QuotaStats s = stats_;
  s.buckets = buckets_.size();
  return s;
}

std::vector<BucketView> QuotaService::buckets(size_t max) const {
  MutexLock lock(mu_);
  std::vector<BucketView> out;
  for (const std::string& key : recency_) {
    if (out.size() >= max) break;
    const Entry& e = buckets_.at(key);
    out.push_back({e.domain, e.id, e.shares.clients(), e.shares.known_demand(), e.shares.assigned(), e.capacity_mrps,
                   e.shares.remote_clients()});
  }
  return out;
}

namespace {

// `{domain="...",bucket="k=v,k=v"}`.
std::string labels_of(const BucketView& b) {
  std::string l = "{domain=\"";
  metrics::append_label_value(l, b.domain);
  l += "\",bucket=\"";
  for (size_t i = 0; i < b.id.size(); ++i) {
    if (i > 0) l += ',';
    metrics::append_label_value(l, b.id[i].first);
    l += '=';
    metrics::append_label_value(l, b.id[i].second);
  }
  return l + "\"}";
}

std::string rps(int64_t mrps) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(mrps / 1000), static_cast<long long>(mrps % 1000));
  return buf;
}

}  // namespace

void QuotaService::render_metrics(std::string& out, size_t max_buckets) const {
  const QuotaStats s = stats();
  metrics::append_family(out, metrics::kRlqsBuckets, s.buckets);
  metrics::append_family(out, metrics::kRlqsReports, s.reports);
  metrics::append_family(out, metrics::kRlqsIgnored, s.ignored);
  metrics::append_family(out, metrics::kRlqsForgotten, s.forgotten);
  const std::vector<BucketView> views = buckets(max_buckets);
  std::vector<std::string> labels;
  labels.reserve(views.size());
  for (const BucketView& b : views) labels.push_back(labels_of(b));
  const auto family = [&](const metrics::Family& f, auto value) {
    metrics::append_family_header(out, f);
    for (size_t i = 0; i < views.size(); ++i) out += std::string(f.name) + labels[i] + ' ' + value(views[i]) + '\n';
  };
  family(metrics::kRlqsBucketClients, [](const BucketView& b) { return std::to_string(b.clients); });
  family(metrics::kRlqsBucketDemand, [](const BucketView& b) { return rps(b.demand_mrps); });
  family(metrics::kRlqsBucketAssigned, [](const BucketView& b) { return rps(b.assigned_mrps); });
  family(metrics::kRlqsBucketLimit, [](const BucketView& b) { return rps(b.capacity_mrps); });
  family(metrics::kRlqsBucketRemoteClients, [](const BucketView& b) { return std::to_string(b.remote_clients); });
}

}  // namespace ratelimit::rlqs
