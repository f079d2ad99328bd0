// config_dir_test.cc — src/rls/config_dir on a real filesystem: what is read, the last-good
// rule on reload, and inotify reloads through Kubernetes' `..data` symlink swap and a swap of
// the RUNTIME_ROOT symlink, with resolvers running throughout (none may see a missing rule).
// Every wait is bounded.
#include "config_dir.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "eventually.h"
#include "temp_dir.h"

namespace ratelimit::rls {
namespace {
namespace fs = std::filesystem;

using test_support::TempDir;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string rule(const std::string& domain, int rpu) {
  return "domain: " + domain + "\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, "
         "requests_per_unit: " + std::to_string(rpu) + "}\n";
}

uint32_t rpu_of(const RuleSet& set, const std::string& domain) {
  std::vector<Entry> e{{"k", "v"}};
  std::vector<Descriptor> d{{e, std::nullopt}};
  std::vector<Applied> out;
  if (!set.resolve(domain, d, out).is_ok() || !out[0].rule()) return 0;
  return out[0].rule()->requests_per_unit;
}

// Every wait here is bounded at 5 s.
constexpr std::chrono::milliseconds kWait{5000};

TEST(ConfigDir, ReadsEveryFileInPathOrderSkippingDotFilesWhenAsked) {
  TempDir t;
  write(t.path() / "b.yaml", rule("b", 1));
  write(t.path() / "a.yaml", rule("a", 1));
  write(t.path() / "sub" / "c.yaml", rule("c", 1));
  write(t.path() / ".hidden.yaml", rule("h", 1));
  write(t.path() / "..2025_x" / "d.yaml", rule("d", 1));
  fs::create_directory_symlink(t.path() / "..2025_x", t.path() / "..data");
  fs::create_symlink(t.path() / "..data" / "d.yaml", t.path() / "d.yaml");
  auto with_dots = read_config_directory(t.path().string(), false);
  ASSERT_TRUE(with_dots.ok()) << with_dots.status().to_string();
  std::vector<std::string> names;
  for (const auto& f : *with_dots) names.push_back(fs::path(f.name).lexically_relative(t.path()).string());
  // The directory symlink ..data is not descended; its real twin is (as goruntime does).
  EXPECT_EQ(names, (std::vector<std::string>{"..2025_x/d.yaml", ".hidden.yaml", "a.yaml",
                                             "b.yaml", "d.yaml", "sub/c.yaml"}));
  auto no_dots = read_config_directory(t.path().string(), true);
  ASSERT_TRUE(no_dots.ok());
  names.clear();
  for (const auto& f : *no_dots) names.push_back(fs::path(f.name).lexically_relative(t.path()).string());
  EXPECT_EQ(names, (std::vector<std::string>{"a.yaml", "b.yaml", "d.yaml", "sub/c.yaml"}));
  EXPECT_EQ((*no_dots)[2].text, rule("d", 1));

  auto missing = read_config_directory((t.path() / "nope").string(), true);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("not a directory"), std::string::npos);
  write(t.path() / "big" / "x.yaml", std::string(kMaxConfigFileBytes + 1, '#'));
  auto big = read_config_directory((t.path() / "big").string(), true);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("larger than"), std::string::npos);
}

