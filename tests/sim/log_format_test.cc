// log_format_test.cc — every trace format at sub-second precision (nginx log_format, Apache
// LogFormat, JSON lines, the predefined combined/common/main), keys built from fields, the
// errors for bad formats and bad lines, and whole runs: the same traffic as a µs CSV and as
// an nginx $msec log gives the same table; a one-second log warns; --spread spaces requests.
#include "log_format.h"

#include <gtest/gtest.h>

#include <sstream>

#include "py_random.h"
#include "run.h"
#include "sim_test_util.h"
#include "timestamps.h"
#include "trace.h"

namespace ratelimit::sim {
namespace {

using testing::ScratchDir;
using testing::write_file;

constexpr int64_t kMay1 = 1'714'564'800'000'000;  // 2024-05-01T12:00:00Z in µs

struct Parsed {
  int64_t t_us = 0;
  std::string key;
  int64_t cost = 0;
};

TraceSpec log_spec(const std::string& format, const std::string& key = "",
                   bool request_start = false) {
  TraceSpec spec;
  spec.format = TraceFormat::kLog;
  spec.log_format = format;
  if (!key.empty()) spec.fields.key = *parse_key_list(key);
  spec.fields.request_start = request_start;
  return spec;
}

Result<Parsed> parse_with(TraceFormat format, const TraceSpec& spec, std::string_view line) {
  auto p = LineParser::create(format, spec);
  if (!p) return p.status();
  TraceRecord r;
  auto k = p->parse(line, false, r);
  if (!k) return k.status();
  if (*k != LineKind::kRecord) return Status::invalid_argument("skipped");
  return Parsed{r.t_us, std::string(r.key), r.cost};
}

Parsed ok(const Result<Parsed>& r) {
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : Parsed{};
}

std::string error(const Result<Parsed>& r) {
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.status().message();
}

TEST(NginxFormat, MsecIso8601AndTimeLocalAtTheirPrecision) {
  const std::string line_tail = R"( "GET /api/v1/orders?id=7 HTTP/1.1" 200)";
  Parsed r = ok(parse_with(TraceFormat::kLog, log_spec(R"($remote_addr $msec "$request" $status)"),
                           "10.0.0.1 1714564800.123" + line_tail));
  EXPECT_EQ(r.t_us, kMay1 + 123'000);
  EXPECT_EQ(r.key, "10.0.0.1");
  r = ok(parse_with(TraceFormat::kLog, log_spec(R"($remote_addr [$time_iso8601] "$request" $status)"),
                    "10.0.0.1 [2024-05-01T14:00:00.250+02:00]" + line_tail));
  EXPECT_EQ(r.t_us, kMay1 + 250'000);
  r = ok(parse_with(TraceFormat::kLog, log_spec(R"($remote_addr [$time_local] "$request" $status)"),
                    "10.0.0.1 [01/May/2024:12:00:01 +0000]" + line_tail));
  EXPECT_EQ(r.t_us, kMay1 + 1'000'000);
  // With both, the finer field is the time.
  r = ok(parse_with(TraceFormat::kLog,
                    log_spec(R"($remote_addr [$time_local] $msec "$request" $status)"),
                    "10.0.0.1 [01/May/2024:12:00:00 +0000] 1714564800.999" + line_tail));
  EXPECT_EQ(r.t_us, kMay1 + 999'000);
}

TEST(NginxFormat, KeysFromFieldsHeadersPathsAndCombinations) {
  const std::string fmt =
      R"($remote_addr - [$time_local] "$request" $status "$http_x_forwarded_for" "$http_x_api_key" ${request_time})";
  const std::string line =
      R"(10.0.0.9 - [01/May/2024:12:00:02 +0000] "POST /login?next=/ HTTP/1.1" 401 "203.0.113.7, 10.0.0.2" "k-123" 0.250)";
  EXPECT_EQ(ok(parse_with(TraceFormat::kLog, log_spec(fmt), line)).key, "203.0.113.7");  // client
  EXPECT_EQ(ok(parse_with(TraceFormat::kLog, log_spec(fmt, "remote_addr"), line)).key, "10.0.0.9");
  EXPECT_EQ(ok(parse_with(TraceFormat::kLog, log_spec(fmt, "header:X-Api-Key"), line)).key, "k-123");
  EXPECT_EQ(ok(parse_with(TraceFormat::kLog, log_spec(fmt, "client,path"), line)).key,
            "203.0.113.7 /login");
  EXPECT_EQ(ok(parse_with(TraceFormat::kLog, log_spec(fmt, "method,status"), line)).key, "POST 401");
  // --request-start: the request arrived $request_time before it was logged.
  EXPECT_EQ(ok(parse_with(TraceFormat::kLog, log_spec(fmt, "", true), line)).t_us,
            kMay1 + 2'000'000 - 250'000);
  // No X-Forwarded-For ("-"): client is the peer.
  const std::string direct =
      R"(10.0.0.9 - [01/May/2024:12:00:02 +0000] "GET / HTTP/1.1" 200 "-" "-" 0.001)";
  EXPECT_EQ(ok(parse_with(TraceFormat::kLog, log_spec(fmt), direct)).key, "10.0.0.9");
}

TEST(NginxFormat, PastedConfigDirectiveAndEscapedQuotes) {
  const std::string pasted =
      "log_format timed escape=default '$remote_addr [$time_local] '\n"
      "                '\"$request\" $status \"$http_user_agent\" $msec';";
  const std::string line =
      R"(1.2.3.4 [01/May/2024:12:00:00 +0000] "GET /q?x=\"y\" HTTP/1.1" 200 "agent \"quoted\" v1" 1714564800.5)";
  Parsed r = ok(parse_with(TraceFormat::kLog, log_spec(pasted, "path"), line));
  EXPECT_EQ(r.t_us, kMay1 + 500'000);
  EXPECT_EQ(r.key, "/q");
  EXPECT_EQ(ok(parse_with(TraceFormat::kLog, log_spec(pasted, "http_user_agent"), line)).key,
            R"(agent \"quoted\" v1)");
}

TEST(ApacheFormat, UsecMsecAndFractionDirectives) {
  const std::string tail = R"( "GET /x HTTP/1.1" 200 512)";
  Parsed r = ok(parse_with(TraceFormat::kLog, log_spec(R"(%h %{usec}t "%r" %>s %b)"),
                           "10.1.1.1 1714564800123456" + tail));
  EXPECT_EQ(r.t_us, kMay1 + 123'456);
  EXPECT_EQ(r.key, "10.1.1.1");
  r = ok(parse_with(TraceFormat::kLog, log_spec(R"(%a %{end:msec}t "%r" %s %B)"),
                    "10.1.1.1 1714564800042" + tail));
  EXPECT_EQ(r.t_us, kMay1 + 42'000);
  r = ok(parse_with(TraceFormat::kLog, log_spec(R"(%h %l %u %t.%{msec_frac}t "%r" %>s %b)"),
                    "10.1.1.1 - - [01/May/2024:12:00:03 +0000].007" + tail));
  EXPECT_EQ(r.t_us, kMay1 + 3'007'000);
  // %D: the request took 1500 µs; %t is when it arrived already, --request-start goes earlier.
  r = ok(parse_with(TraceFormat::kLog, log_spec(R"(%h %{usec}t %D "%r" %>s %b)", "", true),
                    "10.1.1.1 1714564800100000 1500" + tail));
  EXPECT_EQ(r.t_us, kMay1 + 98'500);
  // A LogFormat line pasted from httpd.conf, with a header directive.
  const std::string conf =
      R"(LogFormat "%h %l %u %t \"%r\" %>s %b \"%{X-Forwarded-For}i\" %{usec}t" proxied)";
  r = ok(parse_with(TraceFormat::kLog, log_spec(conf),
                    R"(10.0.0.1 - - [01/May/2024:12:00:00 +0000] "GET / HTTP/1.1" 200 5 "198.51.100.4" 1714564800000001)"));
  EXPECT_EQ(r.key, "198.51.100.4");
  EXPECT_EQ(r.t_us, kMay1 + 1);
}

TEST(PredefinedFormats, CombinedCommonMainAndApacheNames) {
  const std::string combined =
      R"L(127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 "http://example.com/" "Mozilla/4.08 (X11)")L";
  for (const char* name : {"combined", "main", "common", "vhost_combined"}) {
    EXPECT_TRUE(AccessLogFormat::compile(name).ok()) << name;
  }
  EXPECT_EQ(ok(parse_with(TraceFormat::kLog, log_spec("combined", "http_user_agent"), combined)).key,
            "Mozilla/4.08 (X11)");
  EXPECT_EQ(ok(parse_with(TraceFormat::kLog, log_spec("common"), combined)).t_us,
            971'211'336'000'000);
  // A predefined layout with a field appended.
  EXPECT_EQ(ok(parse_with(TraceFormat::kLog, log_spec("combined $msec"), combined + " 971211336.25")).t_us,
            971'211'336'250'000);
  // nginx's main: combined plus X-Forwarded-For, which `client` prefers.
  Parsed r = ok(parse_with(TraceFormat::kCombined, TraceSpec{}, combined + R"( "203.0.113.9")"));
  EXPECT_EQ(r.key, "203.0.113.9");
  // The common format (no referer, no agent) reads as combined.
  r = ok(parse_with(TraceFormat::kCombined, TraceSpec{},
                    R"(2001:db8::1 - - [01/Jan/2024:00:00:01 +0000] "GET / HTTP/1.1" 200 5)"));
  EXPECT_EQ(r.key, "2001:db8::1");
  EXPECT_EQ(ok(parse_with(TraceFormat::kCombined, TraceSpec{}, combined)).key, "127.0.0.1");
}

TEST(JsonLines, NumbersStringsUnitsNestedMembersAndCost) {
  TraceSpec spec;
  spec.format = TraceFormat::kJson;
  Parsed r = ok(parse_with(TraceFormat::kJson, spec,
                           R"({"time": 1714564800.000250, "remote_addr": "10.0.0.1"})"));
  EXPECT_EQ(r.t_us, kMay1 + 250);
  EXPECT_EQ(r.key, "10.0.0.1");
  r = ok(parse_with(TraceFormat::kJson, spec,
                    R"({"@timestamp": "2024-05-01T12:00:00.5Z", "http_x_forwarded_for": "9.9.9.9"})"));
  EXPECT_EQ(r.t_us, kMay1 + 500'000);
  EXPECT_EQ(r.key, "9.9.9.9");
  spec.fields.json_fields = *parse_json_fields("time=ts,remote_addr=client.ip,cost=weight");
  spec.fields.json_time_unit = TimeUnit::kMillis;
  spec.fields.key = {"client", "path"};
  spec.fields.cost_field = "cost";
  r = ok(parse_with(TraceFormat::kJson, spec,
                    R"({"ts": 1714564800007, "client": {"ip": "10.0.0.3"}, "request_uri": "/a?b", "weight": 3})"));
  EXPECT_EQ(r.t_us, kMay1 + 7'000);
  EXPECT_EQ(r.key, "10.0.0.3 /a");
  EXPECT_EQ(r.cost, 3);
  spec.fields.json_time_unit = TimeUnit::kNanos;
  spec.fields.cost_field.reset();
  spec.fields.key = {"user"};
  r = ok(parse_with(TraceFormat::kJson, spec, R"({"ts": 1714564800000001500, "user": 42})"));
  EXPECT_EQ(r.t_us, kMay1 + 2);  // 1.5 µs rounds up
  EXPECT_EQ(r.key, "42");
}

TEST(BadInput, FormatsThatCannotWork) {
  auto msg = [](const std::string& format, const std::string& key = "") {
    auto p = LineParser::create(TraceFormat::kLog, log_spec(format, key));
    EXPECT_FALSE(p.ok()) << format;
    return p.ok() ? "" : p.status().message();
  };
  EXPECT_NE(msg("%h %Z %t").find("unknown directive %Z"), std::string::npos);
  EXPECT_NE(msg("$remote_addr$msec").find("touch"), std::string::npos);
  EXPECT_NE(msg("$remote_addr $status").find("no time field"), std::string::npos);
  EXPECT_NE(msg("%h %{%d/%b/%Y}t").find("strftime"), std::string::npos);
  EXPECT_NE(msg("$remote_addr $msec", "header:X-Api-Key").find("--key http_x_api_key"),
            std::string::npos);
  EXPECT_NE(msg("just words").find("has no $variable"), std::string::npos);
  EXPECT_NE(msg("$remote_addr ${msec").find("unterminated"), std::string::npos);
  auto csv = LineParser::create(TraceFormat::kCsv, [] {
    TraceSpec s;
    s.fields_given = true;
    return s;
  }());
  ASSERT_FALSE(csv.ok());
  EXPECT_NE(csv.status().message().find("CSV"), std::string::npos);
  auto req = LineParser::create(TraceFormat::kLog, log_spec("$remote_addr $msec", "", true));
  ASSERT_FALSE(req.ok());
  EXPECT_NE(req.status().message().find("$request_time"), std::string::npos);
}

TEST(BadInput, LinesSayWhereAndWhatEscapedAndShortened) {
  const TraceSpec nginx = log_spec(R"($remote_addr [$time_local] "$request" $msec)");
  std::string m = error(parse_with(TraceFormat::kLog, nginx, "10.0.0.1 01/May/2024"));
  EXPECT_NE(m.find("no ' [' after $remote_addr (from column 1: '10.0.0.1 01/May/2024')"),
            std::string::npos)
      << m;
  m = error(parse_with(TraceFormat::kLog, log_spec("[$time_local] $remote_addr"), "10.0.0.1"));
  EXPECT_NE(m.find("expected '[' at the start at column 1"), std::string::npos) << m;
  m = error(parse_with(TraceFormat::kLog, nginx,
                       "10.0.0.1 [01/May/2024:12:00:00 +0000] \"GET /\" 17145x"));
  EXPECT_NE(m.find("invalid time '17145x'"), std::string::npos) << m;
  m = error(parse_with(TraceFormat::kLog, nginx, "\x01\xff" + std::string(300, 'z')));
  EXPECT_NE(m.find("\\x01\\xff"), std::string::npos) << m;
  EXPECT_LT(m.size(), 240U) << m;
  m = error(parse_with(TraceFormat::kLog, log_spec("%h %{usec}t %>s"), "h 12.5 200"));
  EXPECT_NE(m.find("invalid time '12.5'"), std::string::npos) << m;
  m = error(parse_with(TraceFormat::kLog, log_spec("%h %{usec}t [%>s]"), "h 1 [200] extra"));
  EXPECT_NE(m.find("unexpected text after the last field"), std::string::npos) << m;
  TraceSpec json;
  json.format = TraceFormat::kJson;
  m = error(parse_with(TraceFormat::kJson, json, R"({"time": 1, "a": )"));
  EXPECT_NE(m.find("not a JSON object"), std::string::npos) << m;
  m = error(parse_with(TraceFormat::kJson, json, R"([1, 2])"));
  EXPECT_NE(m.find("not a JSON object"), std::string::npos) << m;
  m = error(parse_with(TraceFormat::kJson, json, R"({"remote_addr": "1.2.3.4"})"));
  EXPECT_NE(m.find("no time member"), std::string::npos) << m;
  m = error(parse_with(TraceFormat::kJson, json, R"({"time": "soon"})"));
  EXPECT_NE(m.find("invalid time 'soon'"), std::string::npos) << m;
  m = error(parse_with(TraceFormat::kCombined, TraceSpec{},
                       R"(h - - [99/Oct/2000:13:55:36 -0700] "GET /" 200 1)"));
  EXPECT_NE(m.find("invalid time"), std::string::npos) << m;
}

// --- Whole runs -------------------------------------------------------------------------

// Deterministic traffic at 1 ms resolution: Poisson arrivals of 5 clients, one of them busy.
struct Request {
  int64_t t_us;
  std::string key;
};
std::vector<Request> traffic(int n) {
  PyRandom rng(7);
  std::vector<Request> out;
  int64_t t = kMay1;
  for (int i = 0; i < n; ++i) {
    t += std::max<int64_t>(1, static_cast<int64_t>(rng.expovariate(40) * 1000)) * 1000;
    const int k = rng.random() < 0.5 ? 0 : 1 + static_cast<int>(rng.random() * 4);
    out.push_back({t, "10.0.0." + std::to_string(k + 1)});
  }
  return out;
}

std::string seconds_text(int64_t us) {
  std::ostringstream s;
  s << us / 1'000'000 << "." << std::string(6 - std::to_string(us % 1'000'000).size(), '0')
    << us % 1'000'000;
  return s.str();
}

Result<std::vector<Report>> run(const std::string& path, const std::string& log_format = "",
                                std::optional<Micros> spread = std::nullopt) {
  RunOptions o;
  o.trace_path = path;
  o.trace.log_format = log_format;
  o.spread = spread;
  return simulate(o);
}

// The table without its first line (the title names the file and the format).
std::string table_body(const std::vector<Report>& r) {
  const std::string t = render_table(r);
  return t.substr(t.find('\n') + 1);
}

TEST(TraceRun, MicrosecondCsvAndNginxMsecLogGiveTheSameTable) {
  ScratchDir dir;
  std::string csv = "timestamp,key\n";
  std::string log;
  for (const Request& r : traffic(3000)) {
    csv += seconds_text(r.t_us) + "," + r.key + "\n";
    const int64_t ms = (r.t_us - kMay1) / 1000;
    char msec[32];
    std::snprintf(msec, sizeof msec, "%lld.%03lld", static_cast<long long>(kMay1 / 1'000'000 + ms / 1000),
                  static_cast<long long>(ms % 1000));
    log += r.key + " - - [01/May/2024:12:00:00 +0000] \"GET /api HTTP/1.1\" 200 12 " + msec + "\n";
  }
  write_file(dir.file("t.csv"), csv);
  write_file(dir.file("t.log"), log);
  auto a = run(dir.file("t.csv"));
  auto b = run(dir.file("t.log"),
               R"($remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent $msec)");
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(table_body(*a), table_body(*b));
  EXPECT_EQ(a->front().resolution_us, 1'000);
  EXPECT_GT(a->front().algorithms[0].denied, 0);  // the traffic does trip the limits
  EXPECT_TRUE(a->front().notices.empty());
}

TEST(TraceRun, OneSecondLogWarnsAndSpreadApproximates) {
  ScratchDir dir;
  std::string log;
  for (int i = 0; i < 20; ++i) {
    log += "10.0.0.1 - - [01/May/2024:12:00:00 +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"-\"\n";
  }
  log += "10.0.0.1 - - [01/May/2024:12:00:01 +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"-\"\n";
  write_file(dir.file("s.log"), log);
  auto r = run(dir.file("s.log"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->front().resolution_us, 1'000'000);
  ASSERT_EQ(r->front().notices.size(), 1U);
  const std::string table = render_table(*r);
  EXPECT_NE(table.find("time resolution 1s"), std::string::npos) << table;
  EXPECT_NE(table.find("warning: timestamps have 1s resolution, coarser than a tenth of the "
                       "shortest window (1s): the requests of each 1s interval share one instant"),
            std::string::npos)
      << table;
  // --spread: the 20 requests of the first second are 50 ms apart, so a 2-per-100ms sliding
  // log admits all of them (and the next second's one); without it only 2 of the 20.
  RunOptions o;
  o.trace_path = dir.file("s.log");
  o.policy.window_limit = 2;
  o.policy.window = Micros{100'000};
  auto lumped = simulate(o);
  o.spread = Micros{1'000'000};
  auto spread = simulate(o);
  ASSERT_TRUE(lumped.ok() && spread.ok());
  EXPECT_EQ(lumped->front().algorithms[1].admitted, 3);
  EXPECT_EQ(spread->front().algorithms[1].admitted, 21);
  EXPECT_EQ(spread->front().spread_us, 1'000'000);
  EXPECT_NE(render_table(*spread).find("--spread 1s"), std::string::npos);
}

TEST(TraceRun, BadLinesPerFormatAreCountedOrFatal) {
  ScratchDir dir;
  const std::string good =
      "10.0.0.1 - - [01/May/2024:12:00:00 +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"-\"\n";
  // One bad line in 200: skipped, counted, run goes on.
  std::string few;
  for (int i = 0; i < 200; ++i) few += i == 100 ? "garbage\n" : good;
  write_file(dir.file("few.log"), few);
  auto r = run(dir.file("few.log"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->front().skipped_lines, 1);
  ASSERT_EQ(r->front().warnings.size(), 1U);
  EXPECT_NE(r->front().warnings[0].find("few.log:101: does not match the log format"),
            std::string::npos)
      << r->front().warnings[0];
  // --strict stops there.
  RunOptions strict;
  strict.trace_path = dir.file("few.log");
  strict.bad_lines = BadLines::kFail;
  auto s = simulate(strict);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("few.log:101:"), std::string::npos);
  // A bad first line: the format is wrong, stop at once.
  write_file(dir.file("first.log"), "garbage\n" + good);
  auto f = run(dir.file("first.log"), "combined");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("first.log:1:"), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("format is probably wrong"), std::string::npos);
  // More than 1% bad: fail with the count and the first.
  std::string many;
  for (int i = 0; i < 50; ++i) many += i % 10 == 9 ? "{\"time\": \"x\"}\n" : "{\"time\": 1.5}\n";
  write_file(dir.file("many.jsonl"), many);
  auto m = run(dir.file("many.jsonl"));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("5 of 50 lines do not parse"), std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find("many.jsonl:10: invalid time 'x'"), std::string::npos);
  // Apache and nginx custom formats report their own mismatches with line numbers.
  write_file(dir.file("apache.log"), "1.2.3.4 1714564800000000 200\n1.2.3.4 17145648000000x 200\n");
  auto a = run(dir.file("apache.log"), "%h %{usec}t %>s");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("apache.log:2: invalid time '17145648000000x'"),
            std::string::npos)
      << a.status().message();
}

}  // namespace
}  // namespace ratelimit::sim
