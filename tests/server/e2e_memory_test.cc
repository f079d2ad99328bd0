// e2e_memory_test.cc — ratelimitd on the memory store, through the real binary (issue 33):
// a key flood beyond what store.max_keys can remember is counted on /metrics and logged once,
// with what store.when_saturated did; other policies' fresh keys are admitted.
// Windows are 1 h fixed windows started with room in their hour (window_room.h), so nothing
// idles during a test.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "daemon.h"
#include "window_room.h"

namespace ratelimit::e2e {
namespace {

const std::string kPolicies = R"(policies:
  flooded: { algorithm: fixed_window, limit: 10, window: 1h }
  other:   { algorithm: sliding_window_log, limit: 10, window: 1h }
)";

// `n` invented keys of cost 10 on "flooded" over one connection; each is at its limit after it.
void flood(uint16_t port, int n) {
  Client c(port);
  for (int i = 0; i < n; ++i) {
    const Reply r = c.post("/v1/acquire", R"({"policy":"flooded","cost":10,"key":"invented-)" + std::to_string(i) + "\"}");
    ASSERT_TRUE(r.status == 200 || r.status == 429) << r.status << " " << r.body;
  }
}

class MemoryFlood : public ::testing::TestWithParam<std::string> {};

TEST_P(MemoryFlood, IsCountedLoggedOnceAndSparesOtherPolicies) {
  const std::string& choice = GetParam();
  testing::await_window_room(std::chrono::hours(1), std::chrono::seconds(60));
  Daemon d;
  ASSERT_TRUE(d.start(kPolicies + "store: {type: memory, max_keys: 100, shards: 1, when_saturated: " + choice + "}\n"))
      << d.log();
  flood(d.port(), 100 * 100);  // 100 x max_keys
  const std::string counter = "ratelimitd_memory_store_residue_" + std::string(choice == "refuse" ? "saturated" : "dropped") + "_total";
  const std::string other = "ratelimitd_memory_store_residue_" + std::string(choice == "refuse" ? "dropped" : "saturated") + "_total";
  EXPECT_GT(metric_value(d.port(), counter), 0);
  EXPECT_EQ(metric_value(d.port(), other), 0);
  ASSERT_TRUE(d.wait_log("a key flood saturated the eviction residue", std::chrono::seconds(10))) << d.log();
  EXPECT_NE(d.log().find("when_saturated: " + choice), std::string::npos) << d.log();
  Client c(d.port());
  for (int i = 0; i < 20; ++i) {
    const Reply r = c.post("/v1/acquire", R"({"policy":"other","key":"fresh-)" + std::to_string(i) + "\"}");
    EXPECT_EQ(r.status, 200u) << "a flood on one policy refused another's fresh key: " << r.body;
  }
  // Still flooding: no second line within the minute.
  flood(d.port(), 1000);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // two polls of the control loop
  const std::string log = d.log();
  EXPECT_EQ(log.find("a key flood saturated"), log.rfind("a key flood saturated")) << log;
}

INSTANTIATE_TEST_SUITE_P(Choices, MemoryFlood, ::testing::Values("refuse", "admit"));

}  // namespace
}  // namespace ratelimit::e2e