TEST(ConfigDir, ABadReloadKeepsTheLastGoodRuleSet) {
  TempDir t;
  write(t.path() / "a.yaml", rule("a", 5));
  RuleSource src(t.path().string(), true, {});
  EXPECT_EQ(src.generation(), 0u);
  EXPECT_TRUE(src.current()->empty());
  ReloadResult r = src.reload();
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.generation, 1u);
  EXPECT_EQ(rpu_of(*src.current(), "a"), 5u);

  write(t.path() / "b.yaml", "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n");
  write(t.path() / "a.yaml", rule("a", 6));
  r = src.reload();
  EXPECT_FALSE(r.status.is_ok());
  EXPECT_NE(r.status.message().find("b.yaml:4: invalid rate limit unit 'fortnight'"), std::string::npos)
      << r.status.message();
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(src.generation(), 1u);
  EXPECT_EQ(rpu_of(*src.current(), "a"), 5u) << "nothing of the refused set is served";

  fs::remove(t.path() / "b.yaml");
  r = src.reload(/*only_if_changed=*/true);
  ASSERT_TRUE(r.status.is_ok());
  EXPECT_EQ(src.generation(), 2u);
  EXPECT_EQ(rpu_of(*src.current(), "a"), 6u);
  r = src.reload(/*only_if_changed=*/true);
  EXPECT_FALSE(r.changed) << "same bytes: no new generation";
  EXPECT_EQ(src.generation(), 2u);
  r = src.reload();
  EXPECT_TRUE(r.changed) << "an explicit reload (SIGHUP) always swaps";
  EXPECT_EQ(src.generation(), 3u);
}

TEST(ConfigDir, WatchPathsCoverTheRootSymlinkAndEveryLevel) {
  EXPECT_EQ(watch_paths("/srv/runtime_data/current", "/srv/runtime_data/current/ratelimit/config"),
            (std::vector<std::string>{"/srv/runtime_data", "/srv/runtime_data/current",
                                      "/srv/runtime_data/current/ratelimit",
                                      "/srv/runtime_data/current/ratelimit/config"}));
}

// Resolves in a loop until stopped; counts resolutions that found no rule.
struct Resolvers {
  explicit Resolvers(RuleSource& src) {
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([this, &src] {
        while (!stop.load()) {
          if (rpu_of(*src.current(), "app") == 0) misses.fetch_add(1);
          resolved.fetch_add(1);
        }
      });
    }
  }
  ~Resolvers() {
    stop = true;
    for (auto& t : threads) t.join();
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> misses{0}, resolved{0};
  std::vector<std::thread> threads;
};

TEST(ConfigDir, KubernetesDataSymlinkSwapReloadsUnderLoad) {
  TempDir t;
  const fs::path cfg = t.path() / "ratelimit" / "config";
  // A ConfigMap volume: real files in a timestamped directory, ..data -> it, and the visible
  // names -> ..data/<name>.
  write(cfg / "..2025_01_01_00_00_00.1" / "app.yaml", rule("app", 10));
  fs::create_directory_symlink("..2025_01_01_00_00_00.1", cfg / "..data");
  fs::create_symlink("..data/app.yaml", cfg / "app.yaml");

  RuleSource src(cfg.string(), /*ignore_dotfiles=*/true, {});
  ASSERT_TRUE(src.reload().status.is_ok());
  std::atomic<int> reloads{0};
  std::string last_error;
  std::mutex mu;
  auto watcher = DirectoryWatcher::start(watch_paths(t.path().string(), cfg.string()), [&] {
    ReloadResult r = src.reload(true);
    std::lock_guard l(mu);
    if (!r.status.is_ok()) last_error = r.status.message();
    reloads.fetch_add(1);
  });
  ASSERT_TRUE(watcher.ok()) << watcher.status().to_string();
  Resolvers load(src);

  for (int round = 2; round <= 4; ++round) {
    const std::string next = "..2025_01_01_00_00_0" + std::to_string(round) + ".1";
    const std::string prev = "..2025_01_01_00_00_0" + std::to_string(round - 1) + ".1";
    // What the kubelet does: write the new directory, point a temporary symlink at it,
    // rename it over ..data (atomic), remove the old directory.
    write(cfg / next / "app.yaml", rule("app", 10 * round));
    fs::create_directory_symlink(next, cfg / "..data_tmp");
    fs::rename(cfg / "..data_tmp", cfg / "..data");
    fs::remove_all(cfg / (round == 2 ? "..2025_01_01_00_00_00.1" : prev));
    ASSERT_TRUE(testing::eventually([&] { return rpu_of(*src.current(), "app") == 10u * round; }, kWait))
        << "round " << round << ": still " << rpu_of(*src.current(), "app") << "; " << last_error;
  }
  EXPECT_GE(src.generation(), 4u);
  {
    std::lock_guard l(mu);
    EXPECT_EQ(last_error, "");
  }
  // A broken ConfigMap update is refused whole; the last good rule keeps serving.
  write(cfg / "..2025_01_01_00_00_09.1" / "app.yaml", "domain: app\ndescriptors:\n  - key: \"\"\n");
  fs::create_directory_symlink("..2025_01_01_00_00_09.1", cfg / "..data_tmp");
  fs::rename(cfg / "..data_tmp", cfg / "..data");
  const int before = reloads.load();
  ASSERT_TRUE(testing::eventually([&] { return reloads.load() > before; }, kWait));
  ASSERT_TRUE(testing::eventually([&] {
    std::lock_guard l(mu);
    return last_error.find("descriptor has empty key") != std::string::npos;
  }, kWait)) << last_error;
  EXPECT_EQ(rpu_of(*src.current(), "app"), 40u);
  EXPECT_GT(load.resolved.load(), 0u);
  EXPECT_EQ(load.misses.load(), 0u) << "a resolver saw no rule during a swap";
}

