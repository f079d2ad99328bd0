// store.h — where limit state lives: the interface every store implements (memory, Redis).
//
// Why asynchronous at heart: a networked store must keep many requests in flight on a few
// connections (pipelining), so each operation takes a completion that the store calls exactly
// once, on a thread of its choosing. The blocking forms are conveniences for embedding and
// tests; a store whose work is synchronous (MemoryStore) overrides them to avoid any
// hand-off.
// Contract for every implementation:
//   - Thread-safe: any method may be called from any thread, concurrently.
//   - The completion is called exactly once, possibly before the call returns (inline), and
//     must not throw. The store copies `key` and the policies before returning, so the caller's
//     buffers may die immediately.
//   - Errors (Result not ok) are for invalid input (kInvalidArgument, kResourceExhausted).
//     When the backing service fails, a store applies its configured failure policy and
//     answers a Decision with reason kStoreFailedOpen / kStoreFailedClosed instead.
//   - State is namespaced by policy name: the same key under two policies is two states.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "ratelimit/decision.h"
#include "ratelimit/policy.h"
#include "ratelimit/status.h"

namespace ratelimit {

inline constexpr size_t kMaxKeyLength = 512;  // bytes; longer keys are kInvalidArgument

// Checks a user key: 1 ... kMaxKeyLength bytes. Any byte values are allowed; stores must keep
// keys from colliding or escaping their namespace.
Status validate_key(std::string_view key);

using DecisionCallback = std::function<void(Result<Decision>)>;
// One Decision per policy, in the order given.
using DecisionsCallback = std::function<void(Result<std::vector<Decision>>)>;
using StatusCallback = std::function<void(Status)>;

class Store {
 public:
  virtual ~Store() = default;

  // Decides `cost` units for `key` under `policy` and consumes them when admitted.
  virtual void acquire_async(const Policy& policy, std::string_view key, int64_t cost,
                             DecisionCallback done) = 0;
  // What acquire would answer now; changes nothing.
  virtual void peek_async(const Policy& policy, std::string_view key, int64_t cost,
                          DecisionCallback done) = 0;
  // Several limits on one key, all or nothing: if any denies, none consumes. Each Decision is
  // that policy's answer (admitted ones report what they would leave if all had admitted).
  // Precondition: 1 ... 16 policies with distinct names.
  virtual void acquire_all_async(std::span<const Policy> policies, std::string_view key,
                                 int64_t cost, DecisionsCallback done) = 0;
  // Forgets `key` under `policy`: its next request is treated as the first.
  virtual void reset_async(const Policy& policy, std::string_view key, StatusCallback done) = 0;

  // Blocking conveniences: wait for the completion. The defaults wrap the async forms.
  virtual Result<Decision> acquire(const Policy& policy, std::string_view key, int64_t cost = 1);
  virtual Result<Decision> peek(const Policy& policy, std::string_view key, int64_t cost = 1);
  virtual Result<std::vector<Decision>> acquire_all(std::span<const Policy> policies,
                                                    std::string_view key, int64_t cost = 1);
  virtual Status reset(const Policy& policy, std::string_view key);
};

inline constexpr size_t kMaxPoliciesPerCall = 16;

// Validates the shared preconditions of acquire_all: 1 ... kMaxPoliciesPerCall policies, no
// name twice, a valid key and cost. Stores call it before touching state.
Status validate_acquire_all(std::span<const Policy> policies, std::string_view key, int64_t cost);

}  // namespace ratelimit
