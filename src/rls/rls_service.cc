// rls_service.cc — ShouldRateLimit on the decision service (see rls_service.h).
//
// A Call runs one or two phases through DecisionService::decide: the decision itself, preceded
// with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT by a check of every descriptor (what would pass
// its limit). Each phase completes inline (memory store) or on a store thread; the same two
// functions, step() (start a phase) and after() (take its result), drive both paths, so an
// inline and an asynchronous answer cannot differ. The serving RuleSet and, per rule, its
// service::Rule and its statistics counters are one immutable Snapshot, published whole by the
// view's owner; a Call caches it (SnapshotView) and keeps it until its next request, so an
// asynchronous answer never outlives the rules it points into.
#include "rls_service.h"

#include <algorithm>
#include <limits>

#include "ratelimit/hit_counting.h"
#include "ratelimit/http.h"
#include "ratelimit/policy.h"

namespace ratelimit::rls {

ServiceOptions ServiceOptions::from(const EnvoySettings& s) {
  ServiceOptions o;
  o.near_limit_ratio = s.near_limit_ratio;
  o.shadow_mode = s.shadow_mode;
  o.stop_increment_when_over_limit = s.stop_cache_key_increment_when_overlimit;
  o.response_headers = s.limit_response_headers_enabled;
  o.limit_header = s.limit_limit_header;
  o.remaining_header = s.limit_remaining_header;
  o.reset_header = s.limit_reset_header;
  return o;
}

struct RateLimitService::Snapshot {
  struct PerRule {
    explicit PerRule(service::Rule r) : rule(std::move(r)) {}
    service::Rule rule;
    // The rule's own statistics key, looked up on first use (the domain is the request's).
    std::atomic<HitCounters*> stats{nullptr};
  };
  std::shared_ptr<const RuleSet> rules;
  uint64_t generation = 0;
  service::RuleCounters* outcomes = nullptr;  // every rule's, limit overrides' too
  std::unordered_map<const Rule*, std::unique_ptr<PerRule>> per_rule;
  service::Snapshot service;  // no named rules; shadow_all stays false (SHADOW_MODE is overall)
};

struct Call::State {
  struct Phase final : service::Pending {
    Call* call = nullptr;
    void resume() override { resume_call(*call); }
  };
  static void resume_call(Call& c);
  RateLimitService* service = nullptr;
  Phase pending;
  service::SnapshotView<RateLimitService::Snapshot>::Cache cache;
  const RateLimitService::Snapshot* snap = nullptr;
  std::vector<Entry> entries;
  std::vector<Descriptor> descriptors;
  std::vector<Applied> applied;
  std::vector<int64_t> hits;          // per descriptor
  std::vector<int32_t> item_of;       // per descriptor: its item, or -1
  std::vector<service::Item> items;
  std::vector<service::Rule> overrides;  // the service rules of limit overrides (reserved)
  std::vector<int64_t> item_hits, counted;
  std::vector<uint8_t> would_exceed;
  bool checking = false;  // the first phase of STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT
};

Call::Call() : state_(std::make_unique<State>()) { state_->pending.call = this; }
Call::~Call() = default;

struct RateLimitService::Own {
  std::shared_ptr<const Snapshot> snapshot;
};

std::shared_ptr<const RateLimitService::Snapshot> RateLimitService::snapshot(
    std::shared_ptr<const RuleSet> rules, uint64_t generation, service::RuleCounters* outcomes) {
  auto s = std::make_shared<Snapshot>();
  s->generation = generation;
  s->outcomes = outcomes;
  for (const auto& r : rules->rules()) {
    if (!r->policy) continue;  // unlimited: never decided
    s->per_rule.emplace(r.get(), std::make_unique<RateLimitService::Snapshot::PerRule>(
                                     service::Rule{*r->policy, r->shadow_mode, outcomes}));
  }
  s->rules = std::move(rules);
  return s;
}

namespace {

// The stats key without its "domain." prefix (every key starts with the request's domain).
std::string_view without_domain(std::string_view key, std::string_view domain) {
  if (key.size() > domain.size() && key.starts_with(domain) && key[domain.size()] == '.') {
    return key.substr(domain.size() + 1);
  }
  return key;
}

// The shape rules of envoy.service.ratelimit.v3's validation annotations, which Envoy never
// breaks and the plain request structs cannot express; checked here, not in a front-end, so
// that gRPC and /json refuse the same requests with the same words.
Status validate_descriptors(const RateLimitRequest& req) {
  // The messages are built only for a refusal: this runs on every call.
  const auto where = [](size_t i) { return "descriptor " + std::to_string(i); };
  for (size_t i = 0; i < req.descriptors.size(); ++i) {
    const std::vector<RequestEntry>& entries = req.descriptors[i].entries;
    if (entries.empty()) return Status::invalid_argument(where(i) + " has no entries");
    if (entries.size() > kMaxEntries) {
      return Status::invalid_argument(where(i) + " has " + std::to_string(entries.size()) +
                                      " entries (at most " + std::to_string(kMaxEntries) + ")");
    }
    for (size_t j = 0; j < entries.size(); ++j) {
      if (entries[j].key.empty()) {
        return Status::invalid_argument(where(i) + " entry " + std::to_string(j) +
                                        ": the key must not be empty");
      }
      if (entries[j].value.empty()) {
        return Status::invalid_argument(where(i) + " entry " + std::to_string(j) + " (key '" +
                                        entries[j].key + "'): the value must not be empty");
      }
    }
  }
  return {};
}

uint32_t clamp_u32(int64_t v) {
  if (v <= 0) return 0;
  return v > int64_t{std::numeric_limits<uint32_t>::max()} ? std::numeric_limits<uint32_t>::max()
                                                            : static_cast<uint32_t>(v);
}

}  // namespace

RateLimitService::RateLimitService(service::DecisionService& decisions,
                                   service::SnapshotView<Snapshot> rules, ServiceOptions options,
                                   RuleStats& stats)
    : decisions_(decisions), options_(std::move(options)), stats_(stats), view_(std::move(rules)) {}

RateLimitService::RateLimitService(service::DecisionService& decisions, RuleSource& rules,
                                   ServiceOptions options, RuleStats& stats,
                                   service::RuleCounters* outcomes)
    : decisions_(decisions),
      options_(std::move(options)),
      stats_(stats),
      source_(&rules),
      outcomes_(outcomes),
      own_(std::make_unique<service::SnapshotCell<Own>>(std::make_shared<const Own>(
          Own{snapshot(rules.current(), rules.generation(), outcomes)}))),
      view_(own_->view(&Own::snapshot)) {}

RateLimitService::~RateLimitService() = default;

void RateLimitService::refresh() {
  if (own_ == nullptr) return;  // the owner of the view publishes
  MutexLock lock(refresh_mu_);
  const uint64_t g = source_->generation();
  if (own_->get()->snapshot->generation == g) return;
  own_->publish(std::make_shared<const Own>(Own{snapshot(source_->current(), g, outcomes_)}));
}

uint64_t RateLimitService::generation() const { return view_.get()->generation; }

std::string RateLimitService::dump() const { return view_.get()->rules->dump(); }

bool RateLimitService::should_rate_limit(Call& call) {
  Call::State& st = *call.state_;
  st.service = this;
  call.status = Status();
  call.response.clear();
  const RateLimitRequest& req = call.request;
  if (req.domain.empty()) {
    call.status = Status::invalid_argument("rate limit domain must not be empty");
    return true;
  }
  if (req.descriptors.empty()) {
    call.status = Status::invalid_argument("rate limit descriptor list must not be empty");
    return true;
  }
  const size_t n = req.descriptors.size();
  if (n > kMaxDescriptors) {
    call.status = Status::invalid_argument("at most " + std::to_string(kMaxDescriptors) +
                                           " descriptors per request, got " + std::to_string(n));
    return true;
  }
  if (Status s = validate_descriptors(req); !s.is_ok()) {
    call.status = std::move(s);
    return true;
  }
  const Snapshot& snap = view_.get(st.cache);
  st.snap = &snap;

  size_t total = 0;
  for (const RequestDescriptor& d : req.descriptors) total += d.entries.size();
  st.entries.clear();
  st.entries.reserve(total);  // the spans below point into it: no reallocation after this
  st.descriptors.resize(n);
  st.hits.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const RequestDescriptor& d = req.descriptors[i];
    const size_t from = st.entries.size();
    for (const RequestEntry& e : d.entries) st.entries.push_back({e.key, e.value});
    st.descriptors[i].entries = std::span<const Entry>(st.entries.data() + from, d.entries.size());
    st.descriptors[i].limit = d.limit;
    const uint64_t hits = d.hits_addend ? *d.hits_addend : std::max<uint64_t>(1, req.hits_addend);
    if (hits > static_cast<uint64_t>(kMaxCost)) {
      call.status = Status::invalid_argument("descriptor " + std::to_string(i) + ": hits_addend " +
                                             std::to_string(hits) + " is above " +
                                             std::to_string(kMaxCost));
      return true;
    }
    st.hits[i] = static_cast<int64_t>(hits);
  }
  if (Status s = snap.rules->resolve(req.domain, st.descriptors, st.applied); !s.is_ok()) {
    call.status = std::move(s);
    return true;
  }

