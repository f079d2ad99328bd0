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
  ASSERT_EQ(header.size(), 15U);
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

int64_t count_of(const nlohmann::json& lane, const char* kind) {
  return lane.contains(kind) ? lane[kind]["count"].get<int64_t>() : 0;
}

// Every bar of a lane lies inside it: admitted between the lane's top and its baseline,
// denied between the baseline and the lane's bottom (the y-axis fits the data).
void expect_bars_inside(const nlohmann::json& lane) {
  const double top = lane["top"], base = lane["baseline"], bottom = lane["bottom"];
  if (lane.contains("admitted") && lane["admitted"]["bars"].get<int>() > 0) {
    EXPECT_GE(lane["admitted"]["min_y"].get<double>(), top) << lane["id"];
    EXPECT_LE(lane["admitted"]["max_y"].get<double>(), base + 0.15) << lane["id"];  // 0.1 px rounding
  }
  if (lane.contains("denied") && lane["denied"]["bars"].get<int>() > 0) {
    EXPECT_GE(lane["denied"]["min_y"].get<double>(), base - 0.15) << lane["id"];
    EXPECT_LE(lane["denied"]["max_y"].get<double>(), bottom) << lane["id"];
  }
}

// Admitted and denied bars share one scale (their heights compare), and the taller of the
// two directions fills the room (30 px): a few admissions beside thousands of denials stay
// visible through the bars' 1.5 px minimum, not through a scale of their own.
void expect_one_scale(const nlohmann::json& lane) {
  if (!lane.contains("admitted") || !lane.contains("denied")) return;
  const auto& up = lane["admitted"];
  const auto& down = lane["denied"];
  if (up["bars"].get<int>() == 0 || down["bars"].get<int>() == 0) return;
  const double hu = up["max_h"], hd = down["max_h"];
  const double cu = up["max_count"], cd = down["max_count"];
  EXPECT_NEAR(std::max(hu, hd), 30.0, 0.05) << lane["id"];
  if (hu > 1.5 && hd > 1.5) {
    EXPECT_NEAR(hu / cu, hd / cd, 0.05 * std::max(hu / cu, hd / cd)) << lane["id"];
  }
  EXPECT_EQ(lane["scale"].get<int64_t>(), static_cast<int64_t>(std::max(cu, cd))) << lane["id"];
}

TEST(Render, SvgBarsCountEveryRequestOfEveryLane) {
  RunOptions o;
  o.patterns = {'C'};
  auto reports = simulate(o);
  ASSERT_TRUE(reports.ok());
  const Report& r = reports->front();
  ScratchDir dir;
  const std::string path = dir.file("c.svg");
  write_file(path, render_svg(r, Micros{0}));
  const auto svg = check_svg(path);
  EXPECT_EQ(svg["root"], "svg");
  ASSERT_EQ(svg["lanes"].size(), kAlgorithms);
  for (size_t i = 0; i < kAlgorithms; ++i) {
    const auto& lane = svg["lanes"][i];
    const AlgorithmResult& a = r.algorithms[i];
    EXPECT_EQ(lane["id"], std::string("lane-") + algorithm_name(a.policy.algorithm()));
    EXPECT_EQ(count_of(lane, "admitted"), a.admitted) << i;
    EXPECT_EQ(count_of(lane, "denied"), a.denied) << i;
    EXPECT_EQ(lane["rate"].get<int64_t>(), 1);  // the busiest key's line
    EXPECT_EQ(count_of(lane, "departures"), i == 4 ? a.departures : 0) << i;
    expect_bars_inside(lane);
    expect_one_scale(lane);
  }
  ASSERT_FALSE(svg["aggregate"].is_null());
  EXPECT_EQ(svg["aggregate"]["offered"]["count"].get<int64_t>(), r.requests);
  EXPECT_EQ(svg["aggregate"]["lines"].get<int>(), 5);
  const std::string text = svg["text"];
  EXPECT_NE(text.find("time (s)"), std::string::npos);  // axis label
  for (const char* legend : {"admitted per bar", "denied per bar", "leaky bucket departures per bar",
                             "busiest key: admitted within the window", "per-key limit"}) {
    EXPECT_NE(text.find(legend), std::string::npos) << legend;
  }
  EXPECT_NE(text.find("limit 10"), std::string::npos);
  EXPECT_NE(text.find("bar = 20ms"), std::string::npos) << text;  // 1-2-5 widths, never 32ms
  EXPECT_NE(text.find("denied 10 (1 key limited)"), std::string::npos) << text;
}

