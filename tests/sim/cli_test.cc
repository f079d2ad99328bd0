// cli_test.cc — the ratelimit-sim binary: outputs on stdout, and for every kind of bad flag
// or input a one-line message on stderr and exit code 2 (never a crash).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run.h"
#include "sim_test_util.h"

namespace ratelimit::sim {
namespace {

using testing::read_file;
using testing::run_command;
using testing::ScratchDir;
using testing::write_file;

struct Outcome {
  int code;
  std::string out;
  std::string err;
};

Outcome sim(const ScratchDir& dir, const std::string& args, const std::string& stdin_text = "") {
  std::string cmd;
  if (!stdin_text.empty()) {
    write_file(dir.file("stdin"), stdin_text);
    cmd = "< " + dir.file("stdin") + " ";
  }
  cmd += std::string(SIM_BINARY) + " " + args + " > " + dir.file("out") + " 2> " + dir.file("err");
  Outcome o;
  o.code = run_command(cmd);
  o.out = read_file(dir.file("out"));
  o.err = read_file(dir.file("err"));
  return o;
}

TEST(Cli, HelpAndDefaultRun) {
  ScratchDir dir;
  Outcome help = sim(dir, "--help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--trace"), std::string::npos);
  Outcome all = sim(dir, "");
  EXPECT_EQ(all.code, 0) << all.err;
  for (const char* p : {"pattern A:", "pattern B:", "pattern C:"}) {
    EXPECT_NE(all.out.find(p), std::string::npos) << p;
  }
  EXPECT_TRUE(all.err.empty()) << all.err;
}

TEST(Cli, JsonCsvSvgAndStdinTrace) {
  ScratchDir dir;
  Outcome json = sim(dir, "-p C --format json --svg " + dir.file("c.svg"));
  ASSERT_EQ(json.code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["runs"][0]["algorithms"][2]["attack_admitted"].get<int64_t>(), 11);
  EXPECT_EQ(read_file(dir.file("c.svg")).rfind("<?xml", 0), 0U);
  EXPECT_NE(read_file(dir.file("c.svg")).find(">bar = 20ms<"), std::string::npos);  // auto
  Outcome wide = sim(dir, "-p C --bar-width 1s --svg " + dir.file("c1.svg"));
  ASSERT_EQ(wide.code, 0) << wide.err;
  EXPECT_NE(read_file(dir.file("c1.svg")).find(">bar = 1s<"), std::string::npos);  // 1-2-5
  Outcome csv = sim(dir, "-p B -f csv --leaky-mode shape");
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_NE(csv.out.find("pattern B,leaky_bucket,10/s burst 20 shape,30,21,9,1,21,2000000,0,0,21,"
                         "5100000,7100000"),
            std::string::npos)
      << csv.out;
  Outcome piped = sim(dir, "--trace - -f csv --limit 2", "0.1,a\n0.2,a\n0.3,a\n0.4,b\n");
  ASSERT_EQ(piped.code, 0) << piped.err;
  EXPECT_NE(piped.out.find("trace -,fixed_window,2 per 1s,4,3,1,1,3,"), std::string::npos)
      << piped.out;
  Outcome params = sim(dir, "-p C --limit 20 --window 2s --token-fill full -f json");
  ASSERT_EQ(params.code, 0) << params.err;
  const auto k = nlohmann::json::parse(params.out);
  EXPECT_EQ(k["runs"][0]["algorithms"][0]["window_us"].get<int64_t>(), 2'000'000);
  EXPECT_EQ(k["runs"][0]["token_fill"], "full");
}

TEST(Cli, BadFlagsAndInputsExitTwoWithAMessage) {
  ScratchDir dir;
  write_file(dir.file("bad.csv"), "1,a\nx,a\n");
  write_file(dir.file("back.csv"), "2,a\n1,a\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--limit 0", "--limit"},
      {"--limit -5", "--limit"},
      {"--window 0s", "--window"},
      {"--window soon", "--window"},
      {"--token-rate 0", "--token-rate"},
      {"--token-rate nan", "--token-rate"},
      {"--leaky-burst 0", "--leaky-burst"},
      {"--leaky-mode gentle", "--leaky-mode"},
      {"--token-fill 30", "--token-fill"},
      {"--token-fill lots", "--token-fill"},
      {"--pattern D", "--pattern"},
      {"--poisson-rate 0 -p A", "--poisson-rate"},
      {"--burst-size 0 -p B", "--burst-size"},
      {"--format xml", "--format"},
      {"--trace-format xml --trace x", "--trace-format"},
      {"--unsorted maybe", "--unsorted"},
      {"--peak-window 0", "--peak-window"},
      {"--bar-width -1", "--bar-width"},
      {"--bar-width soon", "--bar-width"},
      {"--no-such-flag", "no-such-flag"},
      {"--limit ten", "--limit"},
      {"--seed x", "--seed"},
      {"--seed 18446744073709551616", "--seed"},
      {"--trace " + dir.file("missing.csv"), "cannot open trace"},
      {"--trace " + dir.file(""), "directory"},
      {"--trace " + dir.file("bad.csv"), "bad.csv:2: invalid time 'x'"},
      {"--trace " + dir.file("back.csv"), "back.csv:2: time 1 s is before"},
      {"--trace " + dir.file("bad.csv") + " --pattern A", "excludes"},
      {"--svg " + dir.file("all.svg"), "--svg draws one run"},
      {"-p C --svg " + dir.file("no/such/dir/c.svg"), "cannot write the SVG"},
  };
  for (const auto& [args, message] : cases) {
    Outcome o = sim(dir, args);
    EXPECT_EQ(o.code, 2) << args << "\n" << o.err;
    EXPECT_NE(o.err.find(message), std::string::npos) << args << " -> " << o.err;
    EXPECT_EQ(o.err.rfind("ratelimit-sim: ", 0), 0U) << args << " -> " << o.err;
    EXPECT_TRUE(o.out.empty()) << args;
  }
}

