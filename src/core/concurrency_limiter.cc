// concurrency_limiter.cc — ConcurrencyLimiter and its RAII Lease (see
// include/ratelimit/concurrency_limiter.h). Every operation is one store call of a concurrency
// policy (acquire, release, renew: the store's lease ops); nothing here decides anything.
// Invariant: held_ implies decision_.allowed; a Lease whose id is empty (admitted by a store's
// fail-open policy) never calls the store to release or renew.
#include "ratelimit/concurrency_limiter.h"

#include <future>
#include <utility>

namespace ratelimit {
namespace {

Status not_held() {
  return Status::invalid_argument("the lease is not held (denied, released or detached)");
}

}  // namespace

Lease::Lease(std::shared_ptr<Store> store, std::shared_ptr<const Policy> policy, std::string key,
             Decision decision)
    : store_(std::move(store)),
      policy_(std::move(policy)),
      key_(std::move(key)),
      decision_(decision),
      held_(decision.allowed) {}

Lease::~Lease() { release_in_background(); }

Lease::Lease(Lease&& other) noexcept
    : store_(std::move(other.store_)),
      policy_(std::move(other.policy_)),
      key_(std::move(other.key_)),
      decision_(other.decision_),
      held_(std::exchange(other.held_, false)) {}

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    release_in_background();
    store_ = std::move(other.store_);
    policy_ = std::move(other.policy_);
    key_ = std::move(other.key_);
    decision_ = other.decision_;
    held_ = std::exchange(other.held_, false);
  }
  return *this;
}

void Lease::release_in_background() {
  if (!held_) return;
  held_ = false;
  if (decision_.lease.empty()) return;  // admitted by fail-open: nothing stored
  // The completion keeps the store and the policy alive until the store answers.
  store_->release_async(*policy_, key_, decision_.lease,
                        [keep = store_, policy = policy_](Result<Decision>) {});
}

Result<bool> Lease::renew() {
  if (!held_) return not_held();
  if (decision_.lease.empty()) return true;  // fail-open: there is nothing to extend
  auto d = store_->renew(*policy_, key_, decision_.lease);
  if (!d) return d.status();
  if (d->reason == DecisionReason::kLeaseNotHeld) held_ = false;
  return d->reason != DecisionReason::kLeaseNotHeld;
}

Result<bool> Lease::release() {
  std::promise<Result<bool>> p;
  auto f = p.get_future();
  release_async([&p](Result<bool> r) { p.set_value(std::move(r)); });
  return f.get();
}

void Lease::release_async(std::function<void(Result<bool>)> done) {
  if (!held_) return done(not_held());
  held_ = false;
  if (decision_.lease.empty()) return done(false);
  store_->release_async(*policy_, key_, decision_.lease,
                        [keep = store_, policy = policy_, done = std::move(done)](
                            Result<Decision> d) {
                          if (!d) return done(d.status());
                          done(d->allowed && d->reason == DecisionReason::kWithinLimit);
                        });
}

LeaseId Lease::detach() {
  held_ = false;
  return decision_.lease;
}

Result<ConcurrencyLimiter> ConcurrencyLimiter::create(Policy policy, std::shared_ptr<Store> store) {
  if (store == nullptr) return Status::invalid_argument("ConcurrencyLimiter: the store is null");
  if (!policy.is_concurrency()) {
    return Status::invalid_argument("ConcurrencyLimiter: policy '" + policy.name() +
                                    "' is not a concurrency policy (" +
                                    algorithm_name(policy.algorithm()) + ")");
  }
  return ConcurrencyLimiter(std::make_shared<const Policy>(std::move(policy)), std::move(store));
}

Lease ConcurrencyLimiter::make_lease(std::string_view key, const Decision& d) const {
  return Lease(store_, policy_, std::string(key), d);
}

Result<Lease> ConcurrencyLimiter::acquire(std::string_view key, int64_t cost) const {
  auto d = store_->acquire(*policy_, key, cost);
  if (!d) return d.status();
  return make_lease(key, *d);
}

void ConcurrencyLimiter::acquire_async(std::string_view key, int64_t cost,
                                       std::function<void(Result<Lease>)> done) const {
  store_->acquire_async(*policy_, key, cost,
                        [self = *this, key = std::string(key), done = std::move(done)](
                            Result<Decision> d) {
                          if (!d) return done(d.status());
                          done(self.make_lease(key, *d));
                        });
}

Result<Decision> ConcurrencyLimiter::peek(std::string_view key, int64_t cost) const {
  return store_->peek(*policy_, key, cost);
}

}  // namespace ratelimit