  st.items.clear();
  st.item_hits.clear();
  st.item_of.assign(n, -1);
  st.overrides.clear();
  st.overrides.reserve(n);  // items point into it
  for (size_t i = 0; i < n; ++i) {
    const Applied& a = st.applied[i];
    const Rule* rule = a.rule();
    if (rule == nullptr || a.unlimited || !rule->policy) continue;
    const service::Rule* srule = nullptr;
    if (a.override_rule) {
      st.overrides.push_back(service::Rule{*rule->policy, false, snap.outcomes});
      srule = &st.overrides.back();
    } else {
      srule = &snap.per_rule.at(rule)->rule;
    }
    st.item_of[i] = static_cast<int32_t>(st.items.size());
    st.items.push_back({srule, a.cache_key, st.hits[i], StoreOp::Kind::kAcquire});
    st.item_hits.push_back(st.hits[i]);
  }
  st.checking = options_.stop_increment_when_over_limit && !st.items.empty();
  if (st.items.empty()) {
    finish(call);
    return true;
  }
  prepare(st);
  for (;;) {
    if (!step(call)) return false;
    if (!after(call)) break;
  }
  finish(call);
  return true;
}

// Sets each item's kind and cost for the phase about to run: the check phase peeks at the
// descriptor's hits; the decision consumes item_hits (after the check: the counted hits). A
// policy that counts every hit takes cost 0 as a check; the `algorithm` extension's policies
// take a 0 as a peek at cost 1.
void RateLimitService::prepare(Call::State& st) {
  for (size_t k = 0; k < st.items.size(); ++k) {
    service::Item& it = st.items[k];
    const int64_t cost = st.item_hits[k];
    const bool every_hit = it.rule->policy.counts_every_hit();
    if (st.checking) {
      it.kind = StoreOp::Kind::kPeek;
      it.cost = every_hit ? cost : std::max<int64_t>(cost, 1);
    } else if (cost == 0 && !every_hit) {
      it.kind = StoreOp::Kind::kPeek;
      it.cost = 1;
    } else {
      it.kind = StoreOp::Kind::kAcquire;
      it.cost = cost;
    }
  }
}

