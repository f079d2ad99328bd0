// version_test.cc — every binary answers --version with "<name> <project version>" (plus
// "(git <describe>)" when built from a git checkout) and exit status 0, all from the one
// generated ratelimit/version.h; and a running ratelimitd exports the same build in
// ratelimitd_build_info{version=...,revision=...} 1.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

#include "daemon.h"
#include "ratelimit/version.h"

namespace {

// Runs `command` through the shell (bounded by `timeout`), returns exit status and stdout.
int run(const std::string& command, std::string& out) {
  FILE* p = popen(("timeout 10 " + command + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class VersionFlag : public testing::TestWithParam<const char*> {};

TEST_P(VersionFlag, PrintsTheOneVersionAndExitsZero) {
  std::string out;
  const int rc = run(std::string(RATELIMIT_BIN_DIR) + "/" + GetParam() + " --version", out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, ratelimit::version_line(GetParam()) + "\n");
  EXPECT_EQ(out.rfind(std::string(GetParam()) + " " RATELIMIT_VERSION, 0), 0u) << out;
}

INSTANTIATE_TEST_SUITE_P(EveryBinary, VersionFlag,
                         testing::Values("ratelimitd", "ratelimit-sim", "ratelimit-bench",
                                         "ratelimit-demo"));

TEST(VersionFlag, DemoRefusesOtherArguments) {
  std::string out;
  EXPECT_EQ(run(std::string(RATELIMIT_BIN_DIR) + "/ratelimit-demo --frobnicate", out), 2);
  EXPECT_NE(out.find("usage: ratelimit-demo"), std::string::npos) << out;
}

TEST(BuildInfo, MetricCarriesTheVersionAndRevision) {
  ratelimit::e2e::Daemon d;
  ASSERT_TRUE(d.start("policies:\n  p: { algorithm: fixed_window, limit: 1, window: 1s }\n"))
      << d.log();
  const auto m = ratelimit::e2e::http_get(d.port(), "/metrics");
  ASSERT_EQ(m.status, 200u);
  const std::string want = "ratelimitd_build_info{version=\"" RATELIMIT_VERSION
                           "\",revision=\"" RATELIMIT_GIT_DESCRIBE "\"} 1\n";
  EXPECT_NE(m.body.find(want), std::string::npos) << want << m.body;
  EXPECT_NE(m.body.find("# TYPE ratelimitd_build_info gauge\n"), std::string::npos);
}

}  // namespace
