// hit_counting_test.cc — STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT's choice of hits, case by case
// as envoyproxy/ratelimit's getHitsAddend makes it.
#include "ratelimit/hit_counting.h"

#include <gtest/gtest.h>

#include <vector>

namespace ratelimit::algo {
namespace {

std::vector<int64_t> choose(std::vector<int64_t> hits, std::vector<uint8_t> exceed) {
  std::vector<int64_t> out(hits.size(), -1);
  hits_to_count_when_stopping(hits, exceed, out);
  return out;
}

TEST(HitCounting, NoneWouldExceedEveryoneCounts) {
  EXPECT_EQ(choose({1, 3, 0}, {0, 0, 0}), (std::vector<int64_t>{1, 3, 0}));
}

TEST(HitCounting, SomeWouldExceedOnlyTheyCount) {
  EXPECT_EQ(choose({1, 3, 2}, {0, 1, 0}), (std::vector<int64_t>{0, 3, 0}));
  EXPECT_EQ(choose({5, 5}, {1, 1}), (std::vector<int64_t>{5, 5}));
}

TEST(HitCounting, Empty) { EXPECT_TRUE(choose({}, {}).empty()); }

}  // namespace
}  // namespace ratelimit::algo