bool RateLimitService::step(Call& call) {
  Call::State& st = *call.state_;
  const Atomicity atomicity = st.snap->rules->all_or_nothing(call.request.domain) ? Atomicity::kAllOrNothing
                                                                                : Atomicity::kIndependent;
  return decisions_.decide(st.snap->service, st.items, atomicity, st.pending);
}

bool RateLimitService::after(Call& call) {
  Call::State& st = *call.state_;
  if (!st.pending.status.is_ok()) {
    call.status = st.pending.status;
    return false;
  }
  if (!st.checking) return false;
  const size_t m = st.items.size();
  st.would_exceed.resize(m);
  st.counted.resize(m);
  for (size_t k = 0; k < m; ++k) {
    st.would_exceed[k] = !st.pending.decisions[k].allowed || st.pending.shadow_denied[k] ? 1 : 0;
  }
  algo::hits_to_count_when_stopping(st.item_hits, st.would_exceed, st.counted);
  st.checking = false;
  for (size_t k = 0; k < m; ++k) st.item_hits[k] = st.counted[k];
  prepare(st);
  return true;
}

void Call::State::resume_call(Call& c) {
  RateLimitService& svc = *c.state_->service;
  for (;;) {
    if (!svc.after(c)) break;
    if (!svc.step(c)) return;
  }
  svc.finish(c);
  c.done();
}

