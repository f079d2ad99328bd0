// svg.cc — the SVG chart of a run (render_svg in render.h): one lane per algorithm on a
// shared time axis, so a reader sees at a glance where each algorithm admits and denies.
//
// Layout (pixels): a title and legend on top, then one lane per algorithm: the admitted rate
// (sliding window) in the upper part, the request ticks on a baseline (admitted up, denied
// down), and for the leaky bucket a row of departure ticks. Every coordinate is derived from
// the Report only; nothing here decides anything.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "render.h"
#include "timestamps.h"

namespace ratelimit::sim {
namespace {

constexpr double kWidth = 1200;
constexpr double kLeft = 236;   // label column
constexpr double kRight = 28;
constexpr double kTop = 78;     // title and legend
constexpr double kLaneHeight = 108;       // window algorithms and the token bucket
constexpr double kLeakyLaneHeight = 132;  // plus the departures row
constexpr double kBottom = 64;  // axis labels
constexpr double kPlotWidth = kWidth - kLeft - kRight;
// Offsets inside a lane.
constexpr double kRateTop = 10;
constexpr double kRateBottom = 70;
constexpr double kBaseline = 88;
constexpr double kTick = 12;
constexpr double kDepartureRow = 116;

const char* kAdmittedColour = "#1a9850";
const char* kDeniedColour = "#d73027";
const char* kRateColour = "#253494";
const char* kDepartureColour = "#2c7fb8";

std::string f1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string esc(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t') out += c;
    }
  }
  return out;
}

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// Smallest 1, 2 or 5 x 10^k that is >= raw (raw > 0).
double nice_step(double raw) {
  double p = 1e-6;
  while (p * 10 <= raw) p *= 10;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10 * p;
}

