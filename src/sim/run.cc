// run.cc — orchestration of a ratelimit-sim run (see run.h): patterns or a streamed trace
// (trace_run.cc) into the replay engine, then the outputs.
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
#include "run_detail.h"
#include "throttle.h"
#include "timestamps.h"

namespace ratelimit::sim {
namespace detail {

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

}  // namespace detail

using detail::fill_for;
using detail::replay_options;
using detail::run_trace;
using detail::throttle_options;

namespace {

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
