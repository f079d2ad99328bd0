// run.cc — orchestration of a ratelimit-sim run (see run.h): patterns or a streamed trace
// into the replay engine, then the outputs.
#include "run.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>
#include <unordered_map>

#include "distributed.h"
#include "throttle.h"
#include "timestamps.h"

namespace ratelimit::sim {
namespace {

constexpr int64_t kProgressEveryLines = 1 << 16;
constexpr int kMaxReportedBadLines = 5;  // with --skip-bad, the first few are shown as warnings

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

std::optional<double> fill_for(const TokenFill& fill, bool pattern_starts_empty) {
  switch (fill.mode) {
    case TokenFill::Mode::kPatternDefault:
      return pattern_starts_empty ? std::optional<double>(0.0) : std::nullopt;
    case TokenFill::Mode::kFull: return std::nullopt;
    case TokenFill::Mode::kTokens: return fill.tokens;
  }
  return std::nullopt;
}

ReplayOptions replay_options(const RunOptions& o, const std::array<Policy, kAlgorithms>& policies,
                             std::optional<double> fill, std::optional<int64_t> start) {
  ReplayOptions r(policies);
  r.token_fill = fill;
  r.start_us = start;
  r.peak_window = o.peak_window;
  r.top_keys = o.top_keys;
  return r;
}

ThrottleOptions throttle_options(const RunOptions& o, std::optional<double> fill,
                                 std::optional<int64_t> start) {
  ThrottleOptions t = o.throttle;
  t.token_fill = fill;
  t.start_us = start;
  return t;
}

Status at_line(const LineReader& reader, const Status& s) {
  return Status::invalid_argument(reader.path() + ":" + std::to_string(reader.line_number()) +
                                  ": " + s.message());
}

Status backwards(const LineReader& reader, int64_t t, int64_t prev) {
  return Status::invalid_argument(
      reader.path() + ":" + std::to_string(reader.line_number()) + ": time " +
      format_seconds(t) + " s is before the previous request's " + format_seconds(prev) +
      " s; the trace must be sorted by time (pass --unsorted=sort to sort it in memory)");
}

struct SortedRequest {
  int64_t t_us;
  uint32_t key;
  uint32_t cost;  // <= kMaxCost < 2^32
};

// --spread: holds the requests of one timestamp until the next distinct one arrives, then
// hands them on spaced evenly over [t, t + min(spread, next - t)): same order, never past
// the next stamp.
class Spreader {
 public:
  using Sink = std::function<Status(int64_t, std::string_view, int64_t, int64_t)>;
  Spreader(int64_t spread_us, Sink sink) : spread_us_(spread_us), sink_(std::move(sink)) {}
  Status push(int64_t t_us, std::string_view key, int64_t cost, int64_t duration_us) {
    if (n_ > 0 && t_us != stamp_) {
      if (auto s = flush(t_us - stamp_); !s.is_ok()) return s;
    }
    stamp_ = t_us;
    if (n_ == group_.size()) group_.emplace_back();
    group_[n_].key.assign(key);
    group_[n_].cost = cost;
    group_[n_].duration_us = duration_us;
    ++n_;
    return {};
  }
  Status finish() { return flush(spread_us_); }

