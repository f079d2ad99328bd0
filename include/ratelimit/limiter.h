// limiter.h — a Policy bound to a Store: the object most embedders use.
//
//   auto store = std::make_shared<ratelimit::MemoryStore>();
//   auto policy = ratelimit::Policy::token_bucket(10, 20).value();
//   ratelimit::Limiter limiter(policy, store);
//   if (!limiter.acquire("user:42")->allowed) { /* answer 429 */ }
//
// Thread-safe (as thread-safe as its Store, which must be). Cheap to copy: copies share the
// store.
#pragma once

#include <memory>
#include <string_view>

#include "ratelimit/decision.h"
#include "ratelimit/policy.h"
#include "ratelimit/store.h"

namespace ratelimit {

class Limiter {
 public:
  // Precondition: store != nullptr.
  Limiter(Policy policy, std::shared_ptr<Store> store);

  // Blocking. Errors: invalid key or cost (kInvalidArgument). Over the limit is a Decision.
  Result<Decision> acquire(std::string_view key, int64_t cost = 1) const;
  Result<Decision> peek(std::string_view key, int64_t cost = 1) const;
  // Usage known after the fact: recorded even past the limit, or given back when negative
  // (Store::report; docs/usage.md). The reservation pattern: acquire(key, estimate), serve,
  // report(key, actual - estimate).
  Result<Decision> report(std::string_view key, int64_t cost) const;
  Status reset(std::string_view key) const;

  // Asynchronous forms; see Store for the completion contract.
  void acquire_async(std::string_view key, int64_t cost, DecisionCallback done) const;
  void peek_async(std::string_view key, int64_t cost, DecisionCallback done) const;

  const Policy& policy() const { return policy_; }
  const std::shared_ptr<Store>& store() const { return store_; }

 private:
  Policy policy_;
  std::shared_ptr<Store> store_;
};

}  // namespace ratelimit
