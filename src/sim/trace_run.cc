// trace_run.cc — ratelimit-sim's trace run: a log or CSV read line by line (LineReader),
// parsed, optionally spread (--spread) or sorted in memory (--unsorted=sort), and pushed
// through the replay, throttle and distributed engines in one pass (see run.h).
//
// Why its own file: streaming a trace (bad lines, ordering, progress, timestamp resolution) is
// its own concern; run.cc only chooses between patterns and a trace and writes the outputs.
// Invariants: requests reach the engines in time order (a backwards time is an error naming
// its line, unless sorting); at most kMaxReportedBadLines bad lines are quoted; memory stays
// bounded by the engines' state unless --unsorted=sort keeps the whole trace.
#include <algorithm>
#include <functional>
#include <unordered_map>

#include "distributed.h"
#include "run_detail.h"
#include "timestamps.h"

namespace ratelimit::sim::detail {
namespace {

constexpr int64_t kProgressEveryLines = 1 << 16;
constexpr int kMaxReportedBadLines = 5;  // with --skip-bad, the first few are shown as warnings

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

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


}  // namespace

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

}  // namespace ratelimit::sim::detail