 private:
  struct Pending {
    std::string key;
    int64_t cost = 1;
    int64_t duration_us = -1;
  };
  Status flush(int64_t gap_us) {
    const int64_t span = std::min(spread_us_, gap_us);
    const auto n = static_cast<int64_t>(n_);
    for (int64_t i = 0; i < n; ++i) {
      const Pending& p = group_[static_cast<size_t>(i)];
      // floor(i * span / n) without overflowing i * span: (span % n) * i < n * n.
      const int64_t offset = span / n * i + span % n * i / n;
      if (auto s = sink_(stamp_ + offset, p.key, p.cost, p.duration_us); !s.is_ok()) return s;
    }
    n_ = 0;
    return {};
  }
  int64_t spread_us_;
  Sink sink_;
  int64_t stamp_ = 0;
  std::vector<Pending> group_;
  size_t n_ = 0;
};

Micros shortest_window(const std::array<Policy, kAlgorithms>& policies) {
  Micros w = policies[0].window();
  for (const Policy& p : policies) w = std::min(w, p.window());
  return w;
}

Result<Report> run_trace(const RunOptions& o, const std::array<Policy, kAlgorithms>& policies,
                         const ProgressFn& progress) {
  const std::string& path = *o.trace_path;
  auto reader_or = LineReader::open(path);
  if (!reader_or) return reader_or.status();
  LineReader reader = std::move(*reader_or);
  auto replay_or = Replay::create(replay_options(o, policies, fill_for(o.token_fill, false),
                                                 std::nullopt));
  if (!replay_or) return replay_or.status();
  Replay replay = std::move(*replay_or);

  TraceSpec spec = o.trace;
  spec.fields.durations = o.throttle.enabled();  // requests hold for their logged duration
  TraceFormat format = spec.format;
  if (!spec.log_format.empty()) format = TraceFormat::kLog;
  std::optional<LineParser> parser;
  if (format != TraceFormat::kAuto) {
    auto p = LineParser::create(format, spec);
    if (!p) return p.status();
    parser.emplace(std::move(*p));
  }
  bool first_content = true;
  int64_t content_lines = 0;
  int64_t records = 0;
  int64_t skipped = 0;
  std::optional<Status> first_bad;
  bool have_prev = false;
  int64_t prev = 0;
  TimeResolution resolution;
  std::vector<std::string> warnings;
  // Sort mode only: every request, with keys interned.
  std::vector<SortedRequest> buffered;
  std::vector<int64_t> buffered_durations;  // --concurrency / --max-wait only
  std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> key_ids;
  std::vector<const std::string*> key_names;

  // Requests go to the replay directly, or through the spreader.
  std::optional<Throttle> throttle;
  if (o.throttle.enabled()) {
    auto t = Throttle::create(policies, throttle_options(o, fill_for(o.token_fill, false), std::nullopt));
    if (!t) return t.status();
    throttle.emplace(std::move(*t));
  }
  std::optional<Distributed> distributed;
  if (o.distributed.enabled()) {
    auto d = Distributed::create(policies[0], policies[2], o.distributed);
    if (!d) return d.status();
    distributed.emplace(std::move(*d));
  }
  Spreader::Sink to_replay = [&](int64_t t, std::string_view key, int64_t cost, int64_t duration) {
    if (auto s = replay.add(t, key, cost); !s.is_ok()) return s;
    if (throttle) throttle->add(t, key, cost, duration);
    if (distributed) distributed->add(t, key, cost);
    return Status{};
  };
  std::optional<Spreader> spreader;
  if (o.spread) spreader.emplace(o.spread->count(), to_replay);
  auto deliver = [&](int64_t t, std::string_view key, int64_t cost, int64_t duration) {
    return spreader ? spreader->push(t, key, cost, duration) : to_replay(t, key, cost, duration);
  };

  std::string_view line;
  for (;;) {
    auto more = reader.next(line);
    if (!more) return more.status();
    if (!*more) break;
    if (progress && reader.line_number() % kProgressEveryLines == 0) {
      progress(reader.line_number(), reader.bytes_read(), reader.size_bytes());
    }
    if (is_blank_or_comment(line)) continue;
    if (!parser) {
      format = detect_trace_format(line);
      auto p = LineParser::create(format, spec);
      if (!p) return p.status();
      parser.emplace(std::move(*p));
    }
    ++content_lines;
    TraceRecord rec;
    auto kind = parser->parse(line, first_content, rec);
    const bool was_first = first_content;
    first_content = false;
    if (!kind) {
      Status err = at_line(reader, kind.status());
      if (o.trace.format == TraceFormat::kAuto && o.trace.log_format.empty()) {
        err = Status::invalid_argument(err.message() + " (read as " + trace_format_name(format) +
                                       ", detected from the first line; see --trace-format and "
                                       "--log-format)");
      }
      if (o.bad_lines == BadLines::kFail) {
        return Status::invalid_argument(err.message() + " (--strict stops at the first bad line)");
      }
      if (o.bad_lines == BadLines::kSkipFew && was_first) {
        return Status::invalid_argument(err.message() + " (the first line does not parse: the "
                                        "format is probably wrong)");
      }
      if (skipped < kMaxReportedBadLines) warnings.push_back("skipped " + err.message());
      if (!first_bad) first_bad = err;
      ++skipped;
      continue;
    }
    if (*kind == LineKind::kSkip) {
      --content_lines;  // a CSV header
      continue;
    }
    ++records;
    resolution.add(rec.t_us);
    if (o.unsorted == Unsorted::kSort) {
      auto it = key_ids.find(rec.key);
      if (it == key_ids.end()) {
        if (key_ids.size() >= UINT32_MAX) {
          return Status::invalid_argument("more than 2^32 distinct keys: cannot sort in memory");
        }
        it = key_ids.emplace(std::string(rec.key), static_cast<uint32_t>(key_ids.size())).first;
        key_names.push_back(&it->first);
      }
      buffered.push_back({rec.t_us, it->second, static_cast<uint32_t>(rec.cost)});
      if (throttle) buffered_durations.push_back(rec.duration_us);
      continue;
    }
    if (have_prev && rec.t_us < prev) return backwards(reader, rec.t_us, prev);
    have_prev = true;
    prev = rec.t_us;
    if (auto s = deliver(rec.t_us, rec.key, rec.cost, rec.duration_us); !s.is_ok()) {
      return at_line(reader, s);
    }
  }
  if (o.unsorted == Unsorted::kSort) {
    if (throttle) {  // carry each duration along: sort positions, then read both
      std::vector<uint32_t> order(buffered.size());
      for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(),
                       [&](uint32_t a, uint32_t b) { return buffered[a].t_us < buffered[b].t_us; });
      std::vector<SortedRequest> sorted(buffered.size());
      std::vector<int64_t> durations(buffered.size());
      for (size_t i = 0; i < order.size(); ++i) {
        sorted[i] = buffered[order[i]];
        durations[i] = buffered_durations[order[i]];
      }
      buffered = std::move(sorted);
      buffered_durations = std::move(durations);
    } else {
      std::stable_sort(buffered.begin(), buffered.end(),
                       [](const SortedRequest& a, const SortedRequest& b) { return a.t_us < b.t_us; });
    }
    int64_t n = 0;
    for (size_t i = 0; i < buffered.size(); ++i) {
      const SortedRequest& r = buffered[i];
      const int64_t duration = throttle ? buffered_durations[i] : -1;
      if (auto s = deliver(r.t_us, *key_names[r.key], r.cost, duration); !s.is_ok()) return s;
      if (progress && ++n % kProgressEveryLines == 0) {
        progress(reader.line_number(), reader.bytes_read(), reader.size_bytes());
      }
    }
  }
  if (spreader) {
    if (auto s = spreader->finish(); !s.is_ok()) return s;
  }
  if (o.bad_lines == BadLines::kSkipFew && first_bad &&
      static_cast<double>(skipped) > kMaxBadFraction * static_cast<double>(content_lines)) {
    return Status::invalid_argument(
        std::to_string(skipped) + " of " + std::to_string(content_lines) +
        " lines do not parse (more than 1%: the format may not match the file); the first: " +
        first_bad->message() + " (pass --skip-bad to skip any number of bad lines)");
  }
  Report report = replay.report();
  if (throttle) report.throttle = throttle->finish();
  if (distributed) report.distributed = distributed->finish();
  if (report.requests == 0) {
    return Status::invalid_argument("trace '" + path + "' holds no requests" +
                                    (skipped > 0 ? " (every line was malformed)" : ""));
  }
  report.title = "trace " + path;
  report.description = parser->describe() + ", " + std::to_string(reader.line_number()) + " lines";
  report.skipped_lines = skipped;
  report.warnings = std::move(warnings);
  report.resolution_us = resolution.resolution_us();
  report.spread_us = o.spread ? o.spread->count() : 0;
  report.missing_key_parts = parser->missing_key_parts();
  const Micros shortest = shortest_window(policies);
  if (report.resolution_us * 10 > shortest.count()) {
    report.notices.push_back(
        "timestamps have " + format_duration(Micros{report.resolution_us}) +
        " resolution, coarser than a tenth of the shortest window (" + format_duration(shortest) +
        "): the requests of each " + format_duration(Micros{report.resolution_us}) +
        " interval share one instant, so the window algorithms see bursts that may not have "
        "happened" +
        (o.spread ? std::string(" (--spread is on: same-stamp requests are spaced evenly, an "
                                "approximation)")
                  : std::string("; log finer times ($msec, %{usec}t) or pass --spread for an "
                                "approximation")));
  }
  if (report.missing_key_parts > 0) {
    report.notices.push_back(std::to_string(report.missing_key_parts) +
                             " requests had no value for part of --key and were keyed '-' there");
  }
  return Report(std::move(report));
}

// Prints "\rratelimit-sim: 1234567 lines, 45%, 2.1 M lines/s, 3 s left" on a terminal once a
// run has taken over a second (main sets show_progress only when stderr is a terminal; a
// pipe or a file gets nothing). The rate is over the whole run so far; the time left is
// from the bytes still to read, so it exists only when the size is known (not for a pipe).
class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::ostream& err) : err_(err), start_(Clock::now()) {}
  void operator()(int64_t lines, uint64_t bytes, uint64_t total) {
    const auto now = Clock::now();
    if (now - start_ < std::chrono::seconds(1) || now - last_ < std::chrono::milliseconds(200)) {
      return;
    }
    last_ = now;
    printed_ = true;
    err_ << "\r\033[K" << progress_line(lines, bytes, total,
                                       std::chrono::duration<double>(now - start_).count())
         << std::flush;
  }
  // Erases the progress line (stderr is a terminal whenever anything was printed).
  void finish() {
    if (printed_) err_ << "\r\033[K" << std::flush;
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::ostream& err_;
  Clock::time_point start_;
  Clock::time_point last_{};
  bool printed_ = false;
};

