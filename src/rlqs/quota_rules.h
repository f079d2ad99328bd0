// quota_rules.h — what ratelimitd's Rate Limit Quota Service (RLQS) does with each bucket: the
// rules of the `rlqs:` section (docs/envoy.md "Rate Limit Quota Service") as a value. A rule
// names a domain (or any) and key/value pairs a bucket_id must hold; its action is a global
// limit (requests per unit, divided among the Envoys reporting the bucket: fair_share.h), allow
// (ALLOW_ALL) or deny (DENY_ALL). The first rule that matches wins; a bucket no rule matches
// gets `unmatched` (allow unless configured: as RLS leaves a descriptor no rule names unlimited).
//
// Why a plain value: parsed and validated aside (src/server/config/config_rlqs.cc), then
// published whole to the service (QuotaService::set_rules), so a reload never half-applies.
// Each distinct bucket_id a rule matches is its own bucket with the rule's whole limit (as each
// key of a policy has the policy's limit).
// Thread-safety: immutable once built; shared as shared_ptr<const QuotaRules>.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ratelimit::rlqs {

// A bucket_id: Envoy's map<string, string>, its pairs sorted by key (the order Envoy sends them
// in must not matter; a map has no repeated key).
using BucketKey = std::vector<std::pair<std::string, std::string>>;

// Bounds on a bucket_id: more pairs or bytes than this and the bucket is ignored (no action).
inline constexpr size_t kMaxBucketPairs = 32;
inline constexpr size_t kMaxBucketBytes = 1024;  // Σ key and value lengths

struct QuotaAction {
  enum class Kind : uint8_t { kAllow, kDeny, kLimit };
  Kind kind = Kind::kAllow;
  int64_t limit = 0;          // kLimit: requests per unit
  int64_t unit_s = 1;         // kLimit: the unit in seconds
  int64_t capacity_mrps = 0;  // kLimit: fair_share::capacity_mrps(limit, unit_s)
  friend bool operator==(const QuotaAction&, const QuotaAction&) = default;
};

struct QuotaRule {
  std::string domain;  // "" = any domain
  // Pairs the bucket_id must hold (sorted by key); a value "*" only needs the key.
  BucketKey match;
  QuotaAction action;
  int line = 0;  // where it was defined, for messages
  friend bool operator==(const QuotaRule&, const QuotaRule&) = default;
};

struct QuotaRules {
  std::vector<QuotaRule> rules;  // in file order: the first match wins
  QuotaAction unmatched;         // allow unless `unmatched:` says otherwise
  // The Envoys' reporting_interval as the operator knows it (`reporting_interval:`, whole
  // seconds): the TTL of an assignment whose client's interval is not known yet.
  int64_t reporting_interval_s = 1;
  // The action for a bucket of `domain` (sorted `id`).
  const QuotaAction& find(std::string_view domain, const BucketKey& id) const;
  friend bool operator==(const QuotaRules&, const QuotaRules&) = default;
};

}  // namespace ratelimit::rlqs
