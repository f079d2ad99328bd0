// rule_set_match.cc — RuleSet::resolve: which rule, which store key and which metric key apply
// to each descriptor of a request (see rule_set.h for the semantics).
//
// Follows GetLimit in envoyproxy/ratelimit's config_impl.go step by step, metric-key rules
// included, in four steps per descriptor: the request's own limit (an override), else the walk
// down the descriptor tree (match_levels), then the metric key (stats_key_of) and the store key
// (cache_key_of); `replaces` is applied across the request last. Runs on every request: the
// override's counter is built at load (RuleSet::load, one per unit) and only takes the
// request's limit here.
#include <unordered_set>

#include "ratelimit/store.h"
#include "rule_set_detail.h"

namespace ratelimit::rls {

namespace {

std::string descriptor_key(std::string_view domain, std::span<const Entry> entries) {
  std::string k;
  for (const Entry& e : entries) {
    if (!k.empty()) k += '.';
    k += e.key;
    if (!e.value.empty()) {
      k += '_';
      k += e.value;
    }
  }
  return std::string(domain) + "." + k;
}

// What the walk down one descriptor's levels found.
struct Match {
  const Rule* rule = nullptr;
  // Per entry: the value share_threshold puts in its place (its wildcard pattern), or "".
  std::vector<std::string> share;
  bool any_share = false;
  std::string detailed_key;  // domain + ".key_value" per entry (detailed_metric)
  std::string vtm_key;       // the metric key with value_to_metric / wildcard rules applied
};

// One level's child for `entry`: "key_value" exactly, else the first wildcard that matches it,
// else the key-only default.
struct Step {
  const RuleSet::Node* next = nullptr;
  std::string_view matched_wildcard;  // the pattern, when a wildcard matched
  bool using_value = false;           // matched "key_value" (exactly or by a wildcard)
};
Step step_into(const RuleSet::Node& level, const Entry& entry, const std::string& final_key) {
  Step s;
  if (auto it = level.children.find(final_key); it != level.children.end()) s.next = it->second.get();
  if (!s.next) {
    for (const auto& [pattern, node] : level.wildcards) {
      if (wildcard_match(pattern, final_key)) {
        s.next = node;
        s.matched_wildcard = pattern;
        break;
      }
    }
  }
  s.using_value = s.next != nullptr;
  if (!s.next) {
    if (auto it = level.children.find(std::string(entry.key)); it != level.children.end()) s.next = it->second.get();
  }
  return s;
}

// The metric key's part for entry `i` after a step (value_to_metric, wildcards, share_threshold).
void add_metric_part(Match& m, size_t i, const Entry& e, const Step& s) {
  const std::string key_prefix = std::string(e.key) + "_";
  auto trim = [&](std::string_view v) { return v.starts_with(key_prefix) ? v.substr(key_prefix.size()) : v; };
  if (!s.matched_wildcard.empty() && s.next && s.next->share_threshold && !s.next->wildcard_pattern.empty()) {
    m.share[i] = std::string(trim(s.next->wildcard_pattern));
    m.any_share = true;
  }
  m.vtm_key += '.';
  m.vtm_key += e.key;
  if (!s.next) return;
  std::string_view use;
  if (!s.matched_wildcard.empty()) {
    if (!m.share[i].empty()) use = m.share[i];
    else if (s.next->value_to_metric) use = e.value;
    else use = trim(s.matched_wildcard);
  } else if (s.using_value || s.next->value_to_metric) {
    use = e.value;
  }
  if (!use.empty()) {
    m.vtm_key += '_';
    m.vtm_key += use;
  }
}

// Walks the tree level by level; a rule applies only at the level of the last entry.
Match match_levels(const RuleSet::Node& root, std::string_view domain, std::span<const Entry> entries) {
  Match m;
  m.share.resize(entries.size());
  m.detailed_key = domain;
  m.vtm_key = domain;
  std::string final_key;
  const RuleSet::Node* level = &root;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    final_key.assign(e.key);
    final_key += '_';
    final_key += e.value;
    m.detailed_key += '.';
    m.detailed_key += final_key;
    const Step s = step_into(*level, e, final_key);
    add_metric_part(m, i, e, s);
    if (s.next && s.next->rule && i + 1 == entries.size()) m.rule = s.next->rule;
    if (!s.next || s.next->children.empty()) break;
    level = s.next;
  }
  return m;
}

// The metric key of a configured rule's hit (detailed_metric, share_threshold, value_to_metric).
std::string stats_key_of(std::string_view domain, std::span<const Entry> entries, Match& m, bool& detailed) {
  const Rule& found = *m.rule;
  detailed = found.detailed_metric;
  if (!found.detailed_metric) return m.vtm_key != found.full_key ? std::move(m.vtm_key) : found.full_key;
  if (!m.any_share) return std::move(m.detailed_key);
  std::string k(domain);
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    k += '.';
    k += e.key;
    if (!m.share[i].empty()) {
      k += '_';
      k += m.share[i];
    } else if (!e.value.empty()) {
      k += '_';
      k += e.value;
    }
  }
  return k;
}

