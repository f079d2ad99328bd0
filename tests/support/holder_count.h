// holder_count.h — test support: how many leases are held at once, counted from outside the
// store, with a gate that makes "the key was saturated" an event instead of a race.
//
// Why: the concurrency tests assert two things about `limit` leases on one key: never more
// than `limit` held at once (the safety property), and exactly `limit` at some instant (the key
// was saturated, so the first check was not vacuous). Holding each lease for a fixed time and
// hoping `limit` of them overlap fails on a fast machine, where a holder can finish before the
// tenth acquire is answered (CI saw a peak of 9). So the first `limit` holders wait, before
// releasing, until `limit` hold at once; after that every holder just holds its `hold`.
//
// Invariants: a holder calls held() after its acquire was admitted and releasing() before it
// releases, so the count never exceeds what the store holds; a count above the limit therefore
// proves an over-admission. The gate's wait is bounded by `give_up_at`: a store that never
// admits `limit` at once leaves saturated() false and the test fails instead of hanging.
// Thread-safe; header-only.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace ratelimit::testing {

class HolderCount {
 public:
  HolderCount(int limit, std::chrono::steady_clock::time_point give_up_at)
      : limit_(limit), give_up_at_(give_up_at) {}

  // A lease was admitted. Until `limit` are held at once, returns only when they are (or at
  // give_up_at), so the lease is still held when the peak is reached.
  void held() {
    std::unique_lock lock(mu_);
    ++now_;
    peak_ = std::max(peak_, now_);
    if (saturated_) return;
    if (now_ >= limit_) {
      saturated_ = true;
      cv_.notify_all();
      return;
    }
    cv_.wait_until(lock, give_up_at_, [&] { return saturated_; });
  }

  // The holder is about to release its lease.
  void releasing() {
    std::lock_guard lock(mu_);
    --now_;
  }

  // Most leases held at once.
  int peak() const {
    std::lock_guard lock(mu_);
    return peak_;
  }

  // Whether `limit` were held at once at some instant.
  bool saturated() const {
    std::lock_guard lock(mu_);
    return saturated_;
  }

 private:
  const int limit_;
  const std::chrono::steady_clock::time_point give_up_at_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int now_ = 0, peak_ = 0;
  bool saturated_ = false;
};

}  // namespace ratelimit::testing