// A trace of more than 20,000 requests from 8 clients, as in the report that asked for bar
// mode to be fixed: most requests denied, the y-axes must fit, the admitted bars must show,
// the departures row must be drawn, and the axis starts at the first request.
Report big_trace_report() {
  ReplayOptions opts(*make_policies(PolicyParams{}));
  auto replay = Replay::create(std::move(opts));
  EXPECT_TRUE(replay.ok());
  const int64_t t0 = 1'714'564'800'000'000;
  for (int i = 0; i < 24'000; ++i) {
    // 8 clients, each at ~50/s for 60 s against a 10/s limit.
    EXPECT_TRUE(replay->add(t0 + i * 2'500LL, "10.0.0." + std::to_string(i % 8)).is_ok());
  }
  Report r = replay->report();
  r.title = "trace <odd> & \"named\".log";
  // As long as a real --log-format's description: the chart must cut it, not run off.
  r.description =
      "access log 'combined $msec ($remote_addr - $remote_user [$time_local] \"$request\" $status "
      "$body_bytes_sent \"$http_referer\" \"$http_user_agent\" $msec)' (time from $msec), 24000 "
      "lines";
  return r;
}

TEST(Render, LargeRunSvgFitsItsAxesAndDrawsDepartures) {
  const Report r = big_trace_report();
  ASSERT_FALSE(r.chart.complete);
  ScratchDir dir;
  const std::string path = dir.file("big.svg");
  write_file(path, render_svg(r, Micros{0}));
  const auto svg = check_svg(path);
  ASSERT_EQ(svg["lanes"].size(), kAlgorithms);
  for (size_t i = 0; i < kAlgorithms; ++i) {
    const auto& lane = svg["lanes"][i];
    EXPECT_EQ(count_of(lane, "admitted"), r.algorithms[i].admitted) << i;
    EXPECT_EQ(count_of(lane, "denied"), r.algorithms[i].denied) << i;
    EXPECT_GT(r.algorithms[i].denied, r.algorithms[i].admitted) << i;
    // Admitted bars compare with denied ones on one scale, and still show (at least a fifth
    // of the room here: 10/s admitted per key against 40/s denied).
    EXPECT_GE(lane["admitted"]["max_h"].get<double>(), 6.0) << i;
    expect_one_scale(lane);
    expect_bars_inside(lane);
  }
  EXPECT_EQ(count_of(svg["lanes"][4], "departures"), r.algorithms[4].departures);
  EXPECT_GT(svg["lanes"][4]["departures"]["bars"].get<int>(), 50);
  const auto& offered = svg["aggregate"]["offered"];
  EXPECT_EQ(offered["count"].get<int64_t>(), r.requests);
  EXPECT_GE(offered["min_y"].get<double>(), svg["aggregate"]["top"].get<double>());
  EXPECT_LE(offered["max_y"].get<double>(), svg["aggregate"]["bottom"].get<double>() + 0.05);
  EXPECT_NEAR(offered["min_x"].get<double>(), svg["plot_left"].get<double>(), 0.05);  // the axis starts at the first request
  const std::string text = svg["text"];
  EXPECT_NE(text.find("trace <odd> & \"named\".log"), std::string::npos);
  EXPECT_NE(text.find("seconds since the first request, 2024-05-01T12:00:00Z"), std::string::npos);
  // The per-key view holds one key against the per-key limit: 8 clients' sum never appears.
  EXPECT_EQ(r.algorithms[1].peak_admitted_per_key, 10);
  EXPECT_EQ(r.algorithms[1].peak_admitted, 80);
  const auto& texts = svg["texts"];
  EXPECT_NE(std::find(texts.begin(), texts.end(), "+0"), texts.end());
}

// Headless Chromium renders the chart and the HTML report; the pixels where bars must be
// hold their colours (tests/sim/chart_pixels.py).
TEST(Render, ChromiumShowsTheBarsWhereTheyMustBe) {
  ScratchDir dir;
  const Report big = big_trace_report();
  write_file(dir.file("big.svg"), render_svg(big, Micros{0}));
  write_file(dir.file("big.html"), render_html({big}, Micros{0}));
  const std::string cmd = std::string("python3 ") + SIM_TEST_DIR "/chart_pixels.py " +
                          dir.file("big.svg") + " " + dir.file("") + " --html " +
                          dir.file("big.html") + " > " + dir.file("pixels.txt") + " 2>&1";
  const int code = run_command(cmd);
  EXPECT_EQ(code, 0) << read_file(dir.file("pixels.txt"));
  const std::string log = read_file(dir.file("pixels.txt"));
  EXPECT_EQ(log.find("FAIL"), std::string::npos) << log;
  EXPECT_NE(log.find("lane-leaky_bucket departures bar"), std::string::npos) << log;
  // Pattern C too: few requests, wide bars.
  RunOptions o;
  o.patterns = {'C'};
  auto c = simulate(o);
  ASSERT_TRUE(c.ok());
  write_file(dir.file("c.svg"), render_svg(c->front(), Micros{0}));
  EXPECT_EQ(run_command(std::string("python3 ") + SIM_TEST_DIR "/chart_pixels.py " +
                        dir.file("c.svg") + " " + dir.file("") + " > " + dir.file("c.txt") + " 2>&1"),
            0)
      << read_file(dir.file("c.txt"));
}

// With the distributed model the HTML report also charts its trade-off: one self-contained SVG
// per run, a row per algorithm and mode, each drawn number also printed (here the worst window's
// over-admission of every row, as the table has it).
TEST(Render, HtmlChartsTheDistributedTradeOff) {
  RunOptions o;
  o.patterns = {'C'};
  o.distributed.instances = 4;
  o.distributed.regions = 2;
  auto reports = simulate(o);
  ASSERT_TRUE(reports.ok());
  const std::string html = render_html(*reports, Micros{0});
  const size_t at = html.find("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"ratelimit-sim-distributed\"");
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(html.find("ratelimit-sim-distributed", at + 60), std::string::npos) << "one per run";
  const std::string svg = html.substr(at, html.find("</svg>", at) - at);
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  const DistributedReport& d = *reports->front().distributed;
  ASSERT_EQ(d.results.size(), 8u);
  for (const DistributedResult& r : d.results) {
    const std::string label = ">" + r.algorithm + " " + r.mode + "<";
    const size_t row = svg.find(label);
    ASSERT_NE(row, std::string::npos) << label;
    EXPECT_NE(svg.find(">+" + std::to_string(r.worst_window_over) + "<", row), std::string::npos) << label;
  }
}

TEST(Render, HtmlIsSelfContainedWithTablesAndCharts) {
  RunOptions o;
  auto reports = simulate(o);
  ASSERT_TRUE(reports.ok());
  const std::string html = render_html(*reports, Micros{0});
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0U);
  for (const char* forbidden : {"<script src", "http://", "https://", "<link", "@import", "url(",
                                 "fetch(", "XMLHttpRequest", "<iframe", "<img"}) {
    // The only URL allowed is the SVG namespace, which is a name, not a fetch.
    std::string rest = html;
    const std::string ns = "http://www.w3.org/2000/svg";
    for (size_t at; (at = rest.find(ns)) != std::string::npos;) rest.erase(at, ns.size());
    EXPECT_EQ(rest.find(forbidden), std::string::npos) << forbidden;
  }
  size_t svgs = 0;
  for (size_t at = 0; (at = html.find("<svg xmlns", at)) != std::string::npos; ++at) ++svgs;
  EXPECT_EQ(svgs, 3U);  // one chart per run (each holds nested <svg class="plot"> panels)
  // One inline script (hover and zoom), after the charts it drives.
  EXPECT_EQ(html.find("<script>"), html.rfind("<script>"));
  EXPECT_GT(html.find("<script>"), html.rfind("<svg xmlns"));
  EXPECT_NE(html.find("window.ratelimitSimCharts"), std::string::npos);
  EXPECT_NE(html.find("<th>algorithm</th>"), std::string::npos);
  EXPECT_NE(html.find("<td>sliding_window_log</td>"), std::string::npos);
  EXPECT_EQ(html.find("<?xml"), std::string::npos);
}

TEST(Render, TopKeysAndIsoTimesForTraces) {
  const Report r = big_trace_report();
  ASSERT_EQ(r.top_keys.size(), 8U);
  EXPECT_EQ(r.top_keys[0].offered, 3'000);
  EXPECT_EQ(r.top_keys_error, 0);
  const std::string table = render_table({r});
  EXPECT_NE(table.find("24000 requests from 2024-05-01T12:00:00Z (+0 s) to "
                       "2024-05-01T12:00:59.9975Z (+59.9975 s)"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("top 8 keys by requests offered"), std::string::npos) << table;
  EXPECT_NE(table.find("10.0.0.0"), std::string::npos);
  const auto j = nlohmann::json::parse(render_json({r}));
  EXPECT_EQ(j["runs"][0]["first"], "2024-05-01T12:00:00Z");
  EXPECT_EQ(j["runs"][0]["top_keys"].size(), 8U);
  EXPECT_EQ(j["runs"][0]["algorithms"][1]["peak_admitted_per_key"].get<int64_t>(), 10);
}

TEST(Render, TopKeysStayBoundedAndSayWhenApproximate) {
  ReplayOptions opts(*make_policies(PolicyParams{}));
  opts.max_tracked_keys = 10;
  opts.top_keys = 3;
  auto replay = Replay::create(std::move(opts));
  ASSERT_TRUE(replay.ok());
  int64_t t = 0;
  // Three heavy keys early, then a stream of one-off keys that forces pruning.
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(replay->add(t += 1000, "heavy" + std::to_string(i % 3)).is_ok());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(replay->add(t += 1000, "once" + std::to_string(i)).is_ok());
  const Report r = replay->report();
  ASSERT_EQ(r.top_keys.size(), 3U);
  for (const KeyRow& k : r.top_keys) {
    EXPECT_EQ(k.key.rfind("heavy", 0), 0U) << k.key;
    EXPECT_EQ(k.offered, 100);
  }
  EXPECT_GT(r.top_keys_error, 0);
  EXPECT_LE(r.top_keys_error, 20);  // each of the ~10 prunes dropped keys seen once
}

}  // namespace
}  // namespace ratelimit::sim
