// clock.cc — the system and monotonic clocks (see include/ratelimit/clock.h).
#include "ratelimit/clock.h"

namespace ratelimit {

Micros SystemClock::now() const {
  return std::chrono::duration_cast<Micros>(
      std::chrono::system_clock::now().time_since_epoch());
}

Micros MonotonicClock::now() const {
  return std::chrono::duration_cast<Micros>(std::chrono::steady_clock::now().time_since_epoch());
}

const MonotonicClock& MonotonicClock::instance() {
  static const MonotonicClock* const clock = new MonotonicClock();  // never destroyed
  return *clock;
}

const SystemClock& SystemClock::instance() {
  static const SystemClock* const clock = new SystemClock();  // never destroyed: usable at exit
  return *clock;
}

}  // namespace ratelimit
