// eventually.h — test support: the one bounded poll ("wait until this holds, at most that
// long") that tests use instead of sleeping a guessed time and hoping the work is done.
//
// Why: a sleep that assumes work is (or is not yet) done passes or fails with the machine's
// speed; CI's machine is not this one. Poll for the condition itself, with a generous bound
// (a slow, loaded machine only makes the test slower, never wrong). Header-only; thread-safe
// as far as `pred` is.
#pragma once

#include <chrono>
#include <thread>

namespace ratelimit::testing {

// Calls `pred` every `every` until it returns true or `bound` has passed; true iff it held
// (it is asked once more at the deadline).
template <typename Pred>
bool eventually(Pred&& pred, std::chrono::milliseconds bound = std::chrono::milliseconds(10'000),
                std::chrono::milliseconds every = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(every);  // polling a condition, bounded by `bound`
  }
  return pred();
}

}  // namespace ratelimit::testing
