// rls_call.h — what the two halves of RateLimitService share (internal to src/rls): the
// immutable Snapshot a Call reads its rules from, and a Call's per-request state. The halves:
//   rls_service.cc  the request in: checks, resolve() once into each descriptor's rule, store
//                   key and statistics slot, then the decision's phases
//   rls_answer.cc   the answer out: statuses, statistics, the overall code, the limit headers
// Invariants: a Snapshot never changes once published (its statistics slots are filled once,
// on first use, and then only read); a Call's State points into the Snapshot it holds.
// Thread-safety: a Snapshot is shared read-only by every thread; a State belongs to its Call.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <unordered_map>
#include <vector>

#include "rls_service.h"

namespace ratelimit::rls {

struct RateLimitService::Snapshot {
  struct PerRule {
    explicit PerRule(service::Rule r) : rule(std::move(r)) {}
    service::Rule rule;
    // The rule's own statistics (its Rule::stats_name under the domain), looked up on first
    // use: a rule no request matched adds no row to /metrics.
    std::atomic<HitCounters*> stats{nullptr};
  };
  std::shared_ptr<const RuleSet> rules;
  uint64_t generation = 0;
  service::RuleCounters* outcomes = nullptr;  // every rule's, limit overrides' too
  std::unordered_map<const Rule*, std::unique_ptr<PerRule>> per_rule;
  // A limit override's service rule per Unit (RuleSet::override_counter); the request's own
  // limit rides on the Item (Item::policy).
  std::array<std::unique_ptr<service::Rule>, 8> override_rules;
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
  std::vector<int64_t> hits;     // per descriptor
  std::vector<int32_t> item_of;  // per descriptor: its item, or -1
  std::vector<service::Item> items;
  std::vector<int64_t> item_hits, counted;
  std::vector<uint8_t> would_exceed;
  bool checking = false;  // the first phase of STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT
};

}  // namespace ratelimit::rls
