// test_rules.h — the RLQS rules the quota tests share: a bucket named by `name` limited to a
// global `rps` (the 300/s bucket), written once so the service and exchange tests read
// the same rule.
#pragma once

#include <cstdint>
#include <string>

#include "quota_rules.h"

namespace ratelimit::rlqs {

inline QuotaRule limit_rule(const std::string& name, int64_t rps) {
  QuotaRule r;
  r.match = {{"name", name}};
  r.action.kind = QuotaAction::Kind::kLimit;
  r.action.limit = rps;
  r.action.capacity_mrps = rps * 1000;
  return r;
}

}  // namespace ratelimit::rlqs
