// envoy_startup_test.cc — `--envoy-env` start-up: prepare_envoy_env / check_envoy_env in
// process, and the real ratelimitd binary run with `--envoy-env --check` under a clean
// environment (what a user migrating from envoyproxy/ratelimit types first).
#include "envoy_startup.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <sys/resource.h>
#include <sys/wait.h>

#include "../yaml/alias_bomb.h"

namespace ratelimit::rls {
namespace {
namespace fs = std::filesystem;

struct Dir {
  Dir() {
    std::random_device rd;
    root = fs::temp_directory_path() / ("rls-startup-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(root / "ratelimit" / "config");
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(root / "ratelimit" / "config" / name) << text;
  }
  fs::path root;
};

EnvLookup env_of(std::map<std::string, std::string> m) {
  return [m](std::string_view n) -> std::optional<std::string> {
    auto it = m.find(std::string(n));
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

const char* kRules =
    "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, "
    "requests_per_unit: 10}\n";

TEST(EnvoyStartup, PreparesSettingsRulesAndStore) {
  Dir d;
  d.write("edge.yaml", kRules);
  auto s = prepare_envoy_env(env_of({{"RUNTIME_ROOT", d.root.string()},
                                     {"RUNTIME_SUBDIRECTORY", "ratelimit"},
                                     {"BACKEND_TYPE", "redis"}, {"REDIS_SOCKET_TYPE", "tcp"},
                                     {"REDIS_URL", "127.0.0.1:6379"}, {"REDIS_AUTH", "secret"}}));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->config_directory, (d.root / "ratelimit" / "config").string());
  EXPECT_EQ(s->store, "redis://:secret@127.0.0.1:6379");
  EXPECT_EQ(s->rules->generation(), 1u);
  EXPECT_TRUE(s->rules->current()->has_domain("edge"));
  EXPECT_EQ(s->watch_paths.back(), s->config_directory);

  std::ostringstream out, err;
  EXPECT_EQ(check_envoy_env(env_of({{"RUNTIME_ROOT", d.root.string()},
                                    {"RUNTIME_SUBDIRECTORY", "ratelimit"},
                                    {"BACKEND_TYPE", "redis"}, {"REDIS_SOCKET_TYPE", "tcp"},
                                    {"REDIS_URL", "127.0.0.1:6379"}, {"REDIS_AUTH", "secret"}}),
                            out, err),
            0);
  EXPECT_NE(out.str().find("store: redis://*****@127.0.0.1:6379"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("secret"), std::string::npos) << "the password is never printed";
  EXPECT_NE(out.str().find("edge.remote_address: unit=MINUTE requests_per_unit=10"),
            std::string::npos);
}

TEST(EnvoyStartup, RefusesABadVariableADirectoryOrAFile) {
  Dir d;
  d.write("edge.yaml", "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight}\n");
  std::ostringstream out, err;
  EXPECT_EQ(check_envoy_env(env_of({{"RUNTIME_ROOT", d.root.string()},
                                    {"RUNTIME_SUBDIRECTORY", "ratelimit"}}),
                            out, err),
            2);
  EXPECT_NE(err.str().find("edge.yaml:4: invalid rate limit unit 'fortnight'"), std::string::npos)
      << err.str();
  auto s = prepare_envoy_env(env_of({{"RUNTIME_ROOT", (d.root / "missing").string()}}));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("not a directory"), std::string::npos);
  s = prepare_envoy_env(env_of({{"GRPC_PORT", "x"}}));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "GRPC_PORT: 'x' is not a whole number");
}

// Runs `command` through the shell; returns (exit code, stdout+stderr).
std::pair<int, std::string> run(const std::string& command) {
  std::string output;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return {-1, ""};
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) output.append(buf.data(), n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

TEST(EnvoyStartup, RatelimitdEnvoyEnvCheck) {
  Dir d;
  d.write("edge.yaml", kRules);
  const std::string bin = std::string(RATELIMIT_BIN_DIR) + "/ratelimitd";
  const std::string env = "env -i RUNTIME_ROOT=" + d.root.string() +
                          " RUNTIME_SUBDIRECTORY=ratelimit RUNTIME_IGNOREDOTFILES=true ";
  auto [rc, out] = run(env + bin + " --envoy-env --check");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("configuration ok: 1 rules from " + (d.root / "ratelimit" / "config").string()),
            std::string::npos) << out;
  EXPECT_NE(out.find("grpc: 0.0.0.0:8081  http: 0.0.0.0:8080  debug: 0.0.0.0:6070"), std::string::npos);
  EXPECT_NE(out.find("store: memory"), std::string::npos);
  EXPECT_NE(out.find("ignored: USE_STATSD=true (the default)"), std::string::npos) << out;

  std::tie(rc, out) = run(env + "SHADOW_MODE=maybe " + bin + " --envoy-env --check");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("SHADOW_MODE: 'maybe' is not a boolean"), std::string::npos) << out;

