// render.h — ratelimit-sim's outputs: a plain table for people, JSON and CSV for scripts, and
// an SVG chart.
//
// Why apart from the engine: rendering is pure formatting of a Report, so each output can be
// tested by parsing it back. All times in JSON and CSV are integer microseconds (exact);
// the table and the chart show seconds.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/clock.h"
#include "ratelimit/status.h"
#include "replay.h"

namespace ratelimit::sim {

enum class OutputFormat : uint8_t { kTable, kJson, kCsv };

// Times from this many µs on are taken as Unix epoch times (any trace of real traffic:
// 1970-01-12 and later) and shown as dates; smaller ones (the patterns) as seconds.
inline constexpr int64_t kEpochTimesFromUs = 1'000'000LL * 1'000'000;

// A time for people: "2024-05-01T12:00:01.5Z (+1.5 s)" (from the run's first request) for
// epoch times, "1.5 s" otherwise.
std::string format_instant(const Report& report, int64_t t_us);

// "table", "json", "csv".
Result<OutputFormat> parse_output_format(std::string_view name);

// The pieces every human-readable output (the table, the HTML report) shows, in order:
// summary lines (requests and times, resolution, skipped lines, warnings), the algorithm
// rows (the first is the header), the departures line ("" if none), the top-keys heading
// and rows (the first is the header; shown when the run has more than one key).
std::vector<std::string> summary_lines(const Report& report);
std::vector<std::vector<std::string>> algorithm_rows(const Report& report);
std::string departures_line(const Report& report);
std::string top_keys_heading(const Report& report);
std::vector<std::vector<std::string>> top_key_rows(const Report& report);
// With throttling (--concurrency / --max-wait): its settings in one line, and a row per
// algorithm (the first is the header): offered, admitted at once and after waiting, refused
// (at once, queue full, timed out), waits (p50, p99, max of those who waited; mean of all
// admitted), the peak in flight (all keys; the busiest key) and the longest queue.
std::string throttle_heading(const Report& report);
std::vector<std::vector<std::string>> throttle_rows(const Report& report);
// With the distributed model (--instances / --regions): its settings, and a row per algorithm
// and mode: admitted against exact (requests over and under, and the worst window beyond the
// limit / short of exact), the documented bound, store calls per decision, latency.
std::string distributed_heading(const Report& report);
std::vector<std::vector<std::string>> distributed_rows(const Report& report);

// One table per report, with a title line, then one row per algorithm; leaky-bucket
// departures listed one by one when there are at most kMaxListedDepartures.
inline constexpr size_t kMaxListedDepartures = 40;
std::string render_table(const std::vector<Report>& reports);

// {"runs": [{"run", "description", "requests", "first_us", "last_us", "first", "last" (ISO
//   8601, traces only), "start_us", "token_fill" (tokens, or "full"), "skipped_lines",
//   "resolution_us", "spread_us", "missing_key_parts", "notices", "algorithms": [{"algorithm",
//   "policy", "limit", "window_us", "rate", "requests", "admitted", "denied",
//   "clients_limited", "peak_admitted", "peak_admitted_per_key", "peak_window_us",
//   "attack_requests", "attack_admitted", "departures": {"count", "first_us", "last_us",
//   "span_us", "times_us"} (leaky only)}], "top_keys": [{"key", "offered", "algorithms":
//   {NAME: {"admitted", "peak"}}}], "top_keys_error", "throttling" (with --concurrency or
//   --max-wait: {"hold_us", "durations_from_trace", "concurrency", "lease_ttl_us",
//   "max_wait_us", "max_queue", "algorithms": [{"algorithm", "policy", "offered",
//   "admitted_at_once", "admitted_after_wait", "refused", "refused_queue_full",
//   "refused_timed_out", "wait_p50_us", "wait_p99_us", "wait_max_us", "wait_mean_us",
//   "peak_in_flight", "peak_in_flight_per_key", "peak_queue"}]}), "distributed" (with
//   --instances or --regions: the settings and "modes": [{"algorithm", "mode", "decisions",
//   "admitted", "exact_admitted", "over", "under", "worst_window_over", "worst_window_under",
//   "bound" (-1: none), "store_calls", "sync_messages", "latency_p50_us", "latency_p99_us",
//   "latency_max_us"}])}]}
std::string render_json(const std::vector<Report>& reports);

// A header, then one row per run and algorithm: run, algorithm, policy, requests, admitted,
// denied, clients_limited, peak_admitted, peak_window_us, attack_requests, attack_admitted,
// departures, first_departure_us, last_departure_us (empty where not applicable),
// peak_admitted_per_key.
std::string render_csv(const std::vector<Report>& reports);

// A standalone SVG document (layout in svg.cc): a panel for all keys (offered and admitted
// per second), then one lane per algorithm (<g class="lane" id="lane-ALGORITHM"> with its
// box in data-top/data-baseline/data-bottom): the busiest key's admissions within the
// policy's window against the per-key limit, admitted and denied requests per interval as
// bars (each <rect> carries data-count), and for the leaky bucket departures per interval.
// The time axis starts at the run's start. A bar covers a power-of-two multiple of the
// replay's interval, about 3 px wide, and at least `bar_width` (0: no minimum).
std::string render_svg(const Report& report, Micros bar_width);

// `s` as XML/HTML text or attribute value: & < > " escaped, control characters (not allowed
// in XML 1.0) dropped.
std::string xml_escape(std::string_view s);

// One self-contained HTML document (no script, no network: styles, tables and the SVG charts
// inline) with every report's summary, tables and chart.
std::string render_html(const std::vector<Report>& reports, Micros bar_width);

}  // namespace ratelimit::sim
