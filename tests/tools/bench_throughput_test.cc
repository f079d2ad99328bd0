// bench_throughput_test.cc — `ratelimit-bench throughput` on the memory store, run as a user
// runs it: the result line counts decisions and never a denial under the allow limit, the JSON
// line names the peers' workload, nothing at all goes to stderr when it is not a terminal, and
// a progress line does when it is one (under `script`, which gives the command a pty).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <sys/wait.h>

namespace {

const std::string kBench = std::string(RATELIMIT_BIN_DIR) + "/ratelimit-bench";

struct ShellRun {
  int rc = -1;
  std::string out;
};

ShellRun shell(const std::string& command) {
  ShellRun r;
  FILE* p = popen(("timeout 60 " + command).c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

double field(const std::string& out, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(name + "=([0-9.]+)"))) return -1;
  return std::stod(m[1]);
}

TEST(BenchThroughput, MemoryStoreCountsDecisionsAndPrintsNothingElseWithoutATerminal) {
  const std::string err = testing::TempDir() + "bench_stderr.txt";
  const ShellRun r = shell(kBench + " throughput --store memory --algorithm fixed_window --keys 1000 "
                               "--threads 2 --seconds 0.3 --warmup 0.1 --json-peer cpp-memory 2>" + err);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_GT(field(r.out, "decisions/s"), 10'000) << r.out;
  EXPECT_EQ(field(r.out, "denied"), 0) << r.out;
  EXPECT_EQ(field(r.out, "failed"), 0) << r.out;
  EXPECT_GT(field(r.out, "p99_us"), 0) << r.out;  // latency samples were taken
  EXPECT_NE(r.out.find("\"peer\": \"cpp-memory\", \"workload\": \"inproc.100k\""), std::string::npos)
      << r.out;
  const ShellRun e = shell("cat " + err);
  EXPECT_EQ(e.out, "") << "stderr is not a terminal: no progress line expected";
}

TEST(BenchThroughput, ShowsProgressOnATerminal) {
  // script(1) runs the command on a pseudo-terminal and copies what it writes to our pipe.
  const ShellRun r = shell("script -qec '" + kBench +
                      " throughput --store memory --keys 10 --seconds 0.6 --warmup 0.3' /dev/null");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("ratelimit-bench: warm-up"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ratelimit-bench: measuring"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("M decisions/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("store=memory"), std::string::npos) << r.out;
}

}  // namespace
