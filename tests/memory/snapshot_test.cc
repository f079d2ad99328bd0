// snapshot_test.cc — MemoryStore::save / load (issue 33, "counts that survive a restart"): a
// store saved and loaded into a new one decides exactly as the old would have, for every
// algorithm; keys idle by load time are skipped; a truncated, bit-flipped, other-version or
// foreign file is refused and changes nothing; a policy redefined after the save applies as a
// reload does. Also the 1 M-key write/read time and file size, printed (not asserted).
// Deterministic: ManualClocks that move only when a test moves them.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>

#include "ratelimit/memory_store.h"
#include "test_policies.h"

namespace ratelimit {
namespace {

using testing_memory::all_algorithms;
using testing_memory::manual;

const Micros kSecond{1'000'000};

std::string temp_path(const std::string& name) {
  return "/tmp/rl-snapshot-" + std::to_string(::getpid()) + "-" + name;
}
std::string read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(Snapshot, ARestoredStoreDecidesExactlyAsTheSavedOneForEveryAlgorithm) {
  for (const auto& np : all_algorithms(10)) {
    ManualClock clock(kSecond * 100);
    MemoryStore before(manual(clock, 1000, 4));
    const Policy p = np.policy.with_name("p").value();
    for (int k = 0; k < 20; ++k) {
      for (int u = 0; u < k % 12; ++u) ASSERT_TRUE(before.acquire(p, "k" + std::to_string(k)).ok());
    }
    const std::string path = temp_path(np.label);
    auto saved = before.save(path);
    ASSERT_TRUE(saved.ok()) << saved.status().message();
    MemoryStore after(manual(clock, 1000, 4));
    auto loaded = after.load(path);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    EXPECT_EQ(loaded->keys, saved->keys) << np.label;
    clock.advance(kSecond);
    for (int k = 0; k < 20; ++k) {  // every count kept: the same answers, unit by unit
      for (int u = 0; u < 12; ++u) {
        const auto a = before.acquire(p, "k" + std::to_string(k));
        const auto b = after.acquire(p, "k" + std::to_string(k));
        ASSERT_EQ(a->allowed, b->allowed) << np.label << " k" << k << " unit " << u;
        ASSERT_EQ(a->remaining, b->remaining) << np.label << " k" << k << " unit " << u;
      }
    }
    std::remove(path.c_str());
  }
}

TEST(Snapshot, KeysIdleByLoadTimeAreSkipped) {
  ManualClock clock(kSecond * 100);
  MemoryStore before(manual(clock, 1000, 4));
  const Policy p = Policy::fixed_window(5, kSecond * 10).value().with_name("w").value();
  ASSERT_TRUE(before.acquire(p, "a").ok());
  const std::string path = temp_path("idle");
  ASSERT_TRUE(before.save(path).ok());
  clock.advance(kSecond * 20);  // the window is over
  MemoryStore after(manual(clock, 1000, 4));
  auto loaded = after.load(path);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->keys, 0U);
  EXPECT_EQ(loaded->skipped_idle, 1U);
  EXPECT_EQ(after.key_count(), 0U);
  std::remove(path.c_str());
}

TEST(Snapshot, ADamagedOrForeignFileIsRefusedAndChangesNothing) {
  ManualClock clock(kSecond * 100);
  MemoryStore before(manual(clock, 1000, 4));
  const Policy p = Policy::fixed_window(5, kSecond * 60).value().with_name("w").value();
  for (int k = 0; k < 50; ++k) ASSERT_TRUE(before.acquire(p, "k" + std::to_string(k)).ok());
  const std::string path = temp_path("damaged");
  ASSERT_TRUE(before.save(path).ok());
  const std::string good = read(path);
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x10;
  std::string other_version = good;
  other_version[8] += 1;
  const std::pair<std::string, std::string> cases[] = {
      {good.substr(0, good.size() - 5), "truncated"},
      {good.substr(0, 20), "too short"},
      {flipped, "checksum"},
      {other_version, "version"},
      {"key,count\nk1,3\n" + std::string(64, 'x'), "not a ratelimit memory-store snapshot"},
  };
  for (const auto& [bytes, why] : cases) {
    write(path, bytes);
    MemoryStore after(manual(clock, 1000, 4));
    auto loaded = after.load(path);
    ASSERT_FALSE(loaded.ok()) << why;
    EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument) << why;
    EXPECT_NE(loaded.status().message().find("snapshot refused"), std::string::npos) << loaded.status().message();
    EXPECT_EQ(after.key_count(), 0U) << why;
  }
  MemoryStore after(manual(clock, 1000, 4));
  EXPECT_EQ(after.load(temp_path("absent")).status().code(), StatusCode::kNotFound);
  std::remove(path.c_str());
}

TEST(Snapshot, APolicyRedefinedAfterTheSaveKeepsCountsAsAReloadDoes) {
  ManualClock clock(kSecond * 100);
  const Policy old_p = Policy::fixed_window(20, kSecond * 60).value().with_name("w").value();
  const Policy new_p = Policy::fixed_window(30, kSecond * 60).value().with_name("w").value();
  MemoryStore saved(manual(clock, 1000, 4));
  MemoryStore reloaded(manual(clock, 1000, 4));  // the same traffic, then a reload in place
  for (int u = 0; u < 15; ++u) {
    ASSERT_TRUE(saved.acquire(old_p, "k").ok());
    ASSERT_TRUE(reloaded.acquire(old_p, "k").ok());
  }
  const std::string path = temp_path("redefined");
  ASSERT_TRUE(saved.save(path).ok());
  MemoryStore restarted(manual(clock, 1000, 4));
  ASSERT_TRUE(restarted.load(path).ok());
  for (int u = 0; u < 20; ++u) {
    const auto a = reloaded.acquire(new_p, "k");
    const auto b = restarted.acquire(new_p, "k");
    ASSERT_EQ(a->allowed, b->allowed) << u;
    ASSERT_EQ(a->remaining, b->remaining) << u;
  }
  std::remove(path.c_str());
}

// Figures for docs/BENCHMARKS.md: 1 M keys (fixed window) in a store of 2 M (so none is evicted for
// an unevenly filled shard), written and read back.
TEST(Snapshot, OneMillionKeysWriteAndReadTimeAndSize) {
  ManualClock clock(kSecond * 100);
  MemoryStore before(manual(clock, 2'000'000, 64));
  const Policy p = Policy::fixed_window(100, kSecond * 3600).value().with_name("api").value();
  for (int k = 0; k < 1'000'000; ++k) ASSERT_TRUE(before.acquire(p, "user:" + std::to_string(k)).ok());
  const std::string path = temp_path("million");
  const auto t0 = std::chrono::steady_clock::now();
  auto saved = before.save(path);
  const auto t1 = std::chrono::steady_clock::now();
  ASSERT_TRUE(saved.ok()) << saved.status().message();
  MemoryStore after(manual(clock, 2'000'000, 64));
  const auto t2 = std::chrono::steady_clock::now();
  auto loaded = after.load(path);
  const auto t3 = std::chrono::steady_clock::now();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(saved->keys, 1'000'000U);
  EXPECT_EQ(loaded->keys, 1'000'000U);
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf("snapshot of %zu keys: %zu bytes (%.1f per key), save %.0f ms, load %.0f ms\n", saved->keys,
              saved->bytes, static_cast<double>(saved->bytes) / static_cast<double>(saved->keys), ms(t1 - t0),
              ms(t3 - t2));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ratelimit
