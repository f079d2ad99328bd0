// limiter.cc — Limiter: a Policy bound to a Store (see include/ratelimit/limiter.h).
#include "ratelimit/limiter.h"

#include <cassert>

namespace ratelimit {

Limiter::Limiter(Policy policy, std::shared_ptr<Store> store)
    : policy_(std::move(policy)), store_(std::move(store)) {
  assert(store_ != nullptr);
}

Result<Decision> Limiter::acquire(std::string_view key, int64_t cost) const {
  return store_->acquire(policy_, key, cost);
}

Result<Decision> Limiter::peek(std::string_view key, int64_t cost) const {
  return store_->peek(policy_, key, cost);
}

Result<Decision> Limiter::report(std::string_view key, int64_t cost) const {
  return store_->report(policy_, key, cost);
}

Status Limiter::reset(std::string_view key) const { return store_->reset(policy_, key); }

void Limiter::acquire_async(std::string_view key, int64_t cost, DecisionCallback done) const {
  store_->acquire_async(policy_, key, cost, std::move(done));
}

void Limiter::peek_async(std::string_view key, int64_t cost, DecisionCallback done) const {
  store_->peek_async(policy_, key, cost, std::move(done));
}

}  // namespace ratelimit
