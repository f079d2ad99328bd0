// redis_store_shared.cc — RedisStore's shared-count calls for the distributed store
// (include/ratelimit/shared_counts.h): reserve_async (take a share of the limit, giving back an
// unused one) and add_hits_async (push local hits), one script each.
//
// Why its own file: these are not decisions — they answer a SharedView or an error, never a
// failure-policy decision — and only fixed_window and sliding_window_counter define them.
//
// Invariants: `done` is called exactly once; invalid input answers kInvalidArgument before
// anything is sent; a transport or reply failure is counted and answered as an error.
#include <hiredis/hiredis.h>

#include "redis_store_impl.h"

namespace ratelimit {
using namespace redis_detail;

void RedisStore::Impl::run_shared(const ScriptCall& call, SharedViewCallback done) {
  invoker->invoke(call, [this, done = std::move(done)](const Status& error,
                                                       const redisReply* reply) {
    Status why = error;
    if (why.is_ok()) {
      auto view = decode_shared_view(reply);
      if (view.ok()) {
        counters.commands.fetch_add(1, std::memory_order_relaxed);
        return done(*view);
      }
      why = Status::unavailable(view.status().message());
    }
    count_error(why);
    done(why);
  });
}

namespace {

Status check_shared(const Policy& policy, std::string_view key, std::initializer_list<int64_t> counts) {
  if (Status s = validate_key(key); !s.is_ok()) return s;
  if (policy.algorithm() != Algorithm::kFixedWindow &&
      policy.algorithm() != Algorithm::kSlidingWindowCounter) {
    return Status::invalid_argument(std::string("reserve and add_hits are defined for fixed_window and "
                                                "sliding_window_counter only, not ") +
                                    algorithm_name(policy.algorithm()));
  }
  for (int64_t n : counts) {
    if (n < 0 || n > kMaxCost) return Status::invalid_argument("unit counts must be 0 ... kMaxCost");
  }
  return {};
}

}  // namespace

void RedisStore::reserve_async(const Policy& policy, std::string_view key,
                               int64_t give_back_window_us, int64_t give_back, int64_t want,
                               SharedViewCallback done) {
  if (Status s = check_shared(policy, key, {give_back, want}); !s.is_ok()) return done(s);
  impl_->run_shared(reserve_call(impl_->options.key_prefix, policy, key, give_back_window_us,
                                 give_back, want, impl_->now_arg()),
                    std::move(done));
}

void RedisStore::add_hits_async(const Policy& policy, std::string_view key, int64_t window_us,
                                int64_t hits, SharedViewCallback done) {
  if (Status s = check_shared(policy, key, {hits}); !s.is_ok()) return done(s);
  impl_->run_shared(add_hits_call(impl_->options.key_prefix, policy, key, window_us, hits,
                                  impl_->now_arg()),
                    std::move(done));
}

}  // namespace ratelimit
