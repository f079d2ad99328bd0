// units_test.cc — time_to_drain_us (src/core/units.h) is exactly the least elapsed time whose
// drained_u reaches the need, whatever its first guess. It guesses with the rate's reciprocal
// where the Lua mirror (src/redis/lua/common.lua) divides (issue 34: a division on every bucket
// decision delayed the next decision's lock); the settle loops must land both on one boundary.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "ratelimit/policy.h"
#include "units.h"

namespace ratelimit::algo {
namespace {

// The same settle from the guess the Lua scripts take: need / rate, rounded up.
int64_t by_division(int64_t need_u, double rate) {
  if (need_u <= 0) return 0;
  auto t = static_cast<int64_t>(std::ceil(static_cast<double>(need_u) / rate));
  while (t > 0 && drained_u(t - 1, rate) >= need_u) --t;
  while (drained_u(t, rate) < need_u) ++t;
  return t;
}

TEST(TimeToDrain, IsTheLeastElapsedThatDrainsTheNeedAndMatchesTheDivision) {
  std::mt19937_64 rng(34);
  std::uniform_real_distribution<double> log_rate(std::log(kMinRate), std::log(kMaxRate));
  std::uniform_real_distribution<double> log_need(0, std::log(0x1p50));
  int guesses_differ = 0;
  int checked = 0;
  for (int n = 0; n < 2'000'000; ++n) {
    const double rate = n % 4 == 0 ? std::floor(std::exp(log_rate(rng))) + 1  // whole rates
                                   : std::exp(log_rate(rng));
    const auto need = static_cast<int64_t>(std::exp(log_need(rng)));
    if (static_cast<double>(need) / rate >= 0x1p52) continue;  // units.h: below 2^53
    ++checked;
    const int64_t t = time_to_drain_us(need, rate);
    ASSERT_GE(drained_u(t, rate), need) << need << " / " << rate;
    if (t > 0) {
      ASSERT_LT(drained_u(t - 1, rate), need) << need << " / " << rate;
    }
    ASSERT_EQ(t, by_division(need, rate)) << need << " / " << rate;
    if (std::ceil(static_cast<double>(need) * (1.0 / rate)) !=
        std::ceil(static_cast<double>(need) / rate)) {
      ++guesses_differ;
    }
  }
  EXPECT_GT(checked, 1'000'000);
  EXPECT_GT(guesses_differ, 0) << "no case where the reciprocal's guess needed settling";
}

TEST(TimeToDrain, NothingNeededTakesNoTime) {
  EXPECT_EQ(time_to_drain_us(0, 16.5), 0);
  EXPECT_EQ(time_to_drain_us(-5, 16.5), 0);
}

}  // namespace
}  // namespace ratelimit::algo