TEST(ConfigDir, RuntimeRootSymlinkSwapReloads) {
  TempDir t;
  // envoyproxy/ratelimit's classic layout: RUNTIME_ROOT=/srv/runtime_data/current is a
  // symlink that a deploy swaps to a new versioned directory.
  write(t.path() / "v1" / "config" / "app.yaml", rule("app", 1));
  write(t.path() / "v2" / "config" / "app.yaml", rule("app", 2));
  fs::create_directory_symlink(t.path() / "v1", t.path() / "current");
  const std::string root = (t.path() / "current").string();
  const std::string cfg = root + "/config";
  RuleSource src(cfg, false, {});
  ASSERT_TRUE(src.reload().status.is_ok());
  auto watcher = DirectoryWatcher::start(watch_paths(root, cfg), [&] { src.reload(true); });
  ASSERT_TRUE(watcher.ok());
  Resolvers load(src);
  fs::create_directory_symlink(t.path() / "v2", t.path() / "current.tmp");
  fs::rename(t.path() / "current.tmp", t.path() / "current");
  ASSERT_TRUE(testing::eventually([&] { return rpu_of(*src.current(), "app") == 2u; }, kWait));
  // And a plain edit in the new target is seen too (the watch moved with the symlink).
  write(t.path() / "v2" / "config" / "app.yaml", rule("app", 3));
  ASSERT_TRUE(testing::eventually([&] { return rpu_of(*src.current(), "app") == 3u; }, kWait));
  EXPECT_EQ(load.misses.load(), 0u);
}

// Issue 23 item 4: a bad file in the watched directory was reloaded, refused, logged and
// counted every 100 ms until fixed. Refused once per change: looking again at the same bytes
// (the watcher, only_if_changed) is "unchanged"; an explicit reload (SIGHUP) still tries.
TEST(ConfigDir, ARefusedSetIsRefusedOncePerChange) {
  TempDir t;
  write(t.path() / "a.yaml", rule("a", 5));
  RuleSource src(t.path().string(), true, {});
  ASSERT_TRUE(src.reload().status.is_ok());
  write(t.path() / "b.yaml", "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n");
  ReloadResult r = src.reload(true);
  EXPECT_FALSE(r.status.is_ok());
  EXPECT_FALSE(r.unchanged);
  r = src.reload(true);
  EXPECT_TRUE(r.unchanged) << "the same refused bytes are not refused (logged, counted) again";
  EXPECT_FALSE(r.changed);
  r = src.reload(false);
  EXPECT_FALSE(r.status.is_ok()) << "SIGHUP asks again";
  EXPECT_FALSE(r.unchanged);
  // Another broken content is another change: refused once more.
  write(t.path() / "b.yaml", "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: eon}\n");
  r = src.reload(true);
  EXPECT_FALSE(r.status.is_ok());
  EXPECT_FALSE(r.unchanged);
  EXPECT_TRUE(src.reload(true).unchanged);
  // A read error is remembered the same way.
  const fs::path moved = t.path().string() + ".gone";
  fs::rename(t.path(), moved);
  r = src.reload(true);
  EXPECT_FALSE(r.status.is_ok());
  EXPECT_FALSE(r.unchanged);
  EXPECT_TRUE(src.reload(true).unchanged);
  fs::rename(moved, t.path());
  // Fixed (and a.yaml changed meanwhile): loaded at once.
  fs::remove(t.path() / "b.yaml");
  write(t.path() / "a.yaml", rule("a", 6));
  r = src.reload(true);
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(src.generation(), 2u);
  EXPECT_EQ(rpu_of(*src.current(), "a"), 6u);
}