Status validate(const RunOptions& o) {
  if (o.bar_width.count() < 0) return Status::invalid_argument("--bar-width must be positive or auto");
  if (!o.trace_path && o.patterns.empty()) {
    return Status::invalid_argument("nothing to run: give --pattern or --trace");
  }
  if (o.svg_path && !o.trace_path && o.patterns.size() != 1) {
    return Status::invalid_argument(
        "--svg draws one run: choose a single pattern with --pattern A, B or C, or --trace");
  }
  if (o.token_fill.mode == TokenFill::Mode::kTokens) {
    if (!std::isfinite(o.token_fill.tokens) || o.token_fill.tokens < 0) {
      return Status::invalid_argument("--token-fill must be full, empty or a number of tokens >= 0");
    }
  }
  return {};
}

}  // namespace

std::string progress_line(int64_t lines, uint64_t bytes, uint64_t total, double elapsed_s) {
  std::ostringstream o;
  o << "ratelimit-sim: " << lines << " lines";
  if (total > 0) o << ", " << std::min<uint64_t>(100, bytes * 100 / total) << "%";
  if (elapsed_s > 0) {
    const double rate = static_cast<double>(lines) / elapsed_s;
    o.setf(std::ios::fixed);
    o.precision(1);
    if (rate >= 1e6) o << ", " << rate / 1e6 << " M lines/s";
    else if (rate >= 1e3) o << ", " << rate / 1e3 << " k lines/s";
    else o << ", " << std::llround(rate) << " lines/s";
    if (total > 0 && bytes > 0 && bytes < total) {
      const double left = elapsed_s * static_cast<double>(total - bytes) / static_cast<double>(bytes);
      o.precision(0);
      o << ", " << std::max(1.0, left) << " s left";
    }
  }
  return o.str();
}

