// test_stores.h — wrappers the DenialCache tests put between the cache and a real store: one
// that counts the calls reaching the store (to prove an answer came from the cache), and one
// that holds the store's completions until the test releases them (to put a reset between a
// decision and its answer). Both forward every call to the real store unchanged (through the
// two doors of store.h, which every other call reaches).
// Thread-safe: counters are atomics; the held completions are under a mutex.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "ratelimit/store.h"

namespace ratelimit::testing {

// Counts every call through the door (decide_manys, resets) and, among them, the shapes the
// wrappers make: a single kIndependent acquire or peek, and an all-or-nothing call on one key
// of acquires only (acquire_all's).
class CountingStore final : public StoreDecorator {
 public:
  explicit CountingStore(std::shared_ptr<Store> inner) : StoreDecorator(std::move(inner)) {}
  void decide_many_async(std::span<const StoreOp> ops, Atomicity a, OpsCallback done) override {
    ++decide_manys;
    if (a == Atomicity::kAllOrNothing && one_key_acquires(ops)) {
      ++acquire_alls;
    } else if (ops.size() == 1 && ops[0].kind == StoreOp::Kind::kAcquire) {
      ++acquires;
    } else if (ops.size() == 1 && ops[0].kind == StoreOp::Kind::kPeek) {
      ++peeks;
    }
    StoreDecorator::decide_many_async(ops, a, std::move(done));
  }
  void reset_async(const Policy& p, std::string_view key, StatusCallback done) override {
    ++resets;
    StoreDecorator::reset_async(p, key, std::move(done));
  }
  int calls() const { return decide_manys + resets; }

  std::atomic<int> acquires{0}, peeks{0}, acquire_alls{0}, decide_manys{0}, resets{0};

 private:
  static bool one_key_acquires(std::span<const StoreOp> ops) {
    for (const StoreOp& op : ops) {
      if (op.key != ops[0].key || op.kind != StoreOp::Kind::kAcquire) return false;
    }
    return true;
  }
};

// Decides at once (through the real store) but delivers the answers of single acquires and
// peeks only on release().
class DeferredStore final : public StoreDecorator {
 public:
  explicit DeferredStore(std::shared_ptr<Store> inner) : StoreDecorator(std::move(inner)) {}
  void decide_many_async(std::span<const StoreOp> ops, Atomicity a, OpsCallback done) override {
    const bool single = ops.size() == 1 && a == Atomicity::kIndependent &&
                        (ops[0].kind == StoreOp::Kind::kAcquire || ops[0].kind == StoreOp::Kind::kPeek);
    if (!single) return StoreDecorator::decide_many_async(ops, a, std::move(done));
    StoreDecorator::decide_many_async(
        ops, a, [this, done = std::move(done)](Result<std::span<const Decision>> r) {
          Result<std::vector<Decision>> copy =
              r.ok() ? Result<std::vector<Decision>>(std::vector<Decision>(r->begin(), r->end()))
                     : Result<std::vector<Decision>>(r.status());
          hold([done, copy] {
            if (!copy.ok()) return done(copy.status());
            done(std::span<const Decision>(*copy));
          });
        });
  }
  // Delivers every held answer, in order.
  void release() {
    std::vector<std::function<void()>> held;
    {
      std::lock_guard lock(mu_);
      held.swap(held_);
    }
    for (auto& f : held) f();
  }
  size_t held() {
    std::lock_guard lock(mu_);
    return held_.size();
  }

 private:
  void hold(std::function<void()> f) {
    std::lock_guard lock(mu_);
    held_.push_back(std::move(f));
  }
  std::mutex mu_;
  std::vector<std::function<void()>> held_;
};

}  // namespace ratelimit::testing