  d.write("bad.yaml", "domain: edge\n");
  std::tie(rc, out) = run(env + bin + " --envoy-env --check");
  EXPECT_EQ(rc, 2);
  // Files load in path order: bad.yaml first, so edge.yaml holds the duplicate.
  EXPECT_NE(out.find("edge.yaml:1: duplicate domain 'edge' in config file"), std::string::npos) << out;
  std::tie(rc, out) = run(env + "MERGE_DOMAIN_CONFIG=true " + bin + " --envoy-env --check");
  EXPECT_EQ(rc, 0) << out;

  // Issue 23 item 5: a header name with a CR/LF is refused at start, exit 2, naming the variable.
  std::tie(rc, out) = run(env + "LIMIT_RESPONSE_HEADERS_ENABLED=true LIMIT_LIMIT_HEADER=\"$(printf 'bad header\\r\\nX: y')\" " +
                          bin + " --envoy-env --check");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("LIMIT_LIMIT_HEADER: 'bad header\\r\\nX: y' is not a valid HTTP header name"),
            std::string::npos) << out;

  std::tie(rc, out) = run(env + bin + " --envoy-env --config x.yaml --check");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("--envoy-env takes its settings from the environment"), std::string::npos);
}

// Issue 23 item 3: the review's alias bomb in `metadata` took `--envoy-env --check` past 490 MB
// in 25 s. Now it is refused with its file and line, at once, in a few MB.
TEST(EnvoyStartup, AnAliasBombIsRefusedFastAndSmall) {
  Dir d;
  d.write("bomb.yaml", testing_yaml::envoy_metadata_bomb());
  const std::string bin = std::string(RATELIMIT_BIN_DIR) + "/ratelimitd";
  const std::string env = "env -i RUNTIME_ROOT=" + d.root.string() + " RUNTIME_SUBDIRECTORY=ratelimit ";
  const auto t0 = std::chrono::steady_clock::now();
  // A virtual-memory cap makes the old behaviour fail fast instead of eating the machine.
  auto [rc, out] = run("ulimit -v 1000000; " + env + "timeout 20 " + bin + " --envoy-env --check");
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("bomb.yaml:12: error loading config file: YAML aliases expand the document "
                     "to more than 1000000 nodes"), std::string::npos) << out;
  // The old behaviour took 25 s (and 490 MB, which the rusage check below catches on any
  // machine); this whole run (a shell, ratelimitd's start and the refusal) takes well under a
  // second here. 10 s tells the two apart with room for a loaded machine's process start.
  EXPECT_LT(took, std::chrono::seconds(10));
  struct rusage ru {};
  ASSERT_EQ(::getrusage(RUSAGE_CHILDREN, &ru), 0);
  EXPECT_LT(ru.ru_maxrss, 100 * 1024) << "KiB: the largest child (ratelimitd) peaked there";
}

}  // namespace
}  // namespace ratelimit::rls
