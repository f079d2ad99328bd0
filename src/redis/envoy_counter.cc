// envoy_counter.cc — envoyproxy/ratelimit's counter layout (see envoy_counter.h).
#include "envoy_counter.h"

#include <hiredis/hiredis.h>

#include <charconv>
#include <vector>

#include "resp.h"

namespace ratelimit::redis_detail {
namespace {

// INCRBY then EXPIRE, as envoyproxy/ratelimit pipelines them; one script so that a key never
// exists without its TTL (the two commands of a pipeline may be split by a failure).
constexpr std::string_view kIncrExpire =
    "local n = redis.call('INCRBY', KEYS[1], ARGV[1]) "
    "redis.call('EXPIRE', KEYS[1], ARGV[2]) return n";

int64_t window_seconds(const Policy& policy) { return policy.window().count() / 1'000'000; }

int64_t window_start_us(const Policy& policy, int64_t now_us) {
  const int64_t w = policy.window().count();
  const int64_t t = now_us < 0 ? 0 : now_us;
  return t - t % w;
}

}  // namespace

std::string envoy_counter_key(std::string_view key, const Policy& policy, int64_t now_us) {
  std::string k(key);
  k += std::to_string(window_start_us(policy, now_us) / 1'000'000);
  return k;
}

std::string envoy_counter_command(const std::string& redis_key, const Policy& policy,
                                  int64_t cost, algo::Op op) {
  if (op == algo::Op::kPeek || cost == 0) {
    return encode_command(std::vector<std::string>{"GET", redis_key});
  }
  return encode_command(std::vector<std::string>{"EVAL", std::string(kIncrExpire), "1", redis_key,
                                                 std::to_string(cost),
                                                 std::to_string(window_seconds(policy))});
}

Result<Decision> envoy_counter_decision(const redisReply* reply, const Policy& policy,
                                        int64_t cost, algo::Op op, int64_t now_us) {
  if (reply == nullptr) return Status::unavailable("no reply");
  int64_t count = 0;
  const bool wrote = op == algo::Op::kAcquire && cost > 0;
  if (reply->type == REDIS_REPLY_INTEGER) {
    count = reply->integer - (wrote ? cost : 0);
  } else if (reply->type == REDIS_REPLY_STRING && !wrote) {
    const auto [p, ec] = std::from_chars(reply->str, reply->str + reply->len, count);
    if (ec != std::errc() || p != reply->str + reply->len) {
      return Status::unavailable("the counter holds '" + std::string(reply->str, reply->len) +
                                 "', not a count");
    }
  } else if (reply->type == REDIS_REPLY_NIL && !wrote) {
    count = 0;
  } else {
    return Status::unavailable(reply->type == REDIS_REPLY_ERROR
                                   ? "Redis refused the counter: " + std::string(reply->str, reply->len)
                                   : std::string("unexpected reply for the counter"));
  }
  algo::FixedWindowState s{window_start_us(policy, now_us), count < 0 ? 0 : count};
  return algo::decide(policy, s, now_us, cost, op);
}

}  // namespace ratelimit::redis_detail