// Replaces `p` in one event (a rename from beside the watched directory): an in-place write is
// a truncate and a write, which a stall longer than the watcher's quiet period (100 ms, a loaded
// machine's) between them turns into two changes, and two calls.
void replace(const fs::path& p, const std::string& text) {
  const fs::path incoming = p.parent_path().string() + ".incoming";
  std::ofstream(incoming) << text;
  fs::rename(incoming, p);
}

// The root cause of the loop: the watcher took the kernel's IN_IGNORED (sent for every watch
// it removes while re-arming) for a change, so each call scheduled the next one.
TEST(ConfigDir, TheWatcherCallsOncePerChangeNotForEver) {
  TempDir t;
  write(t.path() / "a.yaml", rule("a", 1));
  std::atomic<int> calls{0};
  auto watcher = DirectoryWatcher::start({t.path().string()}, [&] { ++calls; });
  ASSERT_TRUE(watcher.ok());
  replace(t.path() / "a.yaml", rule("a", 2));
  ASSERT_TRUE(testing::eventually([&] { return calls.load() >= 1; }, kWait));
  // Ten quiet periods later, still one call (it was about one per 100 ms before the fix).
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  EXPECT_EQ(calls.load(), 1);
  replace(t.path() / "a.yaml", rule("a", 3));
  ASSERT_TRUE(testing::eventually([&] { return calls.load() >= 2; }, kWait));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(calls.load(), 2);
}

TEST(ConfigDir, ExampleEnvoyConfigLoads) {
  RuleSource src(std::string(RATELIMIT_SOURCE_DIR) + "/examples/envoy/config", true, {});
  ReloadResult r = src.reload();
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  auto set = src.current();
  auto applied = [&](std::vector<Entry> e) {
    std::vector<Descriptor> d{{e, std::nullopt}};
    std::vector<Applied> out;
    EXPECT_TRUE(set->resolve("edge", d, out).is_ok());
    return out[0];
  };
  Applied ip = applied({{"remote_address", "10.0.0.1"}});
  ASSERT_TRUE(ip.rule());
  EXPECT_EQ(ip.rule()->requests_per_unit, 100u);
  Applied login = applied({{"remote_address", "10.0.0.1"}, {"path", "/login"}});
  ASSERT_TRUE(login.rule());
  EXPECT_EQ(login.rule()->name, "login");
  EXPECT_TRUE(applied({{"remote_address", "1"}, {"path", "/static/app.js"}}).unlimited);
  EXPECT_EQ(applied({{"remote_address", "1"}, {"path", "/other"}}).rule(), nullptr);
  Applied key = applied({{"api_key", "k1"}});
  ASSERT_TRUE(key.rule() && key.rule()->policy);
  EXPECT_EQ(key.rule()->policy->algorithm(), Algorithm::kTokenBucket);
  Applied test_key = applied({{"api_key", "test-1"}});
  ASSERT_TRUE(test_key.rule());
  EXPECT_TRUE(test_key.rule()->shadow_mode);
}

}  // namespace
}  // namespace ratelimit::rls
