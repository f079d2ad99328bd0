// rls_service.cc — ShouldRateLimit on the decision service (see rls_service.h): the request
// in. Checked, then resolved once (RuleSet::resolve) into each descriptor's rule, store key and
// metric key, then decided; rls_answer.cc turns the decisions into the answer.
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

#include "ratelimit/hit_counting.h"
#include "ratelimit/policy.h"
#include "rls_call.h"
#include "try.h"  // RL_TRY

namespace ratelimit::rls {

// The environment's names for the service's settings (ietf_headers is ours: no variable).
ServiceOptions ServiceOptions::from(const EnvoySettings& s) {
  return {.near_limit_ratio = s.near_limit_ratio,
          .shadow_mode = s.shadow_mode,
          .stop_increment_when_over_limit = s.stop_cache_key_increment_when_overlimit,
          .response_headers = s.limit_response_headers_enabled,
          .limit_header = s.limit_limit_header,
          .remaining_header = s.limit_remaining_header,
          .reset_header = s.limit_reset_header};
}

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
  for (int u = 1; u <= 7; ++u) {
    s->override_rules[static_cast<size_t>(u)] = std::make_unique<service::Rule>(
        service::Rule{rules->override_counter(static_cast<Unit>(u)), false, outcomes});
  }
  s->rules = std::move(rules);
  return s;
}

namespace {

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


// What refuses a request before anything is resolved (see rls_service.h).
Status check_request(const RateLimitRequest& req) {
  if (req.domain.empty()) return Status::invalid_argument("rate limit domain must not be empty");
  if (req.descriptors.empty()) return Status::invalid_argument("rate limit descriptor list must not be empty");
  RL_TRY(check_descriptor_count(req.descriptors.size()));
  return validate_descriptors(req);
}

// The request's descriptors as RuleSet::resolve reads them (views into the request), and the
// hits of each.
Status read_descriptors(const RateLimitRequest& req, Call::State& st) {
  const size_t n = req.descriptors.size();
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
      return Status::invalid_argument("descriptor " + std::to_string(i) + ": hits_addend " + std::to_string(hits) +
                                      " is above " + std::to_string(kMaxCost));
    }
    st.hits[i] = static_cast<int64_t>(hits);
  }
  return {};
}

// One Item per descriptor with a limit to decide: its service rule from the snapshot (built at
// load; an override's carries the request's limit as the Item's policy).
void plan_items(Call::State& st) {
  const size_t n = st.applied.size();
  st.items.clear();
  st.item_hits.clear();
  st.item_of.assign(n, -1);
  for (size_t i = 0; i < n; ++i) {
    const Applied& a = st.applied[i];
    const Rule* rule = a.rule();
    if (rule == nullptr || a.unlimited || !rule->policy) continue;
    service::Item item{nullptr, a.cache_key, st.hits[i], StoreOp::Kind::kAcquire};
    if (a.override_rule) {
      item.rule = st.snap->override_rules[static_cast<size_t>(rule->unit)].get();
      item.policy = &*rule->policy;  // lives in st.applied until the next request
    } else {
      item.rule = &st.snap->per_rule.at(rule)->rule;
    }
    st.item_of[i] = static_cast<int32_t>(st.items.size());
    st.items.push_back(item);
    st.item_hits.push_back(st.hits[i]);
  }
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
  call.status = check_request(req);
  if (call.status.is_ok()) {
    st.snap = &view_.get(st.cache);
    call.status = read_descriptors(req, st);
  }
  if (call.status.is_ok()) call.status = st.snap->rules->resolve(req.domain, st.descriptors, st.applied);
  if (!call.status.is_ok()) return true;
  plan_items(st);
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

}  // namespace ratelimit::rls
