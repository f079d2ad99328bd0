// clock_test.cc — SystemClock (the TSC-extrapolated CLOCK_REALTIME, src/core/clock.cc) against
// the exact system clock: every reading lies within SystemClock::kMaxError of an exact read
// taken just before and just after it, on several threads at once, across sleeps shorter and
// longer than the 1 ms re-anchor interval (a resumed thread whose anchor is stale), and after
// calibration (the fast path) as well as before it. Samples whose two exact reads are split by
// a preemption (more than 50 µs apart) say nothing about the bound and are skipped.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "ratelimit/clock.h"

namespace ratelimit {
namespace {

constexpr Micros kSlack{1};  // truncation to whole microseconds, on both sides

struct Tally {
  int checked = 0;
  int outside = 0;
  Micros worst{0};
};

void sample(const Clock& clock, Tally& t) {
  const Micros before = SystemClock::exact_now();
  const Micros got = clock.now();
  const Micros after = SystemClock::exact_now();
  if (after - before > Micros{50}) return;
  ++t.checked;
  const Micros err = got < before ? before - got : (got > after ? got - after : Micros{0});
  if (err > t.worst) t.worst = err;
  if (err > SystemClock::kMaxError + kSlack) ++t.outside;
}

TEST(SystemClock, WithinBoundOnEveryThread) {
  const Clock& clock = SystemClock::instance();
  constexpr int kThreads = 4;
  std::vector<Tally> tallies(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&clock, &t = tallies[i]] {
      const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
      while (std::chrono::steady_clock::now() < end) sample(clock, t);
    });
  }
  for (auto& th : threads) th.join();
  for (const Tally& t : tallies) {
    EXPECT_GT(t.checked, 1000);
    EXPECT_EQ(t.outside, 0) << "worst error " << t.worst.count() << " us";
  }
}

TEST(SystemClock, WithinBoundAcrossSleeps) {
  const Clock& clock = SystemClock::instance();
  Tally t;
  // Past the calibration (10 ms) first, so the sleeps below exercise the extrapolation.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 100; ++i) sample(clock, t);
    // Shorter than the re-anchor interval: the next reading is extrapolated across the sleep.
    std::this_thread::sleep_for(std::chrono::microseconds(400));
    sample(clock, t);
    // Longer: the anchor is stale (like a thread resumed after a suspend) and must re-anchor.
    std::this_thread::sleep_for(std::chrono::milliseconds(round % 2 == 0 ? 5 : 60));
    sample(clock, t);
  }
  EXPECT_GT(t.checked, 1000);
  EXPECT_EQ(t.outside, 0) << "worst error " << t.worst.count() << " us";
}

TEST(SystemClock, AdvancesWithTheSystemClock) {
  // A reading a known time apart moves by that time (the rate is right, not just the offset).
  // Each reading is bracketed by exact reads, and its exact time taken as their midpoint (off by
  // at most 5 µs); a pair further apart (a preemption) says nothing and the round is taken
  // again, at most 100 times (a shared machine).
  const Clock& clock = SystemClock::instance();
  struct Read {
    Micros got, exact;
    bool clean;
  };
  auto read = [&clock] {
    const Micros before = SystemClock::exact_now();
    const Micros got = clock.now();
    const Micros after = SystemClock::exact_now();
    return Read{got, before + (after - before) / 2, after - before <= Micros{10}};
  };
  int rounds = 0;
  for (; rounds < 100; ++rounds) {
    const Read a = read();
    std::this_thread::sleep_for(std::chrono::microseconds(700));
    const Read b = read();
    if (!a.clean || !b.clean) continue;
    const Micros diff = (b.got - a.got) - (b.exact - a.exact);
    EXPECT_LE(diff.count(), 2 * (SystemClock::kMaxError + kSlack).count() + 10);
    EXPECT_GE(diff.count(), -2 * (SystemClock::kMaxError + kSlack).count() - 10);
    break;
  }
  EXPECT_LT(rounds, 100) << "no round without a preemption";
}

}  // namespace
}  // namespace ratelimit
