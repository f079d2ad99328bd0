// e2e_snapshot_test.cc — counts that survive a restart (issue 33): ratelimitd on the memory
// store with store.snapshot, through the real binary.
//   - SIGTERM, then a new process on the same file: every key of every algorithm goes on from
//     exactly where it was;
//   - kill -9: what was counted up to the last interval's write survives, at most what came
//     after it is lost (measured and printed);
//   - a policy changed between the two processes decides the restored count as configured now;
//   - a damaged file or one of another format version: the start goes on empty and says so
//     (the default), or with on_corrupt: refuse stops (exit 1, the file and the reason logged).
// Windows are 1 h (started with room in their hour, window_room.h) and the buckets refill by
// 0.001 a second, so no count moves on its own while a test restarts the daemon.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "daemon.h"
#include "window_room.h"

namespace ratelimit::e2e {
namespace {

using namespace std::chrono_literals;

const char* const kPolicyNames[] = {"fw", "log", "counter", "token", "leaky"};

std::string config(const std::string& path, const std::string& snapshot_extra = "") {
  return R"(policies:
  fw:      { algorithm: fixed_window, limit: 100, window: 1h }
  log:     { algorithm: sliding_window_log, limit: 100, window: 1h }
  counter: { algorithm: sliding_window_counter, limit: 100, window: 1h }
  token:   { algorithm: token_bucket, rate: 0.001, burst: 100 }
  leaky:   { algorithm: leaky_bucket, rate: 0.001, burst: 100 }
store: { type: memory, snapshot: { path: )" +
         path + snapshot_extra + " } }\n";
}

// A directory of the test's own, removed at the end (the daemons' own directories go with them).
struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/rl-snapshot-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

// `n` acquires of cost 1 on (policy, key); the remaining of the last answer.
int64_t take(uint16_t port, const std::string& policy, const std::string& key, int n) {
  Client c(port);
  int64_t remaining = -1;
  for (int i = 0; i < n; ++i) {
    const Reply r = c.post("/v1/acquire", R"({"policy":")" + policy + R"(","key":")" + key + "\"}");
    EXPECT_EQ(r.status, 200u) << policy << " " << r.body;
    remaining = r.json().as_object().at("remaining").to_number<int64_t>();
  }
  return remaining;
}

// A first process that counts `n` on ("fw", "k") and stops cleanly (writing `file`).
void count_then_stop(const std::string& file, int n) {
  Daemon d;
  ASSERT_TRUE(d.start(config(file))) << d.log();
  EXPECT_EQ(take(d.port(), "fw", "k", n), 100 - n);
  d.signal(SIGTERM);
  ASSERT_EQ(d.wait_exit(15s), 0) << d.log();
}

TEST(Snapshot, SigtermThenRestartGoesOnFromEveryCount) {
  testing::await_window_room(std::chrono::hours(1), std::chrono::seconds(120));
  TempDir dir;
  const std::string file = dir.path + "/counts.snap";
  std::map<std::string, int64_t> before;
  {
    Daemon d;
    ASSERT_TRUE(d.start(config(file))) << d.log();
    EXPECT_NE(d.log().find("no file at " + file), std::string::npos) << d.log();
    int n = 11;
    for (const char* p : kPolicyNames) before[p] = take(d.port(), p, "k", n++);  // 11 ... 15 taken
    d.signal(SIGTERM);
    ASSERT_EQ(d.wait_exit(15s), 0) << d.log();
    EXPECT_NE(d.log().find("store.snapshot: wrote " + file + " at shutdown: 5 keys"), std::string::npos) << d.log();
  }
  Daemon again;
  ASSERT_TRUE(again.start(config(file))) << again.log();
  EXPECT_NE(again.log().find("store.snapshot: read " + file), std::string::npos) << again.log();
  EXPECT_EQ(metric_value(again.port(), "ratelimitd_memory_store_snapshot_keys"), 5);
  for (const char* p : kPolicyNames) {
    const int64_t now = take(again.port(), p, "k", 1);
    const std::string name = p;
    if (name == "token" || name == "leaky") {
      // A bucket drains meanwhile (0.001 a second): a level of exactly 15 units becomes
      // 14.99..., and the remaining it answers (from the floor of the level) may be one more.
      // A lost state would answer 99.
      EXPECT_GE(now, before[p] - 1) << p;
      EXPECT_LE(now, before[p]) << p << ": the count went on where it was";
    } else {
      EXPECT_EQ(now, before[p] - 1) << p << ": the count went on where it was";
    }
    EXPECT_EQ(take(again.port(), p, "fresh", 1), 99) << p << ": a key never seen starts full";
  }
}

TEST(Snapshot, KillNineLosesAtMostWhatCameAfterTheLastWrite) {
  testing::await_window_room(std::chrono::hours(1), std::chrono::seconds(120));
  TempDir dir;
  const std::string file = dir.path + "/counts.snap";
  const std::string cfg = config(file, ", interval: 1s");
  constexpr int kBefore = 20, kAfter = 15;
  {
    Daemon d;
    ASSERT_TRUE(d.start(cfg)) << d.log();
    take(d.port(), "fw", "k", kBefore);
    // A write that began after those hits: the timestamp (whole seconds) moved by 2 since.
    const int64_t seen = metric_value(d.port(), "ratelimitd_memory_store_snapshot_last_success_timestamp_seconds");
    ASSERT_TRUE(wait_metric(d.port(), "ratelimitd_memory_store_snapshot_last_success_timestamp_seconds",
                            std::max<int64_t>(seen, 1) + 2, 10s))
        << d.log();
    take(d.port(), "fw", "k", kAfter);
    d.signal(SIGKILL);
    d.wait_exit(5s);
  }
  Daemon again;
  ASSERT_TRUE(again.start(cfg)) << again.log();
  const int64_t restored = 100 - 1 - take(again.port(), "fw", "k", 1);  // counted before the kill, as restored
  const int64_t lost = kBefore + kAfter - restored;
  std::printf("kill -9 with interval 1s: %lld of %d hits restored, %lld lost (bound: the %d after the last write)\n",
              static_cast<long long>(restored), kBefore + kAfter, static_cast<long long>(lost), kAfter);
  EXPECT_GE(restored, kBefore) << "what the last write held is never lost";
  EXPECT_LE(restored, kBefore + kAfter);
  EXPECT_LE(lost, kAfter);
  EXPECT_EQ(metric_value(again.port(), "ratelimitd_memory_store_snapshot_failures_total"), 0);
}

// The configuration changed between the two processes: a restored count is decided under the
// policy as it is now (as a reload does), and a policy removed meanwhile restores nothing anyone
// can reach.
TEST(Snapshot, ACountRestoredIsDecidedUnderThePolicyAsConfiguredNow) {
  testing::await_window_room(std::chrono::hours(1), std::chrono::seconds(120));
  TempDir dir;
  const std::string file = dir.path + "/counts.snap";
  count_then_stop(file, 30);
  Daemon lowered;
  ASSERT_TRUE(lowered.start("policies:\n  fw: { algorithm: fixed_window, limit: 50, window: 1h }\n"
                            "store: { type: memory, snapshot: { path: " + file + " } }\n"))
      << lowered.log();
  EXPECT_EQ(take(lowered.port(), "fw", "k", 1), 19) << "30 counted before, limit 50 now";
  const Reply gone = http_post(lowered.port(), "/v1/acquire", R"({"policy":"log","key":"k"})");
  EXPECT_EQ(gone.status, 400u) << gone.body;
}

// A valid file, then damaged three ways: by default the start goes on empty and says so; with
// on_corrupt: refuse it stops.
TEST(Snapshot, ADamagedOrForeignFileStartsEmptyOrWithRefuseStopsTheStart) {
  testing::await_window_room(std::chrono::hours(1), std::chrono::seconds(120));
  TempDir dir;
  const std::string file = dir.path + "/counts.snap";
  count_then_stop(file, 30);
  std::string good;
  {
    std::ifstream in(file, std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(good.size(), 16u);
  std::string truncated = good.substr(0, good.size() / 2);
  std::string other_version = good;
  other_version[8] = static_cast<char>(other_version[8] + 1);  // u32 version after "RLMSNAP1"
  std::string flipped = good;
  flipped[good.size() - 5] = static_cast<char>(flipped[good.size() - 5] ^ 0x40);
  for (const auto& [what, bytes] : {std::pair{"truncated", truncated}, std::pair{"another version", other_version},
                                    std::pair{"a flipped byte", flipped}}) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
    Daemon refused;
    EXPECT_FALSE(refused.start(config(file, ", on_corrupt: refuse"))) << what;
    EXPECT_EQ(refused.wait_exit(5s), 1) << what << "\n" << refused.log();
    EXPECT_NE(refused.log().find("store.snapshot " + file + ": snapshot refused"), std::string::npos)
        << what << "\n" << refused.log();
    Daemon empty;
    ASSERT_TRUE(empty.start(config(file))) << what << "\n" << empty.log();
    EXPECT_NE(empty.log().find("on_corrupt: start_empty: the store starts empty"), std::string::npos) << empty.log();
    EXPECT_EQ(take(empty.port(), "fw", "k", 1), 99) << what << ": empty, as the log says";
    // The refused file was moved aside, byte for byte, before anything could write over it.
    const size_t at = empty.log().find("the file was moved to ");
    ASSERT_NE(at, std::string::npos) << empty.log();
    const std::string aside = empty.log().substr(at + 22, empty.log().find(')', at) - at - 22);
    std::ifstream kept(aside, std::ios::binary);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), bytes) << what << ": " << aside;
  }
}

}  // namespace
}  // namespace ratelimit::e2e