// Unlimited rules answer OK and count nothing; replaced rules act as no match.
void apply_replaces(std::vector<Applied>& out) {
  std::unordered_set<std::string_view> replaced;
  for (const Applied& a : out) {
    if (const Rule* r = a.rule()) {
      for (const std::string& name : r->replaces) replaced.insert(name);
    }
  }
  for (Applied& a : out) {
    const Rule* r = a.rule();
    if (!r) continue;
    if (r->unlimited) {
      a.unlimited = true;
      a.configured = nullptr;
      a.cache_key.clear();
      continue;
    }
    if (!r->name.empty() && replaced.count(r->name)) {
      a.configured = nullptr;
      a.override_rule.reset();
      a.cache_key.clear();
      a.stats_key.clear();
    }
  }
}

}  // namespace

Status RuleSet::resolve_override(std::string_view domain, size_t di, const Descriptor& desc, Applied& a) const {
  const std::optional<Unit> unit = unit_from_wire(desc.limit->unit);
  if (!unit) {
    return Status::invalid_argument("descriptor " + std::to_string(di) + ": limit override has unit " +
                                    std::to_string(desc.limit->unit) + " (expected SECOND=1 ... YEAR=6, WEEK=7)");
  }
  Rule r;
  r.requests_per_unit = desc.limit->requests_per_unit;
  r.unit = *unit;
  r.full_key = descriptor_key(domain, desc.entries);
  auto p = override_counter(*unit).with_limit(r.requests_per_unit);
  if (!p) return p.status();
  r.policy = std::move(*p);
  a.stats_key = r.full_key;
  a.override_rule = std::move(r);
  return {};
}

Status RuleSet::set_cache_key(std::string_view domain, size_t di, std::span<const Entry> entries,
                              std::span<const std::string> share, Applied& a) const {
  std::string& ck = a.cache_key;
  ck = cache_key_prefix_;
  ck += domain;
  ck += '_';
  for (size_t i = 0; i < entries.size(); ++i) {
    ck += entries[i].key;
    ck += '_';
    if (i < share.size() && !share[i].empty()) ck += share[i];
    else ck += entries[i].value;
    ck += '_';
  }
  if (ck.size() <= kMaxKeyLength) return {};
  return Status::invalid_argument("descriptor " + std::to_string(di) + ": its cache key is " +
                                  std::to_string(ck.size()) + " bytes, more than " + std::to_string(kMaxKeyLength));
}

Status RuleSet::resolve(std::string_view domain, std::span<const Descriptor> descriptors,
                        std::vector<Applied>& out) const {
  out.clear();
  out.resize(descriptors.size());
  auto dit = domains_.find(std::string(domain));
  if (dit == domains_.end()) return {};
  for (size_t di = 0; di < descriptors.size(); ++di) {
    const Descriptor& desc = descriptors[di];
    Applied& a = out[di];
    Match m;
    if (desc.limit) {
      RL_TRY(resolve_override(domain, di, desc, a));
    } else {
      m = match_levels(*dit->second, domain, desc.entries);
      if (m.rule) {
        a.configured = m.rule;
        a.stats_key = stats_key_of(domain, desc.entries, m, a.detailed);
      }
    }
    const Rule* rule = a.rule();
    if (!rule || rule->unlimited) continue;  // no cache key
    RL_TRY(set_cache_key(domain, di, desc.entries, m.any_share ? std::span<const std::string>(m.share)
                                                               : std::span<const std::string>(), a));
  }
  apply_replaces(out);
  return {};
}

}  // namespace ratelimit::rls
