// outage_test.cc — the store-outage log (outage.h): two lines per outage, with the counts of
// what happened during it, and nothing while the state does not change.
#include <gtest/gtest.h>

#include "outage.h"

namespace ratelimit::server {
namespace {

TEST(OutageWatch, OneLineWhenItStartsOneWhenItEndsWithCounts) {
  OutageWatch w;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(w.observe(Status(), {5, 0, 1}, t0));
  const auto down = w.observe(Status::unavailable("cannot connect to 127.0.0.1:1"), {5, 0, 1}, t0);
  ASSERT_TRUE(down);
  EXPECT_NE(down->find("store unavailable: cannot connect to 127.0.0.1:1"), std::string::npos) << *down;
  EXPECT_TRUE(w.in_outage());
  // Thousands of failed decisions later, still nothing to log.
  EXPECT_FALSE(w.observe(Status::unavailable("x"), {4005, 7, 4008}, t0 + std::chrono::seconds(1)));
  const auto up = w.observe(Status(), {4005, 7, 4008}, t0 + std::chrono::milliseconds(2500));
  ASSERT_TRUE(up);
  EXPECT_EQ(*up, "store available again after 2.5s: 4000 decisions failed open, 7 failed closed, "
                 "4007 store errors during the outage");
  EXPECT_FALSE(w.in_outage());
  EXPECT_FALSE(w.observe(Status(), {4005, 7, 4008}, t0 + std::chrono::seconds(3)));
}

}  // namespace
}  // namespace ratelimit::server
