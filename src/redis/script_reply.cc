// script_reply.cc — reading the Redis store's script replies (see script_codec.h): the four
// integers per decision of push_decision in common.lua (an adaptive concurrency decision's
// learned limit inside its reason), the consistency modes' six integers, and the two error
// replies the invoker recovers from (NOSCRIPT, function not found). Pure functions; nothing
// from the wire is cast unchecked.
#include <hiredis/hiredis.h>

#include <initializer_list>

#include "script_codec.h"

namespace ratelimit::redis_detail {

Result<algo::SharedView> decode_shared_view(const redisReply* reply) {
  if (reply == nullptr) return Status::internal("no reply");
  if (reply->type == REDIS_REPLY_ERROR) {
    return Status::internal("Redis error: " + std::string(reply->str, reply->len));
  }
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 6) {
    return Status::internal("unexpected reply to reserve/add_hits (want 6 integers)");
  }
  int64_t v[6];
  for (size_t i = 0; i < 6; ++i) {
    const redisReply* e = reply->element[i];
    if (e == nullptr || e->type != REDIS_REPLY_INTEGER) {
      return Status::internal("unexpected reply to reserve/add_hits (want 6 integers)");
    }
    v[i] = e->integer;
  }
  return algo::SharedView{v[0], v[1], v[2], v[3], v[4], v[5]};
}

namespace {

// push_decision in common.lua: reason, remaining, reset_after_us, and delay_us when allowed
// (reason kWithinLimit), retry_after_us when not.
constexpr size_t kFields = 4;

// Checks the reply's shape: an array of kFields integers per decision, `count` decisions.
Status check_reply(const redisReply* reply, size_t count) {
  if (reply == nullptr) return Status::internal("no reply");
  if (reply->type == REDIS_REPLY_ERROR) {
    return Status::internal("Redis error: " + std::string(reply->str, reply->len));
  }
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != kFields * count) {
    return Status::internal("unexpected script reply (type " + std::to_string(reply->type) +
                            ", " + std::to_string(reply->elements) + " elements)");
  }
  return {};
}

// The reasons a script answers (push_decision in common.lua numbers them as DecisionReason
// does); nullopt for any other number, so nothing from the wire is cast unchecked.
std::optional<DecisionReason> script_reason(int64_t v) {
  for (DecisionReason r : {DecisionReason::kWithinLimit, DecisionReason::kOverLimit,
                           DecisionReason::kExceedsCapacity, DecisionReason::kLeaseNotHeld,
                           DecisionReason::kPolicyConflict}) {
    if (v == static_cast<int64_t>(r)) return r;
  }
  return std::nullopt;
}

// Decision `index` of a reply check_reply accepted.
Result<Decision> decision_at(const redisReply* reply, size_t index, int64_t limit) {
  int64_t f[kFields];
  for (size_t j = 0; j < kFields; ++j) {
    const redisReply* e = reply->element[index * kFields + j];
    if (e->type != REDIS_REPLY_INTEGER) return Status::internal("non-integer field in reply");
    f[j] = static_cast<int64_t>(e->integer);
  }
  // An adaptive concurrency policy's learned limit rides in the reason (common.lua
  // push_decision): reason + kLimitShift × limit.
  constexpr int64_t kLimitShift = 16;
  if (f[0] >= kLimitShift) {
    limit = f[0] / kLimitShift;
    f[0] %= kLimitShift;
  }
  const std::optional<DecisionReason> reason = script_reason(f[0]);
  if (!reason) {
    return Status::internal("script reply out of range (reason " + std::to_string(f[0]) + ")");
  }
  Decision d;
  d.reason = *reason;
  d.allowed = d.reason == DecisionReason::kWithinLimit;
  d.limit = limit;
  d.remaining = f[1];
  d.reset_after = Micros{f[2]};
  (d.allowed ? d.delay : d.retry_after) = Micros{f[3]};
  return d;
}

}  // namespace

Result<std::vector<Decision>> decode_decisions(const redisReply* reply,
                                               std::span<const int64_t> limits) {
  if (Status s = check_reply(reply, limits.size()); !s.is_ok()) return s;
  std::vector<Decision> out;
  out.reserve(limits.size());
  for (size_t i = 0; i < limits.size(); ++i) {
    auto d = decision_at(reply, i, limits[i]);
    if (!d.ok()) return d.status();
    out.push_back(*d);
  }
  return out;
}

Result<Decision> decode_decision_at(const redisReply* reply, size_t index, size_t count,
                                    int64_t limit) {
  if (Status s = check_reply(reply, count); !s.is_ok()) return s;
  if (index >= count) return Status::internal("decision index out of range");
  return decision_at(reply, index, limit);
}

bool is_noscript(const redisReply* reply) {
  return reply != nullptr && reply->type == REDIS_REPLY_ERROR && reply->len >= 8 &&
         std::string_view(reply->str, 8) == "NOSCRIPT";
}

bool is_function_not_found(const redisReply* reply) {
  constexpr std::string_view kText = "ERR Function not found";
  return reply != nullptr && reply->type == REDIS_REPLY_ERROR && reply->len >= kText.size() &&
         std::string_view(reply->str, kText.size()) == kText;
}

}  // namespace ratelimit::redis_detail
