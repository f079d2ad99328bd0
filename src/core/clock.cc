// clock.cc — the system clock (see include/ratelimit/clock.h).
#include "ratelimit/clock.h"

namespace ratelimit {

Micros SystemClock::now() const {
  return std::chrono::duration_cast<Micros>(
      std::chrono::system_clock::now().time_since_epoch());
}

const SystemClock& SystemClock::instance() {
  static const SystemClock* const clock = new SystemClock();  // never destroyed: usable at exit
  return *clock;
}

}  // namespace ratelimit