void RateLimitService::finish(Call& call) {
  Call::State& st = *call.state_;
  if (!call.status.is_ok()) return;
  const RateLimitRequest& req = call.request;
  RateLimitResponse& resp = call.response;
  const size_t n = req.descriptors.size();
  resp.statuses.resize(n);
  constexpr uint32_t kMax = std::numeric_limits<uint32_t>::max();
  size_t failed = 0, quota_total = 0, quota_failed = 0;
  const DescriptorStatus* closest = nullptr;
  const Rule* closest_rule = nullptr;
  uint32_t closest_remaining = kMax;
  for (size_t i = 0; i < n; ++i) {
    DescriptorStatus& ds = resp.statuses[i];
    ds = DescriptorStatus{};
    const Applied& a = st.applied[i];
    if (a.unlimited) {
      ds.code = Code::kOk;
      ds.limit_remaining = kMax;
      continue;
    }
    const Rule* rule = a.rule();
    if (rule == nullptr || st.item_of[i] < 0) {
      ds.code = Code::kOk;
      continue;
    }
    const auto k = static_cast<size_t>(st.item_of[i]);
    const Decision& d = st.pending.decisions[k];
    const bool shadow_denied = st.pending.shadow_denied[k] != 0;
    ds.code = d.allowed ? Code::kOk : Code::kOverLimit;
    ds.current_limit = CurrentLimit{rule->requests_per_unit, rule->unit, rule->name};
    ds.limit_remaining = d.allowed && !shadow_denied ? clamp_u32(d.remaining) : 0;
    ds.duration_until_reset_seconds = (d.reset_after.count() + 999'999) / 1'000'000;

    if (d.reason != DecisionReason::kStoreFailedOpen && d.reason != DecisionReason::kStoreFailedClosed) {
      const HitStats h = hit_stats(rule->requests_per_unit, options_.near_limit_ratio,
                                   static_cast<uint64_t>(st.hits[i]), d.allowed && !shadow_denied,
                                   d.remaining, rule->shadow_mode);
      HitCounters* c = nullptr;
      const bool own_key = !a.override_rule && !a.detailed && a.stats_key == rule->full_key;
      if (own_key) {
        auto& slot = st.snap->per_rule.at(rule)->stats;
        c = slot.load(std::memory_order_acquire);
        if (c == nullptr) {
          c = stats_.configured(req.domain, without_domain(sanitize_stat_name(rule->full_key), req.domain));
          slot.store(c, std::memory_order_release);
        }
      } else {
        c = stats_.request_key(req.domain, without_domain(sanitize_stat_name(a.stats_key), req.domain));
        if (c == nullptr) {
          stats_.count_overflow(h.total_hits);
          c = a.override_rule
                  ? stats_.configured(req.domain, "limit_override")
                  : stats_.configured(req.domain, without_domain(sanitize_stat_name(rule->full_key), req.domain));
        }
      }
      c->add(h);
    }

    // envoyproxy/ratelimit's order: the fewest remaining so far, then any over-limit
    // descriptor outside quota mode (the last one wins).
    if (ds.limit_remaining < closest_remaining) {
      closest = &ds;
      closest_rule = rule;
      closest_remaining = ds.limit_remaining;
    }
    const bool quota = rule->quota_mode;
    if (quota) ++quota_total;
    if (ds.code == Code::kOverLimit) {
      if (quota) {
        ++quota_failed;
      } else {
        ++failed;
        closest = &ds;
        closest_rule = rule;
        closest_remaining = 0;
      }
    }
  }
  Code overall = failed > 0 || (quota_total > 0 && quota_total == quota_failed) ? Code::kOverLimit
                                                                                 : Code::kOk;
  if (overall == Code::kOverLimit && options_.shadow_mode) overall = Code::kOk;
  resp.overall_code = overall;
  if (options_.response_headers && closest != nullptr && closest->current_limit) {
    resp.response_headers_to_add.push_back(
        {options_.limit_header, std::to_string(closest->current_limit->requests_per_unit)});
    resp.response_headers_to_add.push_back(
        {options_.remaining_header, std::to_string(closest->limit_remaining)});
    resp.response_headers_to_add.push_back(
        {options_.reset_header, std::to_string(closest->duration_until_reset_seconds.value_or(0))});
    if (options_.ietf_headers) {
      // draft-ietf-httpapi-ratelimit-headers, for the same descriptor: its quota per window,
      // then what is left and when it resets. Named by the rule's name, else its key.
      const std::string& name = closest->current_limit->name.empty() ? closest_rule->full_key
                                                                      : closest->current_limit->name;
      std::string policy;
      http::append_sf_string(policy, name);
      std::string state = policy;
      policy += ";q=" + std::to_string(closest->current_limit->requests_per_unit) +
                ";w=" + std::to_string(unit_seconds(closest->current_limit->unit));
      state += ";r=" + std::to_string(closest->limit_remaining) +
               ";t=" + std::to_string(closest->duration_until_reset_seconds.value_or(0));
      resp.response_headers_to_add.push_back({"RateLimit-Policy", std::move(policy)});
      resp.response_headers_to_add.push_back({"RateLimit", std::move(state)});
    }
  }
}

}  // namespace ratelimit::rls
