// quota_rules.cc — the first RLQS rule matching a bucket (see quota_rules.h).
// Invariant: a rule's and a bucket's pairs are sorted by key, so matching is one merge pass.
#include "quota_rules.h"

namespace ratelimit::rlqs {
namespace {

bool holds(const BucketKey& id, const BucketKey& match) {
  auto it = id.begin();
  for (const auto& [key, value] : match) {
    while (it != id.end() && it->first < key) ++it;
    if (it == id.end() || it->first != key) return false;
    if (value != "*" && it->second != value) return false;
  }
  return true;
}

}  // namespace

const QuotaAction& QuotaRules::find(std::string_view domain, const BucketKey& id) const {
  for (const QuotaRule& r : rules) {
    if ((r.domain.empty() || r.domain == domain) && holds(id, r.match)) return r.action;
  }
  return unmatched;
}

}  // namespace ratelimit::rlqs
