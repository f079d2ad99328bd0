// priority_test.cc — priority classes (include/ratelimit/priority.h): class limits worked by
// hand, the weighted order of a saturated queue, and the starvation bound checked against every
// schedule of a randomized run (classes' waiters coming and going, one admission per step).
#include <gtest/gtest.h>

#include <array>
#include <random>

#include "ratelimit/priority.h"

namespace ratelimit::algo {
namespace {

TEST(Priority, ClassLimitIsTheFloorOfTheKeptFraction) {
  struct Row {
    int64_t limit;
    double headroom;
    int64_t want;
  };
  for (const Row& r : {Row{10, 0.0, 10}, Row{10, 0.5, 5}, Row{7, 0.5, 3}, Row{10, 0.1, 9}, Row{1, 0.5, 0},
                       Row{100, 0.3, 70}, Row{3, 0.999999, 0}, Row{1'000'000'000, 0.25, 750'000'000}}) {
    EXPECT_EQ(class_limit(r.limit, r.headroom), r.want) << r.limit << " x (1 - " << r.headroom << ")";
  }
}

TEST(Priority, ASaturatedQueueServesByWeightHighestFirst) {
  const auto classes = default_classes();  // 8, 4, 1
  std::array<int64_t, 3> credits{0, 0, 0};
  const std::array<bool, 3> all{true, true, true};
  std::string order;
  for (int i = 0; i < 26; ++i) {
    const size_t c = pick_class(classes, credits, all);
    order += static_cast<char>('0' + c);
    charge_class(classes, credits, all, c);
  }
  EXPECT_EQ(order, "00000000111120000000011112");
}

TEST(Priority, NoWaitersPicksNone) {
  const auto classes = default_classes();
  std::array<int64_t, 3> credits{1, 1, 1};
  EXPECT_EQ(pick_class(classes, credits, std::array<bool, 3>{false, false, false}), 3u);
  EXPECT_EQ(pick_class(classes, credits, std::array<bool, 3>{false, false, true}), 2u);
}

TEST(Priority, StatedBounds) {
  const auto classes = default_classes();
  EXPECT_EQ(starvation_bound(classes, 0), 5);   // 4 + 1
  EXPECT_EQ(starvation_bound(classes, 1), 17);  // 9 + 8
  EXPECT_EQ(starvation_bound(classes, 2), 24);  // 12 + 12
}

// Waiters arrive at random; each step admits the picked class's head. For every class, the
// number of other-class admissions while it had a waiter and was not served never exceeds its
// bound.
TEST(Priority, NoClassWaitsBeyondItsBound) {
  const std::vector<PriorityClass> classes{{"a", 5, 0}, {"b", 2, 0}, {"c", 1, 0}, {"d", 3, 0}};
  std::mt19937 rng(30);
  for (int run = 0; run < 200; ++run) {
    std::array<int64_t, 4> credits{0, 0, 0, 0};
    std::array<int64_t, 4> queued{0, 0, 0, 0};
    std::array<int64_t, 4> passed_over{0, 0, 0, 0};
    for (int step = 0; step < 500; ++step) {
      for (size_t c = 0; c < 4; ++c) {
        if (rng() % 3 == 0) ++queued[c];
      }
      std::array<bool, 4> waiting{};
      for (size_t c = 0; c < 4; ++c) waiting[c] = queued[c] > 0;
      const size_t s = pick_class(classes, credits, waiting);
      if (s == 4) continue;
      charge_class(classes, credits, waiting, s);
      --queued[s];
      for (size_t c = 0; c < 4; ++c) {
        if (c == s || !waiting[c]) {
          passed_over[c] = 0;
          continue;
        }
        ++passed_over[c];
        ASSERT_LE(passed_over[c], starvation_bound(classes, c)) << "class " << c << " run " << run;
      }
    }
  }
}

}  // namespace
}  // namespace ratelimit::algo