Result<TokenFill> parse_token_fill(std::string_view text) {
  if (text == "full") return TokenFill{TokenFill::Mode::kFull, 0};
  if (text == "empty") return TokenFill{TokenFill::Mode::kTokens, 0};
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v) || v < 0) {
    return Status::invalid_argument("--token-fill: expected full, empty or a number of tokens, got '" +
                                    std::string(text) + "'");
  }
  return TokenFill{TokenFill::Mode::kTokens, v};
}

Result<Unsorted> parse_unsorted(std::string_view text) {
  if (text == "reject") return Unsorted::kReject;
  if (text == "sort") return Unsorted::kSort;
  return Status::invalid_argument("--unsorted: expected reject or sort, got '" + std::string(text) +
                                  "'");
}

Result<std::vector<Report>> simulate(const RunOptions& o, const ProgressFn& progress) {
  if (auto s = validate(o); !s.is_ok()) return s;
  if (auto s = validate(o.throttle); !s.is_ok()) return s;
  if (auto s = validate(o.distributed); !s.is_ok()) return s;
  auto policies = make_policies(o.policy);
  if (!policies) return policies.status();
  std::vector<Report> reports;
  if (o.trace_path) {
    auto r = run_trace(o, *policies, progress);
    if (!r) return r.status();
    reports.push_back(std::move(*r));
    return reports;
  }
  for (char name : o.patterns) {
    auto pattern = make_pattern(name, o.pattern);
    if (!pattern) return pattern.status();
    auto replay = Replay::create(
        replay_options(o, *policies, fill_for(o.token_fill, pattern->token_starts_empty), 0));
    if (!replay) return replay.status();
    std::optional<Throttle> throttle;
    if (o.throttle.enabled()) {
      auto t = Throttle::create(
          *policies, throttle_options(o, fill_for(o.token_fill, pattern->token_starts_empty), 0));
      if (!t) return t.status();
      throttle.emplace(std::move(*t));
    }
    std::optional<Distributed> distributed;
    if (o.distributed.enabled()) {
      auto d = Distributed::create((*policies)[0], (*policies)[2], o.distributed);
      if (!d) return d.status();
      distributed.emplace(std::move(*d));
    }
    for (const PatternRequest& req : pattern->requests) {
      if (auto s = replay->add(req.t_us, "client", 1, req.marked); !s.is_ok()) return s;
      if (throttle) throttle->add(req.t_us, "client", 1, -1);
      if (distributed) distributed->add(req.t_us, "client", 1);
    }
    Report report = replay->report();
    if (throttle) report.throttle = throttle->finish();
    if (distributed) report.distributed = distributed->finish();
    report.title = std::string("pattern ") + pattern->name;
    report.description = pattern->description;
    reports.push_back(std::move(report));
  }
  return reports;
}

