// rule_set_load.cc — envoyproxy/ratelimit configuration files -> RuleSet (RuleSet::load).
//
// Loading runs in two passes per file, as envoyproxy/ratelimit does: first every mapping key
// anywhere in the document is checked against its list of known keys and every leaf against
// the types it accepts (so `rate_limt:` or `requests_per_unit: 1.5` refuses the file), then
// the typed walk builds the descriptor tree and applies its semantic checks. Every message is
// "file:line: reason". yaml-cpp exceptions never leave this file.
// Invariants: all or nothing — the first error refuses the whole set of files.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_set>

#include "bounded_yaml.h"
#include "consistency_keys.h"
#include "ratelimit/store.h"
#include "rule_set_detail.h"
#include "strict_reader.h"

namespace ratelimit::rls {

using namespace rule_set_detail;  // NOLINT: the loader's own helpers

// Item `item` of the top-level list `list` of `doc`; an undefined node when there is none.
YAML::Node item_of(const YAML::Node& doc, const std::string& list, size_t item) {
  if (!doc.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node l = doc[list];
  if (!l.IsSequence() || item >= l.size()) return YAML::Node(YAML::NodeType::Undefined);
  return l[item];
}

// Typed leaves are read as yaml.v2 decodes them into envoyproxy/ratelimit's structs: the one
// strict reader (strict_reader.h) in its yaml.v2 dialect.
class Loader : private yaml::StrictReader {
 public:
  Loader(RuleSet& set, const LoadOptions& options)
      : StrictReader("", yaml::Dialect::kYamlV2), set_(set), options_(options) {}

  Status load_file(const SourceFile& f) {
    file_ = f.name;
    set_file(file_);
    YAML::Node doc;
    // Nesting, nodes and aliases are bounded before yaml-cpp builds (and we walk) the document:
    // `metadata` is rendered as JSON, which expands every alias in it.
    if (const auto refused = yaml::check_yaml_bounds(f.text)) {
      return error(refused->line, "error loading config file: " + refused->reason);
    }
    try {
      doc = YAML::Load(f.text);
    } catch (const YAML::Exception& e) {
      return error(e.mark.is_null() ? 1 : e.mark.line + 1,
                   "error loading config file: " + e.msg);
    }
    // A node copied (not assigned: yaml-cpp assignment writes through) from the document, so
    // an item of a list keeps its own lines.
    const YAML::Node root = f.list.empty() ? doc : item_of(doc, f.list, f.item);
    if (!root) return error(line_of(doc), "'" + f.list + "' has no item " + std::to_string(f.item));
    try {
      return load_root(root);
    } catch (const YAML::Exception& e) {
      return error(e.mark.is_null() ? 1 : e.mark.line + 1,
                   "error loading config file: " + e.msg);
    }
  }

 private:
  // Pass 1: envoyproxy/ratelimit's validateYamlKeys, plus duplicate keys and our extensions.
  Status check_keys(const YAML::Node& map, bool in_rate_limit, bool at_root = false) const {
    std::unordered_set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node k = it->first;
      if (!k.IsScalar()) return error(k, "config error, key is not of type string");
      const std::string& name = k.Scalar();
      const bool ext = (in_rate_limit && contains(kExtensionKeys, name)) ||
                       (at_root && contains(kRootExtensionKeys, name));
      if (!contains(kEnvoyKeys, name) && !ext) {
        return error(k, "config error, unknown key '" + name + "'");
      }
      if (!seen.insert(name).second) {
        return error(k, "config error, key '" + name + "' given twice in one mapping");
      }
      if (name == "metadata") continue;  // free-form, as in envoyproxy/ratelimit
      const YAML::Node v = it->second;
      if (v.IsSequence()) {
        for (size_t i = 0; i < v.size(); ++i) {
          if (!v[i].IsMap()) {
            return error(v[i], "config error, yaml file contains list of type other than map "
                               "(under '" + name + "')");
          }
          if (Status s = check_keys(v[i], false); !s.is_ok()) return s;
        }
      } else if (v.IsMap()) {
        if (Status s = check_keys(v, name == "rate_limit"); !s.is_ok()) return s;
      } else if (v.IsScalar() && is_plain(v) && is_float_like(v.Scalar())) {
        return error(v, "error checking config: '" + name + "' has the value " + v.Scalar() +
                            ", a number that is not a whole 64-bit integer");
      }
    }
    return {};
  }

  Status load_root(const YAML::Node& root) {
    if (root.IsNull()) return error(1, "config file cannot have empty domain");
    if (!root.IsMap()) return error(root, "error loading config file: the document must be a mapping");
    if (Status s = check_keys(root, false, true); !s.is_ok()) return s;
    auto domain = string(root["domain"], "domain");
    if (!domain) return domain.status();
    if (domain->empty()) return error(root, "config file cannot have empty domain");
    const YAML::Node descriptors = root["descriptors"];
    if (Status s = sequence(descriptors, "descriptors"); !s.is_ok()) return s;

    auto [it, fresh] = set_.domains_.try_emplace(*domain);
    if (!fresh && !options_.merge_domains) {
      return error(root["domain"], "duplicate domain '" + *domain + "' in config file");
    }
    if (fresh) it->second = std::make_unique<RuleSet::Node>();
    if (root["all_or_nothing"]) {
      bool all = false;
      RL_TRY_ASSIGN(all, boolean(root["all_or_nothing"], "all_or_nothing"));
      // Merged files of one domain may each say it, but not differently: which one would win
      // is an accident of file order.
      if (it->second->all_or_nothing && *it->second->all_or_nothing != all) {
        return error(root["all_or_nothing"], "all_or_nothing of domain '" + *domain +
                                                 "' differs from another file of the same domain");
      }
      it->second->all_or_nothing = all;
    }
    domain_ = *domain;
    return load_descriptors(*it->second, *domain + ".", descriptors);
  }

  Status load_descriptors(RuleSet::Node& parent, const std::string& parent_key,
                          const YAML::Node& list) {
    if (!list || list.IsNull()) return {};
    for (size_t i = 0; i < list.size(); ++i) {
      const YAML::Node d = list[i];
      auto key = string(d["key"], "key");
      if (!key) return key.status();
      if (key->empty()) return error(d, "descriptor has empty key");
      auto value = string(d["value"], "value");
      if (!value) return value.status();
      std::string composite = *key;
      if (!value->empty()) composite += "_" + *value;
      const std::string full_key = parent_key + composite;
      if (parent.children.count(composite)) {
        return error(d, "duplicate descriptor composite key '" + full_key + "'");
      }

      auto node = std::make_unique<RuleSet::Node>();
      bool shadow = false, quota = false, detailed = false;
      RL_TRY_ASSIGN(shadow, boolean(d["shadow_mode"], "shadow_mode"));
      RL_TRY_ASSIGN(quota, boolean(d["quota_mode"], "quota_mode"));
      RL_TRY_ASSIGN(detailed, boolean(d["detailed_metric"], "detailed_metric"));
      RL_TRY_ASSIGN(node->value_to_metric, boolean(d["value_to_metric"], "value_to_metric"));
      RL_TRY_ASSIGN(node->share_threshold, boolean(d["share_threshold"], "share_threshold"));

      const YAML::Node metadata = d["metadata"];
      std::string metadata_json;
      if (metadata && !metadata.IsNull()) {
        if (!metadata.IsMap()) return error(metadata, "error parsing metadata: must be a mapping");
        to_json(metadata, metadata_json);
      }

      const YAML::Node rl = d["rate_limit"];
      if (rl && !rl.IsNull()) {
        if (!rl.IsMap()) return error(rl, "rate_limit must be a mapping");
        auto rule = load_rule(rl, full_key, shadow, quota, detailed);
        if (!rule) return rule.status();
        (*rule)->metadata_json = std::move(metadata_json);
        node->rule = rule->get();
        set_.rules_.push_back(std::move(*rule));
      }

      const bool wildcard = composite.find('*') != std::string::npos;
      if (node->share_threshold && !wildcard) {
        return error(d, "share_threshold can only be used with wildcard values (containing "
                        "'*'), but found key '" + composite + "'");
      }
      if (node->share_threshold) node->wildcard_pattern = composite;

      const YAML::Node children = d["descriptors"];
      if (Status s = sequence(children, "descriptors"); !s.is_ok()) return s;
      if (Status s = load_descriptors(*node, full_key + ".", children); !s.is_ok()) return s;
      const RuleSet::Node* raw = node.get();
      parent.children.emplace(composite, std::move(node));
      if (wildcard) parent.wildcards.emplace_back(composite, raw);
    }
    return {};
  }

  Result<std::unique_ptr<Rule>> load_rule(const YAML::Node& rl, const std::string& full_key,
                                          bool shadow, bool quota, bool detailed) {
    auto r = std::make_unique<Rule>();
    r->full_key = full_key;
    r->stats_name = stat_name(full_key, domain_);
    r->shadow_mode = shadow;
    r->quota_mode = quota;
    r->detailed_metric = detailed;
    r->file = file_;
    r->line = line_of(rl);
    RL_TRY_ASSIGN(r->unlimited, boolean(rl["unlimited"], "unlimited"));
    if (const YAML::Node n = rl["requests_per_unit"]; n && !n.IsNull()) {
      int64_t v = 0;
      RL_TRY_ASSIGN(v, integer(n, "requests_per_unit", 0, kMaxEveryHitLimit));
      r->requests_per_unit = static_cast<uint32_t>(v);
    }
    std::string unit_text;
    RL_TRY_ASSIGN(unit_text, string(rl["unit"], "unit"));
    const std::optional<Unit> unit = parse_unit(unit_text);
    if (r->unlimited) {
      if (unit) return error(rl["unit"], "should not specify rate limit unit when unlimited");
    } else if (!unit) {
      return error(rl["unit"] ? rl["unit"] : rl, "invalid rate limit unit '" + unit_text +
                                                     "' (expected second, minute, hour, day, "
                                                     "week, month or year)");
    }
    r->unit = unit.value_or(Unit::kUnknown);
    RL_TRY_ASSIGN(r->name, string(rl["name"], "name"));
    if (Status st = load_replaces(rl["replaces"], *r); !st.is_ok()) return st;

    // Our extension: the algorithm that decides, with its parameters.
    const YAML::Node alg = rl["algorithm"];
    if ((rl["burst"] || rl["mode"]) && !alg) {
      return error(rl["burst"] ? rl["burst"] : rl["mode"],
                   "'burst' and 'mode' need 'algorithm' (token_bucket or leaky_bucket)");
    }
    if (r->unlimited) {
      if (alg) return error(alg, "an unlimited rate_limit takes no algorithm");
      if (yaml::has_consistency_keys(rl)) {
        return error(rl, "an unlimited rate_limit takes no consistency (nothing is counted)");
      }
      return r;
    }
    if (!alg) {
      Result<Policy> counter = envoy_counter(r->requests_per_unit, r->unit);
      if (!counter) return error(rl, "rate_limit: " + counter.status().message());
      if (Status s = check_counter_consistency(rl); !s.is_ok()) return s;
      r->policy = *counter;
      return apply_consistency(rl, std::move(r));
    }
    Result<Policy> policy = algorithm_policy(rl, alg, *r);
    if (!policy) return policy.status();
    auto named = policy->with_name("rls:" + policy->name());
    r->policy = named ? *named : *policy;
    return apply_consistency(rl, std::move(r));
  }

  // Our extension: the policy an `algorithm` key names, with its burst and mode; every refusal
  // (an unknown or unavailable algorithm, a key another algorithm takes) names its node.
  Result<Policy> algorithm_policy(const YAML::Node& rl, const YAML::Node& alg, const Rule& r) const {
    const int64_t window_us = unit_seconds(r.unit) * 1'000'000;
    const int64_t rpu = r.requests_per_unit;
    Result<Policy> policy = Status::internal("unset");
    std::string alg_name;
    RL_TRY_ASSIGN(alg_name, string(alg, "algorithm"));
    auto a = parse_algorithm(alg_name);
    if (!a) {
      // The rate algorithms only: concurrency is refused below with its own reason.
      return error(alg, "unknown algorithm '" + alg_name + "' (expected fixed_window, sliding_window_log, "
                        "sliding_window_counter, token_bucket or leaky_bucket)");
    }
    if (*a == Algorithm::kConcurrency) {
      // Envoy's rate limit service has no release: a lease taken by ShouldRateLimit could only
      // expire (docs/throttling.md says what works there instead).
      return error(alg, "the concurrency algorithm is not available to the Envoy rate limit "
                        "service: RLS calls cannot release a lease (see docs/throttling.md)");
    }
    const bool bucket = *a == Algorithm::kTokenBucket || *a == Algorithm::kLeakyBucket;
    if (!bucket && (rl["burst"] || rl["mode"])) {
      return error(rl["burst"] ? rl["burst"] : rl["mode"],
                   "'burst' and 'mode' apply to token_bucket and leaky_bucket only");
    }
    if (*a != Algorithm::kLeakyBucket && rl["mode"]) {
      return error(rl["mode"], "'mode' applies to leaky_bucket only");
    }
    const double rate = static_cast<double>(rpu) / static_cast<double>(unit_seconds(r.unit));
    int64_t burst = rpu;
    if (const YAML::Node b = rl["burst"]) RL_TRY_ASSIGN(burst, integer(b, "burst", 1, kMaxLimit));
    switch (*a) {
      case Algorithm::kFixedWindow: policy = Policy::fixed_window(rpu, Micros{window_us}); break;
      case Algorithm::kSlidingWindowLog:
        policy = Policy::sliding_window_log(rpu, Micros{window_us});
        break;
      case Algorithm::kSlidingWindowCounter:
        policy = Policy::sliding_window_counter(rpu, Micros{window_us});
        break;
      case Algorithm::kTokenBucket: policy = Policy::token_bucket(rate, burst); break;
      case Algorithm::kLeakyBucket: {
        LeakyMode mode = LeakyMode::kPolice;
        if (const YAML::Node m = rl["mode"]) {
          std::string ms;
          RL_TRY_ASSIGN(ms, string(m, "mode"));
          if (ms == "shape") mode = LeakyMode::kShape;
          else if (ms != "police") return error(m, "mode must be police or shape, got '" + ms + "'");
        }
        policy = Policy::leaky_bucket(rate, burst, mode);
        break;
      }
      case Algorithm::kConcurrency: break;  // refused above
    }
    if (!policy) return error(rl, "rate_limit: " + policy.status().message());
    return policy;
  }

  // `replaces`: a list of {name}, none empty, none the rule's own name.
  Status load_replaces(const YAML::Node& replaces, Rule& r) const {
    if (Status s = sequence(replaces, "replaces"); !s.is_ok()) return s;
    if (!replaces) return {};
    for (size_t i = 0; i < replaces.size(); ++i) {
      std::string name;
      RL_TRY_ASSIGN(name, string(replaces[i]["name"], "replaces.name"));
      if (name.empty()) return error(replaces[i], "should not have an empty replaces entry");
      if (name == r.name) {
        return error(replaces[i], "replaces should not contain name of same descriptor");
      }
      r.replaces.push_back(name);
    }
    return {};
  }

  // Our extension: the consistency keys of ratelimitd's own policies, read and validated by the
  // same code (Policy::with_consistency refuses what a native policy would).
  Result<std::unique_ptr<Rule>> apply_consistency(const YAML::Node& rl, std::unique_ptr<Rule> r) const {
    if (auto e = yaml::apply_consistency_keys(rl, "rate_limit", *r->policy)) return error(e->node, e->reason);
    return r;
  }

  // envoyproxy/ratelimit's counter counts every hit, denied ones too, which only one call per
  // hit can do: lease and async need one of our window algorithms, said in Envoy's terms.
  Status check_counter_consistency(const YAML::Node& rl) const {
    const YAML::Node c = rl["consistency"];
    if (!c || !c.IsScalar()) return {};
    auto mode = parse_consistency(c.Scalar());
    if (!mode || *mode == Consistency::kExact) return {};  // a bad name is refused by the reader
    return error(c, "consistency " + c.Scalar() + " needs 'algorithm: fixed_window' or 'algorithm: "
                    "sliding_window_counter': envoyproxy/ratelimit's default counter counts denied hits "
                    "too, which only consistency exact can");
  }

  RuleSet& set_;
  const LoadOptions& options_;
  std::string file_;
  std::string domain_;
};

Result<std::shared_ptr<const RuleSet>> RuleSet::load(std::span<const SourceFile> files,
                                                     const LoadOptions& options) {
  std::shared_ptr<RuleSet> set(new RuleSet());
  set->cache_key_prefix_ = options.cache_key_prefix;
  for (int u = 1; u <= 7; ++u) {
    auto counter = envoy_counter(0, static_cast<Unit>(u));
    if (!counter) return counter.status();  // cannot happen: every unit's window is valid
    set->override_counters_[static_cast<size_t>(u)] = std::move(*counter);
  }
  Loader loader(*set, options);
  for (const SourceFile& f : files) {
    if (Status s = loader.load_file(f); !s.is_ok()) return s;
  }
  return std::shared_ptr<const RuleSet>(std::move(set));
}

}  // namespace ratelimit::rls
