// render_test.cc — the outputs parse back: JSON (nlohmann), CSV (split), the table's rows,
// and the SVG is well-formed XML (python3's xml.dom.minidom via svg_check.py) with one lane
// per algorithm holding one mark per request.
#include "render.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "run.h"
#include "sim_test_util.h"

namespace ratelimit::sim {
namespace {

using testing::read_file;
using testing::run_command;
using testing::ScratchDir;
using testing::write_file;

std::vector<Report> all_patterns() {
  RunOptions o;
  auto r = simulate(o);
  EXPECT_TRUE(r.ok());
  return *r;
}

TEST(Render, JsonParsesBackToTheReport) {
  const auto reports = all_patterns();
  const auto j = nlohmann::json::parse(render_json(reports));
  ASSERT_EQ(j["runs"].size(), 3U);
  for (size_t i = 0; i < reports.size(); ++i) {
    const auto& run = j["runs"][i];
    const Report& r = reports[i];
    EXPECT_EQ(run["run"], r.title);
    EXPECT_EQ(run["requests"].get<int64_t>(), r.requests);
    EXPECT_EQ(run["first_us"].get<int64_t>(), r.first_us);
    EXPECT_EQ(run["last_us"].get<int64_t>(), r.last_us);
    ASSERT_EQ(run["algorithms"].size(), kAlgorithms);
    for (size_t k = 0; k < kAlgorithms; ++k) {
      const auto& a = run["algorithms"][k];
      const AlgorithmResult& want = r.algorithms[k];
      EXPECT_EQ(a["algorithm"], algorithm_name(want.policy.algorithm()));
      EXPECT_EQ(a["admitted"].get<int64_t>(), want.admitted);
      EXPECT_EQ(a["denied"].get<int64_t>(), want.denied);
      EXPECT_EQ(a["clients_limited"].get<int64_t>(), want.clients_limited);
      EXPECT_EQ(a["peak_admitted"].get<int64_t>(), want.peak_admitted);
      EXPECT_EQ(a["peak_window_us"].get<int64_t>(), want.peak_window.count());
      EXPECT_EQ(a["attack_admitted"].get<int64_t>(), want.marked_admitted);
      EXPECT_EQ(a.contains("departures"), k == 4);
    }
  }
  EXPECT_EQ(j["runs"][2]["token_fill"].get<double>(), 0.0);  // C starts empty
  EXPECT_EQ(j["runs"][0]["token_fill"], "full");
  const auto& dep = j["runs"][1]["algorithms"][4]["departures"];
  EXPECT_EQ(dep["count"].get<int64_t>(), 21);
  EXPECT_EQ(dep["span_us"].get<int64_t>(), 2'000'000);
  EXPECT_EQ(dep["times_us"][0].get<int64_t>(), 5'100'000);
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream s(line);
  while (std::getline(s, field, ',')) out.push_back(field);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

TEST(Render, CsvParsesBackToTheReport) {
  const auto reports = all_patterns();
  std::istringstream csv(render_csv(reports));
  std::string line;
  ASSERT_TRUE(std::getline(csv, line));
  const auto header = split(line);
  ASSERT_EQ(header.size(), 14U);
  EXPECT_EQ(header[0], "run");
  EXPECT_EQ(header[4], "admitted");
  size_t rows = 0;
  while (std::getline(csv, line)) {
    const auto f = split(line);
    ASSERT_EQ(f.size(), header.size()) << line;
    const Report& r = reports[rows / kAlgorithms];
    const AlgorithmResult& a = r.algorithms[rows % kAlgorithms];
    EXPECT_EQ(f[0], r.title);
    EXPECT_EQ(f[1], algorithm_name(a.policy.algorithm()));
    EXPECT_EQ(std::stoll(f[3]), a.requests);
    EXPECT_EQ(std::stoll(f[4]), a.admitted);
    EXPECT_EQ(std::stoll(f[5]), a.denied);
    EXPECT_EQ(std::stoll(f[6]), a.clients_limited);
    EXPECT_EQ(std::stoll(f[7]), a.peak_admitted);
    EXPECT_EQ(std::stoll(f[10]), a.marked_admitted);
    EXPECT_EQ(f[11].empty(), a.policy.algorithm() != Algorithm::kLeakyBucket);
    ++rows;
  }
  EXPECT_EQ(rows, 3 * kAlgorithms);
}

TEST(Render, TableShowsEveryAlgorithmAndBsDepartures) {
  const std::string table = render_table(all_patterns());
  for (const char* name : {"fixed_window", "sliding_window_log", "sliding_window_counter",
                           "token_bucket", "leaky_bucket"}) {
    EXPECT_NE(table.find(name), std::string::npos) << name;
  }
  EXPECT_NE(table.find("attack admitted"), std::string::npos);
  EXPECT_NE(table.find("21 from 5.1 s to 7.1 s (span 2 s): 5.1 5.2 5.3"), std::string::npos)
      << table;
  EXPECT_NE(table.find("token bucket starts with 0 tokens at 0 s"), std::string::npos);
}

nlohmann::json check_svg(const std::string& path) {
  ScratchDir dir;
  const std::string out = dir.file("svg.json");
  const std::string cmd = std::string("python3 ") + SIM_TEST_DIR "/svg_check.py " + path + " > " + out;
  EXPECT_EQ(run_command(cmd), 0) << "not well-formed XML: " << path;
  return nlohmann::json::parse(read_file(out));
}

TEST(Render, SvgIsWellFormedWithOneLanePerAlgorithm) {
  RunOptions o;
  o.patterns = {'C'};
  auto reports = simulate(o);
  ASSERT_TRUE(reports.ok());
  const Report& r = reports->front();
  ScratchDir dir;
  const std::string path = dir.file("c.svg");
  write_file(path, render_svg(r, Micros{1'000'000}));
  const auto svg = check_svg(path);
  EXPECT_EQ(svg["root"], "svg");
  ASSERT_EQ(svg["lanes"].size(), kAlgorithms);
  for (size_t i = 0; i < kAlgorithms; ++i) {
    const auto& lane = svg["lanes"][i];
    const AlgorithmResult& a = r.algorithms[i];
    EXPECT_EQ(lane["id"], std::string("lane-") + algorithm_name(a.policy.algorithm()));
    EXPECT_EQ(lane["admitted"].get<int64_t>(), a.admitted);
    EXPECT_EQ(lane["denied"].get<int64_t>(), a.denied);
    EXPECT_EQ(lane["rate"].get<int64_t>(), 1);
    EXPECT_EQ(lane["departures"].get<int64_t>(), i == 4 ? a.departures : 0);
  }
  const std::string text = svg["text"];
  EXPECT_NE(text.find("time (s)"), std::string::npos);          // axis label
  EXPECT_NE(text.find("admitted request"), std::string::npos);  // legend
  EXPECT_NE(text.find("denied request"), std::string::npos);
  EXPECT_NE(text.find("leaky bucket departure"), std::string::npos);
}

TEST(Render, LargeRunSvgUsesIntervalsAndEscapesText) {
  ReplayOptions opts(*make_policies(PolicyParams{}));
  opts.max_chart_requests = 100;
  auto replay = Replay::create(std::move(opts));
  ASSERT_TRUE(replay.ok());
  for (int i = 0; i < 5'000; ++i) {
    ASSERT_TRUE(replay->add(1'714'564'800'000'000 + i * 7'000LL, "k" + std::to_string(i % 7)).is_ok());
  }
  Report r = replay->report();
  r.title = "trace <odd> & \"named\".csv";
  r.description = "csv";
  ASSERT_FALSE(r.chart.complete);
  ScratchDir dir;
  const std::string path = dir.file("big.svg");
  write_file(path, render_svg(r, Micros{1'000'000}));
  const auto svg = check_svg(path);
  ASSERT_EQ(svg["lanes"].size(), kAlgorithms);
  for (const auto& lane : svg["lanes"]) {
    EXPECT_GT(lane["admitted"].get<int64_t>(), 0);
    EXPECT_EQ(lane["rate"].get<int64_t>(), 1);
  }
  const std::string text = svg["text"];
  EXPECT_NE(text.find("trace <odd> & \"named\".csv"), std::string::npos);
  EXPECT_NE(text.find("time since 2024-05-01T12:00:00Z (s)"), std::string::npos);
}

}  // namespace
}  // namespace ratelimit::sim
