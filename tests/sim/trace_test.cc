// trace_test.cc — trace parsing (CSV and access logs) and trace runs end to end: formats,
// auto-detection, edge cases, line-numbered errors, --skip-bad, unsorted input, streaming
// across buffer boundaries, and that a trace of pattern C gives pattern C's table.
#include "trace.h"

#include <gtest/gtest.h>

#include <sstream>

#include "run.h"
#include "sim_test_util.h"

namespace ratelimit::sim {
namespace {

using testing::ScratchDir;
using testing::write_file;

// A parsed record with its key copied out (TraceRecord::key points into the parser).
struct Parsed {
  int64_t t_us = 0;
  std::string key;
  int64_t cost = 0;
};

Parsed parse_ok(TraceFormat f, std::string_view line, bool first = false) {
  LineParser p(f);
  TraceRecord r;
  auto k = p.parse(line, first, r);
  EXPECT_TRUE(k.ok()) << line << ": " << k.status().message();
  EXPECT_TRUE(k.ok() && *k == LineKind::kRecord) << line;
  return {r.t_us, std::string(r.key), r.cost};
}

std::string parse_error(TraceFormat f, std::string_view line) {
  LineParser p(f);
  TraceRecord r;
  auto k = p.parse(line, false, r);
  EXPECT_FALSE(k.ok()) << line;
  return k.ok() ? "" : k.status().message();
}

TEST(CsvLine, FieldsDefaultsAndQuoting) {
  Parsed r = parse_ok(TraceFormat::kCsv, "12.5");
  EXPECT_EQ(r.t_us, 12'500'000);
  EXPECT_EQ(r.key, "-");
  EXPECT_EQ(r.cost, 1);
  r = parse_ok(TraceFormat::kCsv, " 3 , user:42 , 5 ");
  EXPECT_EQ(r.t_us, 3'000'000);
  EXPECT_EQ(r.key, "user:42");
  EXPECT_EQ(r.cost, 5);
  r = parse_ok(TraceFormat::kCsv, R"(2024-05-01T12:00:00Z,"a,""b""",2)");
  EXPECT_EQ(r.t_us, 1'714'564'800'000'000);
  EXPECT_EQ(r.key, "a,\"b\"");
  EXPECT_EQ(r.cost, 2);
  r = parse_ok(TraceFormat::kCsv, R"("1.5",10.0.0.1)");
  EXPECT_EQ(r.t_us, 1'500'000);
  EXPECT_EQ(r.key, "10.0.0.1");
}

TEST(CsvLine, SkipsBlankCommentsAndAFirstLineHeader) {
  LineParser p(TraceFormat::kCsv);
  TraceRecord r;
  EXPECT_EQ(*p.parse("", false, r), LineKind::kSkip);
  EXPECT_EQ(*p.parse("   ", false, r), LineKind::kSkip);
  EXPECT_EQ(*p.parse("# comment", false, r), LineKind::kSkip);
  EXPECT_EQ(*p.parse("timestamp,key,cost", true, r), LineKind::kSkip);
  // Only the first content line may be a header.
  EXPECT_FALSE(p.parse("timestamp,key,cost", false, r).ok());
}

TEST(CsvLine, ErrorsSayWhatIsWrong) {
  EXPECT_NE(parse_error(TraceFormat::kCsv, "abc,k").find("invalid time 'abc'"), std::string::npos);
  EXPECT_NE(parse_error(TraceFormat::kCsv, "1,k,0").find("cost"), std::string::npos);
  EXPECT_NE(parse_error(TraceFormat::kCsv, "1,k,2.5").find("whole number"), std::string::npos);
  EXPECT_NE(parse_error(TraceFormat::kCsv, "1,k,99999999999").find("cost"), std::string::npos);
  EXPECT_NE(parse_error(TraceFormat::kCsv, "1,k,1,extra").find("too many fields"),
            std::string::npos);
  EXPECT_NE(parse_error(TraceFormat::kCsv, "1,").find("empty key"), std::string::npos);
  EXPECT_NE(parse_error(TraceFormat::kCsv, R"(1,"open)").find("unterminated"), std::string::npos);
  EXPECT_NE(parse_error(TraceFormat::kCsv, ",k").find("empty timestamp"), std::string::npos);
  EXPECT_NE(parse_error(TraceFormat::kCsv, "-5,k").find("time"), std::string::npos);
}

TEST(CombinedLine, ClientAndBracketedTime) {
  const char* line =
      R"(127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 "http://example.com/" "Mozilla/4.08")";
  Parsed r = parse_ok(TraceFormat::kCombined, line);
  EXPECT_EQ(r.key, "127.0.0.1");
  EXPECT_EQ(r.t_us, 971'211'336'000'000);
  EXPECT_EQ(r.cost, 1);
  // Common log format (no referer/agent) and IPv6 clients parse the same way.
  r = parse_ok(TraceFormat::kCombined, R"(2001:db8::1 - - [01/Jan/2024:00:00:01 +0000] "GET / HTTP/1.1" 200 5)");
  EXPECT_EQ(r.key, "2001:db8::1");
  EXPECT_EQ(r.t_us, 1'704'067'201'000'000);
  EXPECT_NE(parse_error(TraceFormat::kCombined, "1.5,key").find("does not match the log format"),
            std::string::npos);
  EXPECT_NE(parse_error(TraceFormat::kCombined, R"(h - - [10/Oct/2000:13:55:36] "GET /" 200 5)")
                .find("invalid time"),
            std::string::npos);
}

TEST(Detect, AccessLogOrCsv) {
  EXPECT_EQ(detect_trace_format(R"(1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 1 "-" "-")"),
            TraceFormat::kCombined);
  EXPECT_EQ(detect_trace_format("1.5,1.2.3.4"), TraceFormat::kCsv);
  EXPECT_EQ(detect_trace_format("timestamp,key"), TraceFormat::kCsv);
  EXPECT_EQ(*parse_trace_format("combined"), TraceFormat::kCombined);
  EXPECT_EQ(*parse_trace_format("json"), TraceFormat::kJson);
  EXPECT_EQ(detect_trace_format(R"({"time": 1.5})"), TraceFormat::kJson);
  EXPECT_FALSE(parse_trace_format("xml").ok());
}

TEST(LineReaderTest, LinesAcrossChunkBoundariesCrlfAndNoFinalNewline) {
  ScratchDir dir;
  const std::string path = dir.file("lines.txt");
  std::string text;
  // ~3 MiB of lines of varying length so some straddle the 1 MiB read boundaries.
  for (int i = 0; i < 150'000; ++i) {
    text += std::to_string(i) + std::string(static_cast<size_t>(i % 13), 'x') +
            (i % 2 == 0 ? "\r\n" : "\n");
  }
  text += "last";
  write_file(path, text);
  auto reader = LineReader::open(path);
  ASSERT_TRUE(reader.ok());
  std::string_view line;
  int64_t n = 0;
  for (;;) {
    auto more = reader->next(line);
    ASSERT_TRUE(more.ok());
    if (!*more) break;
    if (n < 150'000) {
      ASSERT_EQ(line, std::to_string(n) + std::string(static_cast<size_t>(n % 13), 'x')) << n;
    } else {
      ASSERT_EQ(line, "last");
    }
    ++n;
    ASSERT_EQ(reader->line_number(), n);
  }
  EXPECT_EQ(n, 150'001);
  EXPECT_EQ(reader->bytes_read(), text.size());
  EXPECT_EQ(reader->size_bytes(), text.size());
}

TEST(LineReaderTest, ErrorsForMissingFilesDirectoriesAndHugeLines) {
  ScratchDir dir;
  auto missing = LineReader::open(dir.file("nope.csv"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("No such file"), std::string::npos);
  auto directory = LineReader::open(dir.file(""));
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.status().message().find("directory"), std::string::npos);
  const std::string big = dir.file("big.csv");
  write_file(big, "1,a\n" + std::string(kMaxLineBytes + 10, '7') + "\n");
  auto reader = LineReader::open(big);
  ASSERT_TRUE(reader.ok());
  std::string_view line;
  ASSERT_TRUE(*reader->next(line));
  auto r = reader->next(line);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 2 is longer than 1 MiB"), std::string::npos);
}

// End-to-end trace runs through simulate().
Result<std::vector<Report>> run_trace(const std::string& path, bool skip_bad = false,
                                      Unsorted unsorted = Unsorted::kReject,
                                      TokenFill fill = {}) {
  RunOptions o;
  o.trace_path = path;
  o.bad_lines = skip_bad ? BadLines::kSkipAll : BadLines::kSkipFew;
  o.unsorted = unsorted;
  o.token_fill = fill;
  return simulate(o);
}

std::string pattern_c_csv(bool shuffled) {
  auto c = make_pattern('C', PatternParams{});
  std::vector<std::string> lines;
  for (const auto& r : c->requests) {
    std::ostringstream s;
    s << r.t_us / 1'000'000 << "." << std::string(6 - std::to_string(r.t_us % 1'000'000).size(), '0')
      << r.t_us % 1'000'000 << ",client";
    lines.push_back(s.str());
  }
  if (shuffled) std::swap(lines[10], lines[35]);
  std::string out = "timestamp,key\n# pattern C\n";
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST(TraceRun, PatternCAsACsvGivesPatternCsTable) {
  ScratchDir dir;
  write_file(dir.file("c.csv"), pattern_c_csv(false));
  auto trace = run_trace(dir.file("c.csv"), false, Unsorted::kReject,
                         TokenFill{TokenFill::Mode::kTokens, 0});
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  RunOptions o;
  o.patterns = {'C'};
  auto pattern = simulate(o);
  ASSERT_TRUE(pattern.ok());
  const Report& t = trace->front();
  const Report& p = pattern->front();
  EXPECT_EQ(t.requests, 50);
  for (size_t i = 0; i < kAlgorithms; ++i) {
    EXPECT_EQ(t.algorithms[i].admitted, p.algorithms[i].admitted) << i;
    EXPECT_EQ(t.algorithms[i].peak_admitted, p.algorithms[i].peak_admitted) << i;
    EXPECT_EQ(t.algorithms[i].clients_limited, p.algorithms[i].clients_limited) << i;
  }
}

TEST(TraceRun, BackwardsTimeIsRejectedWithItsLineOrSorted) {
  ScratchDir dir;
  const std::string path = dir.file("shuffled.csv");
  write_file(path, pattern_c_csv(true));
  auto rejected = run_trace(path);
  ASSERT_FALSE(rejected.ok());
  // Line 1 is the header, line 2 a comment: request 11 (index 10, now 3.95) is fine,
  // request 12 (1.1 s) at line 14 goes back.
  EXPECT_NE(rejected.status().message().find("shuffled.csv:14: time 1.1 s is before the "
                                             "previous request's 3.95 s"),
            std::string::npos)
      << rejected.status().message();
  EXPECT_NE(rejected.status().message().find("--unsorted=sort"), std::string::npos);

  auto sorted = run_trace(path, false, Unsorted::kSort, TokenFill{TokenFill::Mode::kTokens, 0});
  ASSERT_TRUE(sorted.ok()) << sorted.status().message();
  write_file(dir.file("in_order.csv"), pattern_c_csv(false));
  auto in_order = run_trace(dir.file("in_order.csv"), false, Unsorted::kReject,
                            TokenFill{TokenFill::Mode::kTokens, 0});
  ASSERT_TRUE(in_order.ok());
  for (size_t i = 0; i < kAlgorithms; ++i) {
    EXPECT_EQ(sorted->front().algorithms[i].admitted, in_order->front().algorithms[i].admitted);
    EXPECT_EQ(sorted->front().algorithms[i].marked_requests, 0);
  }
}

TEST(TraceRun, MalformedLinesStopWithTheLineNumberOrAreSkippedAndCounted) {
  ScratchDir dir;
  const std::string path = dir.file("bad.csv");
  write_file(path, "1,a\n2,a\nnot-a-time,a\n3,a\n4,a,zero\n");
  auto stopped = run_trace(path);
  ASSERT_FALSE(stopped.ok());
  EXPECT_NE(stopped.status().message().find("bad.csv:3: invalid time 'not-a-time'"),
            std::string::npos)
      << stopped.status().message();
  EXPECT_NE(stopped.status().message().find("--skip-bad"), std::string::npos);
  auto skipped = run_trace(path, true);
  ASSERT_TRUE(skipped.ok()) << skipped.status().message();
  EXPECT_EQ(skipped->front().requests, 3);
  EXPECT_EQ(skipped->front().skipped_lines, 2);
  ASSERT_EQ(skipped->front().warnings.size(), 2U);
  EXPECT_NE(skipped->front().warnings[1].find("bad.csv:5:"), std::string::npos);
}

TEST(TraceRun, AutoDetectedAccessLogKeysByClient) {
  ScratchDir dir;
  const std::string path = dir.file("access.log");
  std::string log;
  // 12 requests from one client within a second, 3 from another.
  for (int i = 0; i < 12; ++i) {
    log += "10.0.0.1 - - [01/May/2024:12:00:00 +0000] \"GET /api HTTP/1.1\" 200 12 \"-\" \"curl\"\n";
  }
  for (int i = 0; i < 3; ++i) {
    log += "10.0.0.2 - - [01/May/2024:12:00:00 +0000] \"GET /api HTTP/1.1\" 200 12 \"-\" \"curl\"\n";
  }
  write_file(path, log);
  auto r = run_trace(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Report& rep = r->front();
  EXPECT_EQ(rep.requests, 15);
  EXPECT_EQ(rep.first_us, 1'714'564'800'000'000);
  EXPECT_NE(rep.description.find("combined"), std::string::npos);
  const AlgorithmResult& fw = rep.algorithms[0];
  EXPECT_EQ(fw.admitted, 13);  // 10 + 3
  EXPECT_EQ(fw.clients_limited, 1);
}

TEST(TraceRun, EmptyUnreadableAndWrongFormatTraces) {
  ScratchDir dir;
  write_file(dir.file("empty.csv"), "timestamp,key\n# nothing\n");
  auto empty = run_trace(dir.file("empty.csv"));
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("holds no requests"), std::string::npos);
  auto missing = run_trace(dir.file("missing.csv"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot open trace"), std::string::npos);
  // An access-log line after CSV lines: the format was detected from the first line.
  write_file(dir.file("mixed.csv"), "1,a\n1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] \"GET /\"\n");
  auto mixed = run_trace(dir.file("mixed.csv"));
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("mixed.csv:2:"), std::string::npos);
  EXPECT_NE(mixed.status().message().find("--trace-format"), std::string::npos);
}

}  // namespace
}  // namespace ratelimit::sim
