// consistency_timing_test.cc — when slices end and pushes leave (include/ratelimit/consistency.h:
// slice_life_us, slice_until_us, slice_demand, lease_recheck_us, next_push_us), worked by hand
// on a 10-s window, lease_ttl 3 s and sync_interval 100 ms. DistributedStore and the simulator
// both call these; these cases are what both must do.
#include <gtest/gtest.h>

#include "ratelimit/consistency.h"

namespace ratelimit::algo {
namespace {

Policy leased(Micros lease_ttl = Micros{3'000'000}) {
  ConsistencyOptions c;
  c.mode = Consistency::kLease;
  c.sync_interval = Micros{100'000};
  c.lease_ttl = lease_ttl;
  return Policy::fixed_window(100, Micros{10'000'000})->with_consistency(c).value();
}

TEST(ConsistencyTiming, ASliceLivesItsTtlCutAtItsWindowsEnd) {
  const Policy p = leased();
  EXPECT_EQ(slice_life_us(p, 20'000'000), 3'000'000);  // window 20 ... 30 s: the ttl
  EXPECT_EQ(slice_life_us(p, 28'500'000), 1'500'000);  // 1.5 s before the window ends
  EXPECT_EQ(slice_life_us(p, 29'999'999), 1);
  EXPECT_EQ(slice_life_us(p, -5), 3'000'000);          // a clock before the epoch reads as 0
  // Granted at 21 s in the window starting at 20 s: ends at 24 s (the ttl) ...
  EXPECT_EQ(slice_until_us(p, 20'000'000, 21'000'000), 24'000'000);
  // ... and at 28 s it ends with its window, at 30 s.
  EXPECT_EQ(slice_until_us(p, 20'000'000, 28'000'000), 30'000'000);
}

TEST(ConsistencyTiming, DemandIsTheLastSliceSpentOverItsTime) {
  // 10 granted, 4 left, granted 0.5 s ago: 6 units in 0.5 s = 12 units/s.
  EXPECT_DOUBLE_EQ(slice_demand(0, 10, 4, 1'000'000, 1'500'000), 12.0);
  // No slice granted, or no time passed: the estimate stays.
  EXPECT_DOUBLE_EQ(slice_demand(7.5, 0, 0, 1'000'000, 1'500'000), 7.5);
  EXPECT_DOUBLE_EQ(slice_demand(7.5, 10, 4, 1'500'000, 1'500'000), 7.5);
  // Nothing spent: demand 0 (the next slice is just the request's cost).
  EXPECT_DOUBLE_EQ(slice_demand(7.5, 10, 10, 0, 2'000'000), 0.0);
}

TEST(ConsistencyTiming, ADenialIsRecheckedAfterTheIntervalOrItsOwnEnd) {
  const Policy p = leased();
  Decision d;
  d.allowed = false;
  d.reason = DecisionReason::kOverLimit;
  d.retry_after = Micros{5'000'000};
  EXPECT_EQ(lease_recheck_us(p, d), 100'000);  // sync_interval first
  d.retry_after = Micros{40'000};
  EXPECT_EQ(lease_recheck_us(p, d), 40'000);   // the denial ends sooner
  d.retry_after = Micros{0};
  EXPECT_EQ(lease_recheck_us(p, d), 100'000);  // none given: the window, capped by the interval
}

TEST(ConsistencyTiming, PushesKeepTheirGridWhileBusyAndRestartAfterAQuietSpell) {
  const Policy p = leased();  // sync_interval 100 ms: a push every 50 ms
  EXPECT_EQ(next_push_us(p, 0, 1'000'000), 1'050'000);          // the first: now + 50 ms
  EXPECT_EQ(next_push_us(p, 1'050'000, 1'050'000), 1'100'000);  // on time
  EXPECT_EQ(next_push_us(p, 1'050'000, 1'070'000), 1'100'000);  // 20 ms late: same grid
  EXPECT_EQ(next_push_us(p, 1'050'000, 1'099'999), 1'100'000);  // late by just under a period
  EXPECT_EQ(next_push_us(p, 1'050'000, 1'100'000), 1'150'000);  // a whole period late: new grid
  EXPECT_EQ(next_push_us(p, 1'050'000, 3'000'000), 3'050'000);  // after a quiet spell
}

}  // namespace
}  // namespace ratelimit::algo
