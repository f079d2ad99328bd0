// denial_cache.cc — DenialCache: remembered denials in sharded hash maps, in front of any Store
// (contract and the argument for exactness in include/ratelimit/denial_cache.h). This file
// decides when a request may be answered from the memory and what a store's answer teaches it;
// the memory itself (DenialCache::Core) is denial_memory.h / denial_memory.cc.
//
// Layout: a (policy, key) pair maps to one entry in the shard its hash picks; the entry holds
// the policy's parameters (a redefinition under the same name is a different policy) and up to
// kDenialCacheCostsPerKey remembered denials, one per cost. Entries are kept in insertion order
// (refreshed when a denial is remembered again) so a full shard drops its oldest one, and the
// oldest entries are checked for expiry whenever something is inserted.
// Invariants:
//   - only kOverLimit denials with retry_after > 0 are remembered, for policies that do not count
//     denied attempts; a remembered denial answers only for denied_at <= now < expires_at, with
//     expires_at = min(denied_at + retry_after, denied_at + max_ttl), so a clock that stepped
//     back answers from the store, never from a denial made "in the future";
//   - denied_at is read before the store is asked, so it is never later than the store's own
//     decision: expires_at never passes the instant the store could first admit the request;
//   - a shard's generation changes at the start and at the end of every reset through this
//     cache; an answer from the store is remembered only if its shard's generation did not change
//     while it was in flight, so a denial decided before a reset is never remembered after it;
//   - no lock is held while the inner store is called or a completion runs.
#include "ratelimit/denial_cache.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "denial_memory.h"

namespace ratelimit {
using denial_detail::CompositeKey;
using denial_detail::PolicyParams;
namespace {

constexpr size_t kMaxEntries = 100'000'000;
constexpr size_t kMaxShards = 1024;

// A policy whose denied requests change state (count-denied mode, every-hit counting unless
// the options say to remember its denials as envoyproxy/ratelimit's local cache does): every
// request must reach the store.
// Also true for concurrency policies: a release gives units back before any retry_after, so
// none of their denials may be cached (and leases must reach the store).
bool counts_denials(const DenialCacheOptions& o, const Policy& p) {
  return p.count_denied() || (p.counts_every_hit() && !o.remember_every_hit) ||
         p.is_concurrency();
}

// Cost 0 (a check that counts nothing) and invalid input go to the store.
bool cacheable_input(std::string_view key, int64_t cost) {
  return !key.empty() && key.size() <= kMaxKeyLength && cost >= 1 && cost <= kMaxCost;
}

}  // namespace

Result<std::shared_ptr<DenialCache>> DenialCache::wrap(std::shared_ptr<Store> inner,
                                                       DenialCacheOptions options) {
  if (inner == nullptr) return Status::invalid_argument("denial cache: the inner store is null");
  if (options.max_entries < 1 || options.max_entries > kMaxEntries) {
    return Status::invalid_argument("denial cache: max_entries must be 1 ... " +
                                    std::to_string(kMaxEntries));
  }
  if (options.max_ttl < kMinWindow || options.max_ttl > kMaxWindow) {
    return Status::invalid_argument("denial cache: max_ttl must be 1ms ... 366d");
  }
  if (options.shards < 1 || options.shards > kMaxShards) {
    return Status::invalid_argument("denial cache: shards must be 1 ... " +
                                    std::to_string(kMaxShards));
  }
  auto core = std::make_shared<Core>();
  size_t shards = std::bit_ceil(options.shards);
  while (shards > 1 && shards > options.max_entries) shards /= 2;
  options.shards = shards;
  core->options = options;
  if (options.clock != nullptr) core->clock = options.clock;
  core->shard_mask = shards - 1;
  core->per_shard = options.max_entries / shards;
  core->shards = std::make_unique<Core::Shard[]>(shards);
  return std::shared_ptr<DenialCache>(new DenialCache(std::move(inner), std::move(core)));
}

DenialCache::DenialCache(std::shared_ptr<Store> inner, std::shared_ptr<Core> core)
    : StoreDecorator(std::move(inner)), core_(std::move(core)) {}

DenialCache::~DenialCache() = default;

namespace {

// One op (an acquire or a peek — a single decision of any caller): answered from the memory
// when a denial of it is remembered, else by the inner store, whose answer is learnt. No
// buffer beyond the key's.
void decide_one_op(const std::shared_ptr<DenialCache::Core>& core, Store& inner,
                   std::span<const StoreOp> ops, Atomicity atomicity, OpsCallback done) {
  const StoreOp& op = ops.front();
  const Policy& policy = *op.policy;
  if (counts_denials(core->options, policy) || !cacheable_input(op.key, op.cost)) {
    if (counts_denials(core->options, policy)) DenialCache::Core::bump(core->bypassed);
    return inner.decide_many_async(ops, atomicity, std::move(done));
  }
  const int64_t now = core->clock->now().count();
  const CompositeKey composite(policy, op.key);
  const PolicyParams params = PolicyParams::of(policy);
  auto look = core->lookup(composite.view(), params, policy.limit(), op.cost, now);
  if (look.hit) {
    DenialCache::Core::bump(core->hits);
    return done(std::span<const Decision>(&look.decision, 1));
  }
  DenialCache::Core::bump(core->misses);
  inner.decide_many_async(
      ops, atomicity,
      [core, composite = std::string(composite.view()), params, cost = op.cost, now,
       generation = look.generation, done = std::move(done)](Result<std::span<const Decision>> r) {
        if (r.ok() && r->size() == 1) core->learn(composite, params, cost, now, generation, r->front());
        done(std::move(r));
      });
}

}  // namespace

void DenialCache::decide_many_async(std::span<const StoreOp> ops, Atomicity atomicity,
                                    OpsCallback done) {
  if (!validate_decide_many(ops, atomicity).is_ok()) {
    return inner().decide_many_async(ops, atomicity, std::move(done));  // it refuses them
  }
  if (std::any_of(ops.begin(), ops.end(),
                  [](const StoreOp& op) { return op.kind == StoreOp::Kind::kReport; })) {
    return pass_reports(ops, atomicity, std::move(done));
  }
  if (ops.size() == 1 && !ops[0].policy->is_concurrency()) {
    return decide_one_op(core_, inner(), ops, atomicity, std::move(done));
  }
  const bool group = atomicity == Atomicity::kAllOrNothing && ops.size() > 1;
  const bool counts = std::any_of(ops.begin(), ops.end(),
                                  [&](const StoreOp& op) { return counts_denials(core_->options, *op.policy); });
  const bool leases = std::any_of(ops.begin(), ops.end(),
                                  [](const StoreOp& op) { return op.policy->is_concurrency(); });
  if ((group && counts) || leases) {
    Core::bump(core_->bypassed);
    return inner().decide_many_async(ops, atomicity, std::move(done));
  }
  const int64_t now = core_->clock->now().count();
  // An op the store must answer (every op of a group the cache cannot answer whole).
  struct Known {
    std::string composite;  // empty: passed through uncached (denials count, or cost 0)
    PolicyParams params;
    uint64_t generation;
    int64_t cost;
    size_t index;  // in `ops`
  };
  std::vector<Known> known;
  std::vector<StoreOp> asked;
  std::vector<Decision> out(ops.size());
  size_t hits = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const StoreOp& op = ops[i];
    const bool counts_op = counts_denials(core_->options, *op.policy);
    if (counts_op || !cacheable_input(op.key, op.cost)) {
      if (counts_op) Core::bump(core_->bypassed);
      known.push_back({std::string(), PolicyParams{}, 0, op.cost, i});
      asked.push_back(op);
      continue;
    }
    const CompositeKey composite(*op.policy, op.key);
    const PolicyParams params = PolicyParams::of(*op.policy);
    auto look = core_->lookup(composite.view(), params, op.policy->limit(), op.cost, now);
    if (look.hit) {
      ++hits;
      out[i] = look.decision;
      if (!group) {
        Core::bump(core_->hits);
        continue;
      }
    } else if (!group) {
      Core::bump(core_->misses);
    }
    known.push_back({std::string(composite.view()), params, look.generation, op.cost, i});
    asked.push_back(op);
  }
  // A group is answered here only when every op has a remembered denial (as acquire_all).
  if (group && hits == ops.size()) {
    Core::bump(core_->hits);
    return done(std::span<const Decision>(out));
  }
  if (group) Core::bump(core_->misses);
  if (asked.empty()) return done(std::span<const Decision>(out));
  inner().decide_many_async(
      asked, atomicity,
      [core = core_, known = std::move(known), out = std::move(out), now,
       done = std::move(done)](Result<std::span<const Decision>> r) mutable {
        if (!r.ok() || r->size() != known.size()) return done(std::move(r));
        // Only denials are learnt (as for single decisions, admissions make nothing forgotten).
        for (size_t k = 0; k < known.size(); ++k) {
          const Known& kn = known[k];
          const Decision& d = (*r)[k];
          out[kn.index] = d;
          if (kn.composite.empty()) continue;
          core->learn(kn.composite, kn.params, kn.cost, now, kn.generation, d);
        }
        done(std::span<const Decision>(out));
      });
}