int run(const RunOptions& o, std::ostream& out, std::ostream& err) {
  ProgressPrinter printer(err);
  ProgressFn progress;
  if (o.show_progress) {
    progress = [&printer](int64_t lines, uint64_t bytes, uint64_t total) {
      printer(lines, bytes, total);
    };
  }
  auto reports = simulate(o, progress);
  printer.finish();
  if (!reports) {
    err << "ratelimit-sim: " << reports.status().message() << "\n";
    return kExitUsage;
  }
  for (const Report& r : *reports) {
    for (const std::string& w : r.warnings) err << "ratelimit-sim: warning: " << w << "\n";
    for (const std::string& w : r.notices) err << "ratelimit-sim: warning: " << w << "\n";
    if (r.skipped_lines > static_cast<int64_t>(r.warnings.size())) {
      err << "ratelimit-sim: warning: " << r.skipped_lines << " malformed lines skipped in all\n";
    }
  }
  if (o.svg_path) {
    std::ofstream svg(*o.svg_path, std::ios::binary | std::ios::trunc);
    svg << render_svg(reports->front(), o.bar_width);
    svg.close();
    if (!svg) {
      err << "ratelimit-sim: cannot write the SVG to '" << *o.svg_path << "'\n";
      return kExitUsage;
    }
  }
  if (o.html_path) {
    std::ofstream html(*o.html_path, std::ios::binary | std::ios::trunc);
    html << render_html(*reports, o.bar_width);
    html.close();
    if (!html) {
      err << "ratelimit-sim: cannot write the HTML report to '" << *o.html_path << "'\n";
      return kExitUsage;
    }
  }
  switch (o.format) {
    case OutputFormat::kTable: out << render_table(*reports); break;
    case OutputFormat::kJson: out << render_json(*reports); break;
    case OutputFormat::kCsv: out << render_csv(*reports); break;
  }
  out.flush();
  return kExitOk;
}

}  // namespace ratelimit::sim
