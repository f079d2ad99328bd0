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

// "table", "json", "csv".
Result<OutputFormat> parse_output_format(std::string_view name);

// One table per report, with a title line, then one row per algorithm; leaky-bucket
// departures listed one by one when there are at most kMaxListedDepartures.
inline constexpr size_t kMaxListedDepartures = 40;
std::string render_table(const std::vector<Report>& reports);

// {"runs": [{"run", "description", "requests", "first_us", "last_us", "start_us",
//   "token_fill" (tokens, or "full"), "skipped_lines", "algorithms": [{"algorithm", "policy",
//   "limit", "window_us", "rate", "requests", "admitted", "denied", "clients_limited",
//   "peak_admitted", "peak_window_us", "attack_requests", "attack_admitted",
//   "departures": {"count", "first_us", "last_us", "span_us", "times_us"} (leaky only)}]}]}
std::string render_json(const std::vector<Report>& reports);

// A header, then one row per run and algorithm: run, algorithm, policy, requests, admitted,
// denied, clients_limited, peak_admitted, peak_window_us, attack_requests, attack_admitted,
// departures, first_departure_us, last_departure_us (empty where not applicable).
std::string render_csv(const std::vector<Report>& reports);

// A standalone SVG document: one lane per algorithm (<g class="lane" id="lane-ALGORITHM">)
// on a shared time axis; admitted requests as green ticks above each lane's baseline, denied
// as red ticks below it, the admitted rate over a sliding `rate_window` as a line on top, the
// policy's rate as a dashed line, leaky-bucket departures as blue ticks on their own row.
// For runs too large to draw request by request, per-interval bars replace the ticks.
std::string render_svg(const Report& report, Micros rate_window);

}  // namespace ratelimit::sim