TEST(Cli, NegativeSeedsAreSeededLikePython) {
  // random.Random(-7) seeds with abs(-7): the same stream as random.Random(7).
  ScratchDir dir;
  Outcome negative = sim(dir, "-p A --seed -7 -f csv");
  Outcome positive = sim(dir, "-p A --seed 7 -f csv");
  Outcome other = sim(dir, "-p A --seed 8 -f csv");
  ASSERT_EQ(negative.code, 0) << negative.err;
  EXPECT_EQ(negative.out, positive.out);
  EXPECT_NE(other.out, positive.out);
}

TEST(Cli, SkipBadGoesOnAndWarns) {
  ScratchDir dir;
  write_file(dir.file("bad.csv"), "1,a\nx,a\n2,a\n");
  Outcome o = sim(dir, "--trace " + dir.file("bad.csv") + " --skip-bad");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("skipped 1 malformed line"), std::string::npos) << o.out;
  EXPECT_NE(o.err.find("warning: skipped"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("bad.csv:2:"), std::string::npos) << o.err;
}

TEST(Cli, ProgressShowsRateAndTimeLeftOnlyOnATerminal) {
  EXPECT_EQ(progress_line(1'000'000, 50, 100, 2.0),
            "ratelimit-sim: 1000000 lines, 50%, 500.0 k lines/s, 2 s left");
  EXPECT_EQ(progress_line(9'000'000, 90, 100, 3.0),
            "ratelimit-sim: 9000000 lines, 90%, 3.0 M lines/s, 1 s left");
  EXPECT_EQ(progress_line(500, 10, 0, 1.0), "ratelimit-sim: 500 lines, 500 lines/s");  // a pipe
  // Redirected stderr (not a terminal): no progress, no escape codes, nothing at all.
  ScratchDir dir;
  std::string csv;
  for (int i = 0; i < 70'000; ++i) csv += std::to_string(i) + ".5,k" + std::to_string(i % 50) + "\n";
  write_file(dir.file("t.csv"), csv);
  Outcome o = sim(dir, "--trace " + dir.file("t.csv"));
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(o.err.empty()) << o.err;
}

// docs/simulator.md's example outputs are what the binary prints: the three patterns, and the
// sample access log written by tools/sim/make_sample_access_log.py (deterministic).
std::string readme_block_after(const std::string& readme, const std::string& anchor) {
  const size_t at = readme.find(anchor);
  if (at == std::string::npos) return "anchor not found: " + anchor;
  const size_t open = readme.find("```\n", at + anchor.size());
  const size_t close = readme.find("```\n", open + 4);
  return readme.substr(open + 4, close - open - 4);
}

TEST(Cli, ReadmeExamplesAreWhatTheBinaryPrints) {
  ScratchDir dir;
  const std::string readme = read_file(std::string(RATELIMIT_SOURCE_DIR) + "/docs/simulator.md");
  Outcome patterns = sim(dir, "");
  ASSERT_EQ(patterns.code, 0);
  EXPECT_EQ(patterns.out, readme_block_after(readme, "The output of `build/bin/ratelimit-sim`, unedited:"));
  const std::string gen = std::string("python3 ") + RATELIMIT_SOURCE_DIR "/tools/sim/make_sample_access_log.py";
  ASSERT_EQ(run_command("cd " + dir.file("") + " && " + gen + " > access.log && " + gen +
                        " --format msec > access_msec.log"),
            0);
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"--trace access.log --limit 20 --top 4", "build/bin/ratelimit-sim --trace access.log --limit 20 --top 4\n```\n"},
      {"--trace access_msec.log --log-format 'combined $msec' --limit 20 --top 4",
       "--log-format 'combined $msec' --limit 20 --top 4\n```\n"},
      {"--trace access.log --limit 20 --top 4 --spread", "--limit 20 --top 4 --spread\n```\n"},
      {"-p B --concurrency 5 --hold 300ms --max-wait 2s --max-queue 20",
       "--concurrency 5 --hold 300ms --max-wait 2s --max-queue 20\n```\n"},
      {"--trace access_msec.log --log-format 'combined $msec' --limit 20 --top 0 --instances 3 "
       "--lease-max 5",
       "--top 0 --instances 3 --lease-max 5\n```\n"},
  };
  // The chart in docs/images is the binary's own, not a stale drawing.
  ASSERT_EQ(sim(dir, "-p C --svg " + dir.file("c.svg")).code, 0);
  EXPECT_EQ(read_file(dir.file("c.svg")),
            read_file(std::string(RATELIMIT_SOURCE_DIR) + "/docs/images/pattern_c.svg"))
      << "regenerate it: build/bin/ratelimit-sim -p C --svg docs/images/pattern_c.svg";
  ASSERT_EQ(sim(dir, "usage --svg " + dir.file("usage.svg")).code, 0);
  EXPECT_EQ(read_file(dir.file("usage.svg")), read_file(std::string(RATELIMIT_SOURCE_DIR) + "/docs/images/usage.svg"))
      << "regenerate it: build/bin/ratelimit-sim usage --svg docs/images/usage.svg";
  for (const auto& [args, anchor] : runs) {
    const int code = run_command("cd " + dir.file("") + " && " + SIM_BINARY + " " + args + " > out.txt 2> err.txt");
    EXPECT_EQ(code, 0) << args;
    EXPECT_EQ(read_file(dir.file("out.txt")), readme_block_after(readme, anchor)) << args;
  }
}

}  // namespace
}  // namespace ratelimit::sim
