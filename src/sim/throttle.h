// throttle.h — throttling in the simulator: requests that last (a duration each), a
// concurrency policy (at most `limit` requests of a key in flight), and waiting instead of
// refusing (a bounded FIFO per key, `max_wait` / `max_queue`), run side by side with the five
// rate algorithms on the same stream, so that queueing delay and refusals compare.
//
// Why apart from replay.h: the replay decides every request at its arrival, on the library's
// functions, and its tables are fixed by published figures; throttling needs time to pass
// between a request's arrival and its decision (a waiter is decided again when a lease frees
// or its retry_after comes) and between admission and release (its duration). So this engine
// is event-driven: before each arrival at t it runs every release, wake-up and deadline due at
// or before t (in that order at one instant, so a freed slot goes to the queue before a
// newcomer — FIFO, no overtaking).
// Semantics (issue 20, as ratelimitd implements them):
//   - Without waiting (max_wait 0), a request is decided once at its arrival.
//   - With waiting, a request that would be denied joins its key's queue if the queue holds
//     fewer than max_queue (else: refused "queue full"); a request arriving behind waiters
//     joins the queue too. The queue's head is decided again, atomically, when it can succeed:
//     a concurrency policy when a lease frees (or expires), a rate policy at now + retry_after.
//     A waiter whose wait would pass max_wait is refused then ("timed out"), at the latest at
//     its deadline. Admitted waiters leave in arrival order.
//   - An admitted request holds its place for its duration (trace: $request_time, %D, %T;
//     else --hold); for a concurrency policy it holds a lease of `cost` units for that long,
//     or until lease_ttl if that is shorter (a holder that never releases).
// Every decision is the library's algo::decide: the rate algorithms and the concurrency
// algorithm (Policy::concurrency with --concurrency and --lease-ttl) alike.
// Memory: a key's state is kept for the run (unlike the replay, which drops idle keys), so
// a trace's distinct keys bound it. Not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/policy.h"
#include "ratelimit/status.h"
#include "replay.h"
#include "throttle_types.h"

namespace ratelimit::sim {

class Throttle {
 public:
  static Result<Throttle> create(const std::array<Policy, kAlgorithms>& policies,
                                 ThrottleOptions options);
  Throttle(Throttle&&) noexcept;
  Throttle& operator=(Throttle&&) noexcept;
  ~Throttle();

  // One request, in non-decreasing time order (the replay checks the order first);
  // duration_us < 0: --hold.
  void add(int64_t t_us, std::string_view key, int64_t cost, int64_t duration_us);

  // Runs every pending event (releases, wake-ups, deadlines) and returns the tallies.
  ThrottleReport finish();

 private:
  struct Impl;
  explicit Throttle(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ratelimit::sim
