// concurrency_limiter.h — a concurrency Policy bound to a Store: at most `limit` units in
// flight per key, each admitted request holding a Lease until it is done.
//
//   auto policy = ratelimit::Policy::concurrency(10, std::chrono::seconds(30)).value();
//   auto db = ratelimit::ConcurrencyLimiter::create(policy, store).value();
//   auto lease = db.acquire("tenant:7").value();
//   if (!lease.held()) { /* answer 429; lease.decision().retry_after says how long to wait */ }
//   run_query();          // long work: lease.renew() before lease_ttl passes
//   // ~Lease releases the unit (or call lease.release() to learn whether it was still held)
//
// Why a guard (Netflix concurrency-limits' listener, in C++ RAII): a unit taken must be given
// back on every path — exceptions and early returns included — and only by its owner. The
// lease's id (128 random bits drawn by the store) is the ownership: a release after the lease
// expired, or of someone else's lease, frees nothing, so a slow holder can never free the unit
// a newer holder took after its lease lapsed. A holder that dies (kill -9) never releases: its
// units come back when lease_ttl passes without a renew, not before.
//
// Thread-safety: ConcurrencyLimiter is thread-safe and cheap to copy (copies share the store).
// A Lease is owned by one thread at a time (like std::unique_ptr): its methods must not be
// called concurrently on the same Lease; distinct Leases are independent. The destructor never
// blocks: it releases with the store's asynchronous call, so a Lease may be dropped anywhere,
// including inside a store completion (where the blocking methods below must not be called).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "ratelimit/decision.h"
#include "ratelimit/policy.h"
#include "ratelimit/store.h"

namespace ratelimit {

class Lease {
 public:
  // An empty lease: holds nothing (held() is false, decision() is a default Decision).
  Lease() = default;
  // Releases a held lease without waiting (the answer is not reported: call release() first
  // to learn it).
  ~Lease();
  Lease(Lease&& other) noexcept;
  // Releases what this lease held (as the destructor does), then takes `other`'s.
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  // True while this object owns an admitted lease it has not released (it may have expired in
  // the store meanwhile: renew() or release() tells).
  bool held() const { return held_; }
  explicit operator bool() const { return held_; }
  // The acquire's Decision: admitted (lease id in decision().lease), or why not
  // (retry_after: the wait after which the same request would be admitted if no lease is
  // released before; kExceedsCapacity: cost above the limit, never).
  const Decision& decision() const { return decision_; }
  const LeaseId& id() const { return decision_.lease; }
  const std::string& key() const { return key_; }

  // Extends the lease to now + lease_ttl. Returns true when it was still held (extended),
  // false when it had expired (or was reset): the units are gone and held() becomes false.
  // Errors: kInvalidArgument when !held(); the store's errors. Blocking.
  Result<bool> renew();
  // Gives the units back now. Returns true when the lease was still held (the units were
  // freed by this call), false when it had expired before (the work overran lease_ttl).
  // held() is false afterwards in every case. Errors: kInvalidArgument when !held(); the
  // store's errors. Blocking.
  Result<bool> release();
  // The same without blocking: `done` receives what release() would return.
  void release_async(std::function<void(Result<bool>)> done);
  // Gives up ownership without releasing: the units stay held until lease_ttl passes (or
  // until someone releases the returned id). held() is false afterwards.
  [[nodiscard]] LeaseId detach();

 private:
  friend class ConcurrencyLimiter;
  Lease(std::shared_ptr<Store> store, std::shared_ptr<const Policy> policy, std::string key,
        Decision decision);
  void release_in_background();

  std::shared_ptr<Store> store_;
  std::shared_ptr<const Policy> policy_;
  std::string key_;
  Decision decision_;
  bool held_ = false;
};

class ConcurrencyLimiter {
 public:
  // kInvalidArgument unless `policy` is a concurrency policy (Policy::concurrency) and store
  // is not null.
  static Result<ConcurrencyLimiter> create(Policy policy, std::shared_ptr<Store> store);

  // Takes `cost` units of `key` if they fit: a held Lease, or an empty one whose decision()
  // says why not. Errors: invalid key or cost (kInvalidArgument). When the store fails, its
  // failure policy answers: fail-open admits without a stored lease (held() is true, id()
  // empty; releasing it reports false), fail-closed denies. Blocking.
  Result<Lease> acquire(std::string_view key, int64_t cost = 1) const;
  // The same, asynchronous (store.h's completion contract).
  void acquire_async(std::string_view key, int64_t cost,
                     std::function<void(Result<Lease>)> done) const;
  // What acquire would answer now; takes nothing.
  Result<Decision> peek(std::string_view key, int64_t cost = 1) const;

  const Policy& policy() const { return *policy_; }
  const std::shared_ptr<Store>& store() const { return store_; }

 private:
  ConcurrencyLimiter(std::shared_ptr<const Policy> policy, std::shared_ptr<Store> store)
      : policy_(std::move(policy)), store_(std::move(store)) {}
  Lease make_lease(std::string_view key, const Decision& d) const;

  std::shared_ptr<const Policy> policy_;
  std::shared_ptr<Store> store_;
};

}  // namespace ratelimit