// A report changes what the store would answer both ways (a refund frees room a remembered
// denial still refuses; a debt outlasts its retry_after): the reported keys' denials are
// forgotten, before the store records the report and again after it (a denial learnt by a call
// that raced with it), and the call goes to the store.
void DenialCache::pass_reports(std::span<const StoreOp> ops, Atomicity atomicity, OpsCallback done) {
  std::vector<std::string> reported;
  for (const StoreOp& op : ops) {
    if (op.kind != StoreOp::Kind::kReport) continue;
    reported.emplace_back(CompositeKey(*op.policy, op.key).view());
    core_->forget(reported.back());
  }
  Core::bump(core_->bypassed);
  inner().decide_many_async(ops, atomicity,
                            [core = core_, reported = std::move(reported),
                             done = std::move(done)](Result<std::span<const Decision>> r) {
                              for (const std::string& c : reported) core->forget(c);
                              done(std::move(r));
                            });
}

void DenialCache::reset_async(const Policy& policy, std::string_view key, StatusCallback done) {
  if (!cacheable_input(key, 1)) return inner().reset_async(policy, key, std::move(done));
  const CompositeKey composite(policy, key);
  core_->forget(composite.view());
  inner().reset_async(policy, key,
                      [core = core_, composite = std::string(composite.view()),
                       done = std::move(done)](Status s) {
                        core->forget(composite);
                        done(std::move(s));
                      });
}

DenialCacheCounters DenialCache::counters() const {
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  const Core& c = *core_;
  DenialCacheCounters out;
  out.hits = get(c.hits);
  out.misses = get(c.misses);
  out.bypassed = get(c.bypassed);
  out.inserts = get(c.inserts);
  out.evictions = get(c.evictions);
  out.invalidations = get(c.invalidations);
  out.entries = get(c.entries);
  return out;
}

const DenialCacheOptions& DenialCache::options() const { return core_->options; }

}  // namespace ratelimit
