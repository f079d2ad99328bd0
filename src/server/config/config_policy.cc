// config_policy.cc — one entry of `policies:` (PolicyConfig): the algorithm and its parameters,
// shadow, count_denied, the consistency keys, request_limit and waiting (max_wait, max_queue,
// hold_delay), priority classes. The policy's `scope` is config_regions.cc's.
// Invariants: every policy is built by the validating Policy factories (Policy::fixed_window ...,
// with_consistency, with_limit), whose refusal is reported with the policy's line; a key that
// does not apply to the algorithm is refused by name, never ignored.
#include <algorithm>

#include "config_sections.h"
#include "consistency_keys.h"

namespace ratelimit::server {

using config_detail::Parser;

namespace {

// consistency, sync_interval, lease_max, lease_ttl: read and applied by the reader Envoy rules
// share (src/yaml/consistency_keys.h), whose refusal names the key and the reason.
Status parse_consistency_fields(const Parser& p, const YAML::Node& n, const std::string& what,
                                Policy& policy) {
  if (auto e = yaml::apply_consistency_keys(n, what, policy)) return p.error(e->node, e->reason);
  return {};
}

// `request_limit: { min: 1, max: 10000 }` (min defaults to 1): the bounds of a caller's own
// limit. Both ends must make a valid policy (Policy::with_limit), so no request inside the
// bounds can be refused for its limit.
Status parse_request_limit(const Parser& p, const YAML::Node& n, const std::string& what, PolicyConfig& pc) {
  const std::string rl = what + ".request_limit";
  RL_TRY(p.check_map(n, rl, {"min", "max"}));
  if (pc.policy.consistency().mode != Consistency::kExact) {
    // A lease or async instance decides locally against slices of one limit; a limit that
    // changes per request would not match them, so the two are not combined.
    return p.error(n, rl + " needs consistency: exact (the policy's is " +
                          consistency_name(pc.policy.consistency().mode) + ")");
  }
  if (!n["max"]) return p.error(n, rl + ": 'max' is required (the largest limit a request may ask for)");
  int64_t min = 1, max = 0;
  if (n["min"]) RL_TRY_ASSIGN(min, p.integer(n["min"], rl + ".min", 1, kMaxLimit));
  RL_TRY_ASSIGN(max, p.integer(n["max"], rl + ".max", 1, kMaxLimit));
  if (min > max) return p.error(n, rl + ": min (" + std::to_string(min) + ") is above max (" + std::to_string(max) + ")");
  for (const int64_t bound : {min, max}) {
    auto with = pc.policy.with_limit(bound);
    if (!with) return p.error(n, rl + ": a limit of " + std::to_string(bound) + " is not valid for this policy: " + with.status().message());
  }
  pc.request_limit_min = min;
  pc.request_limit_max = max;
  return {};
}

// `max_wait: 2s, max_queue: 100` (both or neither): waiting instead of refusing; `hold_delay:
// true` (leaky_bucket, mode shape): answer an admitted request after its delay.
Status parse_waiting(const Parser& p, const YAML::Node& n, const std::string& what, PolicyConfig& pc) {
  if (n["max_wait"].IsDefined() != n["max_queue"].IsDefined()) {
    return p.error(n, what + ": max_wait and max_queue go together (how long a request may wait, and how many may "
                             "wait per key)");
  }
  if (n["max_wait"]) {
    RL_TRY_ASSIGN(pc.max_wait, p.duration(n["max_wait"], what + ".max_wait"));
    if (pc.max_wait > kMaxPolicyWait) return p.error(n["max_wait"], what + ".max_wait must be at most 10m");
    RL_TRY_ASSIGN(pc.max_queue, p.integer(n["max_queue"], what + ".max_queue", 1, kMaxPolicyQueue));
    if (pc.policy.consistency().mode != Consistency::kExact) {
      // A lease/async instance decides locally on a slice; its denials carry no wake-up the
      // queue could wait for across instances.
      return p.error(n["max_wait"], what + ".max_wait needs consistency: exact (the policy's is " +
                                        consistency_name(pc.policy.consistency().mode) + ")");
    }
  }
  if (n["hold_delay"]) {
    RL_TRY_ASSIGN(pc.hold_delay, p.boolean(n["hold_delay"], what + ".hold_delay"));
    if (pc.hold_delay && !(pc.policy.algorithm() == Algorithm::kLeakyBucket && pc.policy.leaky_mode() == LeakyMode::kShape)) {
      return p.error(n["hold_delay"], what + ".hold_delay applies to leaky_bucket with mode: shape (the only "
                                             "algorithm that answers a delay)");
    }
  }
  return {};
}

constexpr const char* kAdaptiveKeys[] = {"estimator", "min_limit", "initial_limit", "max_limit", "sample_window"};

// The estimator's settings of `limit: adaptive` (docs/throttling.md "Fixed or adaptive").
Result<adaptive::AdaptiveConfig> parse_adaptive(const Parser& p, const YAML::Node& n, const std::string& what) {
  adaptive::AdaptiveConfig c;
  if (!n["max_limit"]) return p.error(n, what + ": limit: adaptive needs 'max_limit' (the most units it may learn to admit)");
  if (n["estimator"]) {
    std::string e;
    RL_TRY_ASSIGN(e, p.string(n["estimator"], what + ".estimator"));
    auto est = adaptive::estimator_from_name(e);
    if (!est) return p.error(n["estimator"], what + ".estimator: unknown estimator '" + e + "' (gradient2, aimd, vegas)");
    c.estimator = *est;
  }
  RL_TRY_ASSIGN(c.max_limit, p.integer(n["max_limit"], what + ".max_limit", 1, adaptive::kMaxAdaptiveLimit));
  if (n["min_limit"]) RL_TRY_ASSIGN(c.min_limit, p.integer(n["min_limit"], what + ".min_limit", 1, adaptive::kMaxAdaptiveLimit));
  // Netflix's initial limit (20), within the bounds given.
  c.initial_limit = std::clamp<int64_t>(20, c.min_limit, c.max_limit);
  if (n["initial_limit"]) {
    RL_TRY_ASSIGN(c.initial_limit, p.integer(n["initial_limit"], what + ".initial_limit", 1, adaptive::kMaxAdaptiveLimit));
  }
  if (n["sample_window"]) {
    if (n["sample_window"].IsScalar() && n["sample_window"].Scalar() == "0") {
      c.window_us = 0;  // one update per sample
    } else {
      Micros w{0};
      RL_TRY_ASSIGN(w, p.duration(n["sample_window"], what + ".sample_window"));
      c.window_us = w.count();
    }
  }
  if (Status s = adaptive::validate(c); !s.is_ok()) return p.error(n, what + ": " + s.message());
  return c;
}

// `classes: default` or a list, highest first, of `{name, weight, headroom}` (priority classes,
// include/ratelimit/priority.h; docs/throttling.md "Priority classes"), on a concurrency policy
// (weights order its waiters; headroom refuses the lower classes first) or a rate policy (the
// same, for requests that wait with max_wait). A fixed limit and exact counting only: each
// class must be admitted at least once (class_limit >= 1), and headroom may not fall going down
// the list (refusals take the lowest classes first).
Result<std::vector<algo::PriorityClass>> parse_classes(const Parser& p, const YAML::Node& n, const std::string& what,
                                                       const Policy& policy) {
  const std::string cw = what + ".classes";
  if (policy.adaptive()) return p.error(n, cw + ": priority classes need a fixed limit (this one is adaptive)");
  if (!(policy.consistency() == ConsistencyOptions{})) {
    // A class's own limit would re-split lease/async slices per class: not defined.
    return p.error(n, cw + ": priority classes need consistency: exact");
  }
  if (n.IsScalar() && n.Scalar() == "default") return algo::default_classes();
  if (!n.IsSequence() || n.size() == 0 || n.size() > algo::kMaxClasses) {
    return p.error(n, cw + " must be 'default' or a list of 1 to " + std::to_string(algo::kMaxClasses) +
                          " classes ({name, weight, headroom}), highest first");
  }
  std::vector<algo::PriorityClass> out;
  for (const YAML::Node& c : n) {
    RL_TRY(p.check_map(c, cw + " entry", {"name", "weight", "headroom"}));
    if (!c["name"]) return p.error(c, cw + ": every class needs a 'name'");
    algo::PriorityClass k;
    RL_TRY_ASSIGN(k.name, p.string(c["name"], cw + ".name"));
    const std::string at = cw + " '" + k.name + "'";
    const bool plain = !k.name.empty() && k.name.size() <= 32 &&
                       std::all_of(k.name.begin(), k.name.end(), [](char ch) {
                         return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
                       });
    if (!plain) return p.error(c["name"], at + ": a class name is 1 to 32 of a-z, 0-9, '_', '-'");
    for (const auto& e : out) {
      if (e.name == k.name) return p.error(c["name"], at + " is listed twice");
    }
    if (c["weight"]) RL_TRY_ASSIGN(k.weight, p.integer(c["weight"], at + ".weight", 1, algo::kMaxClassWeight));
    if (c["headroom"]) RL_TRY_ASSIGN(k.headroom, p.number(c["headroom"], at + ".headroom"));
    if (k.headroom < 0 || k.headroom >= 1) return p.error(c["headroom"], at + ".headroom must be in [0, 1), got " + c["headroom"].Scalar());
    if (!out.empty() && k.headroom < out.back().headroom) {
      return p.error(c["headroom"], at + ".headroom must be at least the class above's (" + out.back().name +
                                        "): refusals take the lowest classes first");
    }
    if (algo::class_limit(policy.limit(), k.headroom) < 1) {
      return p.error(c["headroom"], at + ": headroom leaves it no unit of limit " + std::to_string(policy.limit()));
    }
    out.push_back(std::move(k));
  }
  return out;
}

// concurrency: a fixed `limit` or `limit: adaptive`, and lease_ttl.
Result<Policy> parse_concurrency(const Parser& p, const YAML::Node& n, const std::string& what) {
  // lease_ttl is the leases' lifetime here; the consistency keys do not apply (a concurrency
  // policy is always decided exactly).
  for (const char* k : {"window", "rate", "burst", "mode", "count_denied", "consistency", "sync_interval",
                        "lease_max"}) {
    if (n[k]) return p.error(n[k], what + ": '" + k + "' does not apply to concurrency (it takes limit and lease_ttl)");
  }
  if (!n["limit"] || !n["lease_ttl"]) return p.error(n, what + ": concurrency needs 'limit' (units held at once, or adaptive) and 'lease_ttl'");
  Micros ttl{0};
  RL_TRY_ASSIGN(ttl, p.duration(n["lease_ttl"], what + ".lease_ttl"));
  const bool adaptive = n["limit"].IsScalar() && n["limit"].Scalar() == "adaptive";
  if (!adaptive) {
    for (const char* k : kAdaptiveKeys) {
      if (n[k]) return p.error(n[k], what + ": '" + k + "' applies with limit: adaptive (this limit is fixed)");
    }
    int64_t limit = 0;
    RL_TRY_ASSIGN(limit, p.integer(n["limit"], what + ".limit", 1, kMaxConcurrencyLimit));
    auto fixed = Policy::concurrency(limit, ttl);
    if (!fixed) return p.error(n, what + ": " + fixed.status().message());
    return fixed;
  }
  adaptive::AdaptiveConfig c;
  RL_TRY_ASSIGN(c, parse_adaptive(p, n, what));
  auto learned = Policy::adaptive_concurrency(c, ttl);
  if (!learned) return p.error(n, what + ": " + learned.status().message());
  return learned;
}

}  // namespace

Result<PolicyConfig> parse_policy(const Parser& p, const std::string& name, const YAML::Node& key,
                                  const YAML::Node& n) {
  const std::string what = "policy '" + name + "'";
  if (Status s = validate_policy_name(name); !s.is_ok()) return p.error(key, s.message());
  RL_TRY(p.check_map(n, what, {"algorithm", "limit", "window", "rate", "burst", "mode", "shadow",
                               "count_denied", "consistency", "sync_interval", "lease_max",
                               "lease_ttl", "request_limit", "max_wait", "max_queue", "hold_delay",
                               "scope", "estimator", "min_limit", "initial_limit", "max_limit",
                               "sample_window", "classes"}));
  if (!n["algorithm"]) return p.error(n, what + ": 'algorithm' is required");
  std::string algo_name;
  RL_TRY_ASSIGN(algo_name, p.string(n["algorithm"], what + ".algorithm"));
  auto algo = parse_algorithm(algo_name);
  if (!algo) {
    return p.error(n["algorithm"], what + ": unknown algorithm '" + algo_name +
                                       "' (fixed_window, sliding_window_log, "
                                       "sliding_window_counter, token_bucket, leaky_bucket, "
                                       "concurrency)");
  }
  Result<Policy> policy = Status::internal("unset");
  const bool bucket = *algo == Algorithm::kTokenBucket || *algo == Algorithm::kLeakyBucket;
  if (*algo != Algorithm::kConcurrency) {
    for (const char* k : kAdaptiveKeys) {
      if (n[k]) return p.error(n[k], what + ": '" + k + "' applies to concurrency with limit: adaptive");
    }
  }
  if (*algo == Algorithm::kConcurrency) {
    RL_TRY_ASSIGN(policy, parse_concurrency(p, n, what));
  } else if (bucket) {
    for (const char* k : {"limit", "window"}) {
      if (n[k]) return p.error(n[k], what + ": '" + k + "' is for window algorithms; a bucket takes rate and burst");
    }
    if (!n["rate"] || !n["burst"]) return p.error(n, what + ": " + algo_name + " needs 'rate' (per second) and 'burst'");
    double rate = 0;
    int64_t burst = 0;
    RL_TRY_ASSIGN(rate, p.number(n["rate"], what + ".rate"));
    RL_TRY_ASSIGN(burst, p.integer(n["burst"], what + ".burst", 1, kMaxLimit));
    if (*algo == Algorithm::kTokenBucket) {
      if (n["mode"]) return p.error(n["mode"], what + ": 'mode' applies only to leaky_bucket");
      policy = Policy::token_bucket(rate, burst);
    } else {
      LeakyMode mode = LeakyMode::kPolice;
      if (n["mode"]) {
        RL_TRY_ASSIGN(mode, p.one_of<LeakyMode>(n["mode"], what + ".mode",
                                                {{"police", LeakyMode::kPolice}, {"shape", LeakyMode::kShape}}));
      }
      policy = Policy::leaky_bucket(rate, burst, mode);
    }
  } else {
    for (const char* k : {"rate", "burst", "mode"}) {
      if (n[k]) return p.error(n[k], what + ": '" + k + "' is for bucket algorithms; " + algo_name + " takes limit and window");
    }
    if (!n["limit"] || !n["window"]) return p.error(n, what + ": " + algo_name + " needs 'limit' and 'window'");
    int64_t limit = 0;
    Micros window{0};
    RL_TRY_ASSIGN(limit, p.integer(n["limit"], what + ".limit", 1, kMaxLimit));
    RL_TRY_ASSIGN(window, p.duration(n["window"], what + ".window"));
    if (*algo == Algorithm::kFixedWindow) policy = Policy::fixed_window(limit, window);
    else if (*algo == Algorithm::kSlidingWindowLog) policy = Policy::sliding_window_log(limit, window);
    else policy = Policy::sliding_window_counter(limit, window);
  }
  if (!policy) return p.error(n, what + ": " + policy.status().message());
  auto named = policy->with_name(name);
  if (!named) return p.error(key, named.status().message());
  PolicyConfig pc{std::move(*named), false, yaml::line_of(key)};
  if (n["shadow"]) RL_TRY_ASSIGN(pc.shadow, p.boolean(n["shadow"], what + ".shadow"));
  if (n["count_denied"]) {
    bool cd = false;
    RL_TRY_ASSIGN(cd, p.boolean(n["count_denied"], what + ".count_denied"));
    pc.policy = pc.policy.with_count_denied(cd);
  }
  if (!pc.policy.is_concurrency()) RL_TRY(parse_consistency_fields(p, n, what, pc.policy));  // its lease_ttl is its own
  if (n["request_limit"]) RL_TRY(parse_request_limit(p, n["request_limit"], what, pc));
  RL_TRY(parse_waiting(p, n, what, pc));
  if (n["classes"]) RL_TRY_ASSIGN(pc.classes, parse_classes(p, n["classes"], what, pc.policy));
  return pc;
}

}  // namespace ratelimit::server
