// test_stores.h — wrappers the DenialCache tests put between the cache and a real store: one
// that counts the calls reaching the store (to prove an answer came from the cache), and one
// that holds the store's completions until the test releases them (to put a reset between a
// decision and its answer). Both forward every call to the real store unchanged.
// Thread-safe: counters are atomics; the held completions are under a mutex.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "ratelimit/store.h"

namespace ratelimit::testing {

class CountingStore final : public Store {
 public:
  explicit CountingStore(std::shared_ptr<Store> inner) : inner_(std::move(inner)) {}
  void acquire_async(const Policy& p, std::string_view key, int64_t cost,
                     DecisionCallback done) override {
    ++acquires;
    inner_->acquire_async(p, key, cost, std::move(done));
  }
  void peek_async(const Policy& p, std::string_view key, int64_t cost,
                  DecisionCallback done) override {
    ++peeks;
    inner_->peek_async(p, key, cost, std::move(done));
  }
  void acquire_all_async(std::span<const Policy> ps, std::string_view key, int64_t cost,
                         DecisionsCallback done) override {
    ++acquire_alls;
    inner_->acquire_all_async(ps, key, cost, std::move(done));
  }
  void decide_many_async(std::span<const StoreOp> ops, Atomicity a, OpsCallback done) override {
    ++decide_manys;
    inner_->decide_many_async(ops, a, std::move(done));
  }
  void reset_async(const Policy& p, std::string_view key, StatusCallback done) override {
    ++resets;
    inner_->reset_async(p, key, std::move(done));
  }
  int calls() const { return acquires + peeks + acquire_alls + decide_manys + resets; }

  std::atomic<int> acquires{0}, peeks{0}, acquire_alls{0}, decide_manys{0}, resets{0};

 private:
  std::shared_ptr<Store> inner_;
};

// Decides at once (through the real store) but delivers acquire/peek answers only on release().
class DeferredStore final : public Store {
 public:
  explicit DeferredStore(std::shared_ptr<Store> inner) : inner_(std::move(inner)) {}
  void acquire_async(const Policy& p, std::string_view key, int64_t cost,
                     DecisionCallback done) override {
    inner_->acquire_async(p, key, cost, [this, done = std::move(done)](Result<Decision> r) {
      hold([done, r] { done(r); });
    });
  }
  void peek_async(const Policy& p, std::string_view key, int64_t cost,
                  DecisionCallback done) override {
    inner_->peek_async(p, key, cost, [this, done = std::move(done)](Result<Decision> r) {
      hold([done, r] { done(r); });
    });
  }
  void acquire_all_async(std::span<const Policy> ps, std::string_view key, int64_t cost,
                         DecisionsCallback done) override {
    inner_->acquire_all_async(ps, key, cost, std::move(done));
  }
  void decide_many_async(std::span<const StoreOp> ops, Atomicity a, OpsCallback done) override {
    inner_->decide_many_async(ops, a, std::move(done));
  }
  void reset_async(const Policy& p, std::string_view key, StatusCallback done) override {
    inner_->reset_async(p, key, std::move(done));
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
  std::shared_ptr<Store> inner_;
  std::mutex mu_;
  std::vector<std::function<void()>> held_;
};

}  // namespace ratelimit::testing
