// rule_set_detail.h — what the parts of the RuleSet implementation share (internal to src/rls):
// the descriptor tree's node, envoyproxy/ratelimit's counter policy, and the YAML typing rules
// the loader applies. The parts:
//   rule_set.cc       units, names (wildcards, stat names), hit statistics, the queries
//   rule_set_match.cc resolve() — the matching that runs on every request
//   rule_set_load.cc  configuration files -> RuleSet (the two passes, every semantic check)
//   rule_set_yaml.cc  how a YAML leaf is typed as yaml.v2 types it, and `metadata` as JSON
//
// Why split: loading and matching were one 893-line file; they share only this.
// Invariants: a Node is immutable once RuleSet::load returns; envoy_counter names its policy by
// unit only (see there).
// Thread-safety: pure functions; a Node is read-only after loading.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "rule_set.h"
#include "strict_reader.h"
#include "try.h"  // RL_TRY_ASSIGN

namespace ratelimit::rls {

struct RuleSet::Node {
  // Children by composite key: "key" (default) or "key_value" (value may hold '*').
  std::unordered_map<std::string, std::unique_ptr<Node>> children;
  // Children whose composite key holds '*', in file order: the first match wins.
  std::vector<std::pair<std::string, const Node*>> wildcards;
  const Rule* rule = nullptr;
  bool value_to_metric = false;
  bool share_threshold = false;
  std::string wildcard_pattern;  // the composite key, when share_threshold
  // A domain's root only: the `all_or_nothing` extension as its file(s) set it (unset = off).
  std::optional<bool> all_or_nothing;
};

namespace rule_set_detail {

inline constexpr std::array<std::string_view, 16> kEnvoyKeys = {
    "domain", "key", "value", "descriptors", "rate_limit", "unit", "requests_per_unit",
    "unlimited", "shadow_mode", "quota_mode", "name", "replaces", "detailed_metric",
    "value_to_metric", "share_threshold", "metadata"};
// Our extensions, accepted inside rate_limit only: the algorithm and its parameters, and the
// consistency keys of ratelimitd's own policies (yaml::kConsistencyKeys, read by the same code).
inline constexpr std::array<std::string_view, 7> kExtensionKeys = {
    "algorithm", "burst", "mode", "consistency", "sync_interval", "lease_max", "lease_ttl"};
// Our extensions, accepted at a file's top level (beside `domain`) only.
inline constexpr std::array<std::string_view, 1> kRootExtensionKeys = {"all_or_nothing"};

bool contains(std::span<const std::string_view> list, std::string_view k);
// line_of, is_plain and is_yaml_bool are the strict reader's (src/yaml/strict_reader.h).
using yaml::is_plain;
using yaml::is_yaml_bool;
using yaml::line_of;
// YAML 1.1 plain scalars that yaml.v2 reads as something other than a string, int or bool
// (a float, or an integer beyond int64): envoyproxy/ratelimit refuses them as leaves.
bool is_float_like(const std::string& s);
// `metadata` as compact JSON: plain numbers and booleans keep their type, the rest are strings.
void to_json(const YAML::Node& n, std::string& out);
// envoyproxy/ratelimit's counter for a rule of `rpu` per `unit` (the default, and every
// request's limit override): one counter per (cache key, window), whatever the limit — so an
// override and the configured limit count together, and a reload that changes
// requests_per_unit keeps the window's count. The policy's name, which names its state in
// every store, therefore carries the unit and not the limit (stores apply the latest
// parameters seen under a name to its state).
Result<Policy> envoy_counter(int64_t rpu, Unit unit);

}  // namespace rule_set_detail
}  // namespace ratelimit::rls