// Smallest of 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 x 10^k that is >= v (v > 0): the rate axis top.
double nice_ceiling(double v) {
  double p = 1e-6;
  while (p * 10 <= v) p *= 10;
  for (double m : {1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

// Admitted requests in (t - window, t] at every change, as (time, count from then on).
std::vector<std::pair<int64_t, int64_t>> sliding_counts(const std::vector<int64_t>& admitted,
                                                        int64_t window) {
  std::vector<std::pair<int64_t, int64_t>> out;
  size_t i = 0;
  size_t j = 0;
  int64_t count = 0;
  const size_t n = admitted.size();
  while (i < n || j < n) {
    int64_t t = j < n ? admitted[j] + window : admitted[i];
    if (i < n) t = std::min(t, admitted[i]);
    while (i < n && admitted[i] == t) {
      ++count;
      ++i;
    }
    while (j < n && admitted[j] + window == t) {
      --count;
      ++j;
    }
    out.emplace_back(t, count);
  }
  return out;
}

double policy_rate(const Policy& p) {
  if (p.is_bucket()) return p.rate();
  return static_cast<double>(p.limit()) * 1e6 / static_cast<double>(p.window().count());
}

}  // namespace

std::string render_svg(const Report& report, Micros rate_window) {
  const ChartData& chart = report.chart;
  const size_t lanes = report.algorithms.size();
  std::vector<double> lane_top(lanes + 1, kTop);
  for (size_t i = 0; i < lanes; ++i) {
    const bool leaky = report.algorithms[i].policy.algorithm() == Algorithm::kLeakyBucket;
    lane_top[i + 1] = lane_top[i] + (leaky ? kLeakyLaneHeight : kLaneHeight);
  }
  const double height = lane_top[lanes] + kBottom;
  const int64_t window_us = std::max<int64_t>(1, rate_window.count());
  const double window_s = static_cast<double>(window_us) / 1e6;

  // Time range: every request and every departure, widened to whole axis steps.
  int64_t t_min = report.first_us;
  int64_t t_max = report.last_us;
  for (const AlgorithmResult& a : report.algorithms) {
    if (a.departures > 0) t_max = std::max(t_max, a.last_departure_us);
  }
  if (t_max <= t_min) t_max = t_min + 1'000'000;
  const double step = nice_step(static_cast<double>(t_max - t_min) / 8.0 / 1e6);
  const auto step_us = static_cast<int64_t>(step * 1e6 + 0.5);
  t_min = t_min / step_us * step_us;
  t_max = (t_max + step_us - 1) / step_us * step_us;
  const bool relative = report.first_us > 1'000'000LL * 1'000'000;  // epoch times: show offsets
  auto x_of = [&](int64_t t) {
    return kLeft + kPlotWidth * static_cast<double>(t - t_min) / static_cast<double>(t_max - t_min);
  };

  // Rates: the sliding-window count per lane (or per-interval rates when incomplete).
  std::vector<std::vector<std::pair<int64_t, int64_t>>> counts(lanes);
  double max_rate = 1;
  for (size_t i = 0; i < lanes; ++i) {
    max_rate = std::max(max_rate, policy_rate(report.algorithms[i].policy));
    if (chart.complete) {
      counts[i] = sliding_counts(chart.lanes[i].admitted_us, window_us);
      for (const auto& c : counts[i]) {
        max_rate = std::max(max_rate, static_cast<double>(c.second) / window_s);
      }
    } else {
      const RateBins& b = chart.lanes[i].bins;
      for (int64_t a : b.admitted) {
        max_rate = std::max(max_rate, static_cast<double>(a) * 1e6 / static_cast<double>(b.width_us));
      }
    }
  }
  max_rate = nice_ceiling(max_rate * 1.05);
  int64_t max_bin = 1;
  if (!chart.complete) {
    for (const ChartLane& lane : chart.lanes) {
      for (int64_t a : lane.bins.admitted) max_bin = std::max(max_bin, a);
      for (int64_t d : lane.bins.denied) max_bin = std::max(max_bin, d);
    }
  }

  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(kWidth) << "\" height=\""
    << num(height) << "\" viewBox=\"0 0 " << num(kWidth) << " " << num(height)
    << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  o << "<title>ratelimit-sim: " << esc(report.title) << "</title>\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  o << "<text x=\"12\" y=\"26\" font-size=\"16\" font-weight=\"bold\">ratelimit-sim — "
    << esc(report.title) << ": " << esc(report.description) << "</text>\n";

  // Legend.
  {
    double x = 12;
    const double y = 54;
    o << "<g id=\"legend\">\n";
    // A small baseline with the tick above (admitted, departure) or below it (denied), as in
    // the lanes.
    auto tick = [&](const char* colour, bool up) {
      const double base = up ? y + 1 : y - 9;
      o << "<line x1=\"" << f1(x) << "\" y1=\"" << f1(base) << "\" x2=\"" << f1(x + 10)
        << "\" y2=\"" << f1(base) << "\" stroke=\"#999999\" stroke-width=\"0.8\"/>\n";
      o << "<line x1=\"" << f1(x + 5) << "\" y1=\"" << f1(base) << "\" x2=\"" << f1(x + 5)
        << "\" y2=\"" << f1(up ? base - 11 : base + 11) << "\" stroke=\"" << colour
        << "\" stroke-width=\"2\"/>\n";
      x += 16;
    };
    auto label = [&](const std::string& text, double width) {
      o << "<text x=\"" << f1(x) << "\" y=\"" << f1(y) << "\">" << esc(text) << "</text>\n";
      x += width;
    };
    if (chart.complete) {
      tick(kAdmittedColour, true);
      label("admitted request", 130);
      tick(kDeniedColour, false);
      label("denied request", 118);
    } else {
      o << "<rect x=\"" << f1(x) << "\" y=\"" << f1(y - 10) << "\" width=\"8\" height=\"10\" fill=\""
        << kAdmittedColour << "\"/>\n";
      x += 12;
      label("admitted per interval", 160);
      o << "<rect x=\"" << f1(x) << "\" y=\"" << f1(y - 10) << "\" width=\"8\" height=\"10\" fill=\""
        << kDeniedColour << "\"/>\n";
      x += 12;
      label("denied per interval", 148);
    }
    o << "<line x1=\"" << f1(x) << "\" y1=\"" << f1(y - 4) << "\" x2=\"" << f1(x + 22)
      << "\" y2=\"" << f1(y - 4) << "\" stroke=\"" << kRateColour << "\" stroke-width=\"2\"/>\n";
    x += 28;
    label(chart.complete ? "admitted rate (req/s, sliding " + format_duration(rate_window) + ")"
                         : "admitted rate (req/s per interval)",
          chart.complete ? 268 : 230);
    o << "<line x1=\"" << f1(x) << "\" y1=\"" << f1(y - 4) << "\" x2=\"" << f1(x + 22)
      << "\" y2=\"" << f1(y - 4) << "\" stroke=\"#888888\" stroke-width=\"1.5\""
      << " stroke-dasharray=\"5,3\"/>\n";
    x += 28;
    label("policy rate", 92);
    tick(kDepartureColour, true);
    label("leaky bucket departure", 160);
    o << "</g>\n";
  }

  const double plot_bottom = lane_top[lanes];
  // Lane backgrounds first, so that the attack band and the grid show through.
  for (size_t i = 0; i < lanes; ++i) {
    o << "<rect x=\"0\" y=\"" << f1(lane_top[i]) << "\" width=\"" << num(kWidth)
      << "\" height=\"" << num(lane_top[i + 1] - lane_top[i]) << "\" fill=\""
      << (i % 2 == 0 ? "#f4f6f8" : "#ffffff") << "\"/>\n";
  }
  // The attack (pattern C's marked requests), shaded across every lane.
  if (report.marked_first_us >= 0) {
    const double x1 = x_of(report.marked_first_us) - 3;
    const double x2 = x_of(report.marked_last_us) + 3;
    o << "<g id=\"attack\"><rect x=\"" << f1(x1) << "\" y=\"" << f1(kTop) << "\" width=\""
      << f1(x2 - x1) << "\" height=\"" << f1(plot_bottom - kTop)
      << "\" fill=\"#fdae61\" fill-opacity=\"0.22\"/>\n<text x=\"" << f1((x1 + x2) / 2)
      << "\" y=\"" << f1(kTop - 4) << "\" text-anchor=\"middle\" font-size=\"11\" fill=\"#b35806\">"
      << "attack</text></g>\n";
  }
  // Vertical grid and the time axis.
  o << "<g id=\"time-axis\">\n";
  for (int64_t t = t_min; t <= t_max; t += step_us) {
    const double x = x_of(t);
    o << "<line x1=\"" << f1(x) << "\" y1=\"" << f1(kTop) << "\" x2=\"" << f1(x) << "\" y2=\""
      << f1(plot_bottom + 5) << "\" stroke=\"#dddddd\" stroke-width=\"1\"/>\n";
    o << "<text x=\"" << f1(x) << "\" y=\"" << f1(plot_bottom + 20)
      << "\" text-anchor=\"middle\">" << format_seconds(relative ? t - t_min : t) << "</text>\n";
  }
  o << "<line x1=\"" << f1(kLeft) << "\" y1=\"" << f1(plot_bottom) << "\" x2=\"" << f1(kLeft + kPlotWidth)
    << "\" y2=\"" << f1(plot_bottom) << "\" stroke=\"#444444\" stroke-width=\"1\"/>\n";
  o << "<text x=\"" << f1(kLeft + kPlotWidth / 2) << "\" y=\"" << f1(plot_bottom + 42)
    << "\" text-anchor=\"middle\" font-weight=\"bold\">"
    << (relative ? "time since " + format_rfc3339(t_min) + " (s)" : std::string("time (s)"))
    << "</text>\n";
  o << "</g>\n";

  for (size_t i = 0; i < lanes; ++i) {
    const AlgorithmResult& a = report.algorithms[i];
    const ChartLane& lane = chart.lanes[i];
    const std::string name = algorithm_name(a.policy.algorithm());
    const bool leaky = a.policy.algorithm() == Algorithm::kLeakyBucket;
    const double y0 = lane_top[i];
    auto y_rate = [&](double rate) {
      return y0 + kRateBottom - (kRateBottom - kRateTop) * rate / max_rate;
    };
    o << "<g class=\"lane\" id=\"lane-" << name << "\" data-algorithm=\"" << name << "\">\n";
    // Labels.
    o << "<text x=\"12\" y=\"" << f1(y0 + 24) << "\" font-size=\"14\" font-weight=\"bold\">"
      << name << "</text>\n";
    o << "<text x=\"12\" y=\"" << f1(y0 + 42) << "\">" << esc(describe_policy(a.policy))
      << "</text>\n";
    o << "<text x=\"12\" y=\"" << f1(y0 + 60) << "\">admitted " << a.admitted << " of "
      << a.requests << "</text>\n";
    if (a.marked_requests > 0) {
      o << "<text x=\"12\" y=\"" << f1(y0 + 78) << "\">attack: " << a.marked_admitted << " of "
        << a.marked_requests << "</text>\n";
    }
    o << "<text x=\"" << f1(kLeft - 6) << "\" y=\"" << f1(y0 + kRateTop + 4)
      << "\" text-anchor=\"end\" font-size=\"10\" fill=\"#555555\">" << num(max_rate)
      << "/s</text>\n";
    o << "<text x=\"" << f1(kLeft - 6) << "\" y=\"" << f1(y0 + kRateBottom + 3)
      << "\" text-anchor=\"end\" font-size=\"10\" fill=\"#555555\">0/s</text>\n";
    o << "<line x1=\"" << f1(kLeft) << "\" y1=\"" << f1(y0 + kRateTop) << "\" x2=\"" << f1(kLeft)
      << "\" y2=\"" << f1(y0 + kRateBottom) << "\" stroke=\"#999999\" stroke-width=\"1\"/>\n";
    o << "<line x1=\"" << f1(kLeft) << "\" y1=\"" << f1(y0 + kBaseline) << "\" x2=\""
      << f1(kLeft + kPlotWidth) << "\" y2=\"" << f1(y0 + kBaseline)
      << "\" stroke=\"#999999\" stroke-width=\"0.8\"/>\n";
    // The policy's rate.
    const double pr = y_rate(policy_rate(a.policy));
    o << "<line class=\"policy-rate\" x1=\"" << f1(kLeft) << "\" y1=\"" << f1(pr) << "\" x2=\""
      << f1(kLeft + kPlotWidth) << "\" y2=\"" << f1(pr)
      << "\" stroke=\"#888888\" stroke-width=\"1.2\" stroke-dasharray=\"5,3\"/>\n";

    if (chart.complete) {
      o << "<g class=\"admitted\" stroke=\"" << kAdmittedColour << "\" stroke-width=\"1.6\">\n";
      for (int64_t t : lane.admitted_us) {
        const double x = x_of(t);
        o << "<line x1=\"" << f1(x) << "\" y1=\"" << f1(y0 + kBaseline) << "\" x2=\"" << f1(x)
          << "\" y2=\"" << f1(y0 + kBaseline - kTick) << "\"/>\n";
      }
      o << "</g>\n<g class=\"denied\" stroke=\"" << kDeniedColour << "\" stroke-width=\"1.6\">\n";
      for (int64_t t : lane.denied_us) {
        const double x = x_of(t);
        o << "<line x1=\"" << f1(x) << "\" y1=\"" << f1(y0 + kBaseline) << "\" x2=\"" << f1(x)
          << "\" y2=\"" << f1(y0 + kBaseline + kTick) << "\"/>\n";
      }
      o << "</g>\n";
      // Sliding-window admitted rate, as steps.
      o << "<polyline class=\"rate\" fill=\"none\" stroke=\"" << kRateColour
        << "\" stroke-width=\"1.8\" points=\"" << f1(x_of(t_min)) << "," << f1(y_rate(0));
      int64_t prev = 0;
      for (const auto& [t, c] : counts[i]) {
        if (t > t_max) break;
        o << " " << f1(x_of(t)) << "," << f1(y_rate(static_cast<double>(prev) / window_s)) << " "
          << f1(x_of(t)) << "," << f1(y_rate(static_cast<double>(c) / window_s));
        prev = c;
      }
      o << " " << f1(x_of(t_max)) << "," << f1(y_rate(static_cast<double>(prev) / window_s))
        << "\"/>\n";
    } else {
      const RateBins& b = lane.bins;
      const double bin_w = std::max(
          0.8, kPlotWidth * static_cast<double>(b.width_us) / static_cast<double>(t_max - t_min));
      o << "<g class=\"admitted\" fill=\"" << kAdmittedColour << "\">\n";
      for (size_t k = 0; k < b.admitted.size(); ++k) {
        if (b.admitted[k] == 0) continue;
        const double h = kTick * 1.6 * static_cast<double>(b.admitted[k]) / static_cast<double>(max_bin);
        o << "<rect x=\"" << f1(x_of(b.origin_us + static_cast<int64_t>(k) * b.width_us))
          << "\" y=\"" << f1(y0 + kBaseline - h) << "\" width=\"" << f1(bin_w) << "\" height=\""
          << f1(h) << "\"/>\n";
      }
      o << "</g>\n<g class=\"denied\" fill=\"" << kDeniedColour << "\">\n";
      for (size_t k = 0; k < b.denied.size(); ++k) {
        if (b.denied[k] == 0) continue;
        const double h = kTick * 1.6 * static_cast<double>(b.denied[k]) / static_cast<double>(max_bin);
        o << "<rect x=\"" << f1(x_of(b.origin_us + static_cast<int64_t>(k) * b.width_us))
          << "\" y=\"" << f1(y0 + kBaseline) << "\" width=\"" << f1(bin_w) << "\" height=\""
          << f1(h) << "\"/>\n";
      }
      o << "</g>\n";
      o << "<polyline class=\"rate\" fill=\"none\" stroke=\"" << kRateColour
        << "\" stroke-width=\"1.5\" points=\"";
      for (size_t k = 0; k < b.admitted.size(); ++k) {
        const int64_t t = b.origin_us + static_cast<int64_t>(k) * b.width_us;
        const double r = static_cast<double>(b.admitted[k]) * 1e6 / static_cast<double>(b.width_us);
        o << (k == 0 ? "" : " ") << f1(x_of(t)) << "," << f1(y_rate(r)) << " "
          << f1(x_of(std::min(t + b.width_us, t_max))) << "," << f1(y_rate(r));
      }
      o << "\"/>\n";
    }

    if (leaky) {
      o << "<text x=\"" << f1(kLeft - 6) << "\" y=\"" << f1(y0 + kDepartureRow + 4)
        << "\" text-anchor=\"end\" font-size=\"10\" fill=\"#555555\">departures</text>\n";
      o << "<line x1=\"" << f1(kLeft) << "\" y1=\"" << f1(y0 + kDepartureRow + kTick / 2)
        << "\" x2=\"" << f1(kLeft + kPlotWidth) << "\" y2=\"" << f1(y0 + kDepartureRow + kTick / 2)
        << "\" stroke=\"#bbbbbb\" stroke-width=\"0.8\"/>\n";
      o << "<g class=\"departures\" stroke=\"" << kDepartureColour << "\" stroke-width=\"1.6\">\n";
      if (chart.complete) {
        for (int64_t t : lane.departures_us) {
          const double x = x_of(t);
          o << "<line x1=\"" << f1(x) << "\" y1=\"" << f1(y0 + kDepartureRow + kTick / 2)
            << "\" x2=\"" << f1(x) << "\" y2=\"" << f1(y0 + kDepartureRow - kTick / 2) << "\"/>\n";
        }
      }
      o << "</g>\n";
    }
    o << "</g>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace ratelimit::sim
