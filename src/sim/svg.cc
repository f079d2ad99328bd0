// svg.cc — the SVG chart of a run (render_svg in render.h), drawn so that it tells the truth
// per client and at any scale.
//
// Layout (pixels): a title and legend on top; then the aggregate panel (all keys together:
// requests offered and admitted by each algorithm, in requests per second per bin, on its
// own axis); then one lane per algorithm: above, the busiest key's admissions within the
// policy's window against the policy's limit (a per-key view: a per-client policy is never
// compared with a sum over clients); below, admitted (up) and denied (down) requests per bin
// as bars, each direction on its own labelled count scale; for the leaky bucket a row of
// departures per bin. The time axis starts at the run's start (a trace's first request) and
// every bar is a whole number of the replay's intervals.
// Invariants: every figure is derived from the Report; bars carry data-count, the sum of
// a lane's admitted (denied, departure) bars is that algorithm's admitted (denied, departure)
// count; every coordinate lies inside its panel. Nothing here decides anything.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "render.h"
#include "timestamps.h"

namespace ratelimit::sim {
namespace {

constexpr double kWidth = 1200;
constexpr double kLeft = 236;  // label column
constexpr double kRight = 28;
constexpr double kTop = 78;  // title and legend
constexpr double kPlotWidth = kWidth - kLeft - kRight;
constexpr double kAggregateHeight = 150;
constexpr double kLaneHeight = 150;        // window algorithms and the token bucket
constexpr double kDepartureHeight = 40;    // the leaky bucket's extra row
constexpr double kBottom = 64;             // axis labels
constexpr double kBarPixels = 3;           // target width of one bar
// Offsets inside a lane.
constexpr double kKeyTop = 10;       // per-key view
constexpr double kKeyBottom = 62;
constexpr double kBaseline = 106;    // bars: admitted above, denied below
constexpr double kUpBars = 36;
constexpr double kDownBars = 36;
// Inside the aggregate panel.
constexpr double kAggTop = 14;
constexpr double kAggBottom = 130;

const char* kAdmittedColour = "#1a9850";
const char* kDeniedColour = "#d73027";
const char* kKeyColour = "#253494";
const char* kDepartureColour = "#2c7fb8";
const char* kOfferedColour = "#bdbdbd";
const char* kPolicyColour = "#555555";
// One colour per algorithm in the aggregate panel (report order).
const char* kAlgorithmColours[] = {"#e41a1c", "#377eb8", "#4daf4a", "#984ea3", "#ff7f00"};

std::string f1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
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

// Smallest of 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 x 10^k that is >= v (v > 0): an axis top.
double nice_ceiling(double v) {
  double p = 1e-6;
  while (p * 10 <= v) p *= 10;
  for (double m : {1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

// The replay's bins regrouped into display bars of `factor` bins each, from the run start.
struct Bars {
  int64_t origin_us = 0;
  int64_t width_us = 1;
  std::vector<int64_t> admitted, denied, departed, key_peak;
};

Bars regroup(const RateBins& b, int64_t start_us, int64_t width_us, size_t count) {
  Bars out;
  out.origin_us = start_us;
  out.width_us = width_us;
  out.admitted.assign(count, 0);
  out.denied.assign(count, 0);
  out.departed.assign(count, 0);
  out.key_peak.assign(count, 0);
  for (size_t k = 0; k < b.admitted.size(); ++k) {
    const int64_t t = b.origin_us + static_cast<int64_t>(k) * b.width_us;
    const auto j = static_cast<size_t>(
        std::clamp<int64_t>((t - start_us) / width_us, 0, static_cast<int64_t>(count) - 1));
    out.admitted[j] += b.admitted[k];
    out.denied[j] += b.denied[k];
    out.departed[j] += b.departed[k];
    out.key_peak[j] = std::max(out.key_peak[j], b.key_peak[k]);
  }
  return out;
}

int64_t max_of(const std::vector<int64_t>& v) {
  int64_t m = 0;
  for (int64_t x : v) m = std::max(m, x);
  return m;
}

}  // namespace

std::string xml_escape(std::string_view s) {
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

std::string render_svg(const Report& report, Micros bar_width) {
  const ChartData& chart = report.chart;
  const size_t lanes = report.algorithms.size();
  std::vector<double> lane_top(lanes + 1, kTop + kAggregateHeight);
  for (size_t i = 0; i < lanes; ++i) {
    const bool leaky = report.algorithms[i].policy.algorithm() == Algorithm::kLeakyBucket;
    lane_top[i + 1] = lane_top[i] + kLaneHeight + (leaky ? kDepartureHeight : 0);
  }
  const double plot_bottom = lane_top[lanes];
  const double height = plot_bottom + kBottom;

  // Time range: from the run's start (a trace's first request) to the last request or
  // departure.
  const int64_t t0 = std::min(report.start_us, report.first_us);
  int64_t t_end = report.last_us;
  for (const AlgorithmResult& a : report.algorithms) {
    if (a.departures > 0) t_end = std::max(t_end, a.last_departure_us);
  }
  // The bar width: a whole number of the replay's intervals, about kBarPixels wide.
  int64_t bin_us = 1'000;
  for (const ChartLane& lane : chart.lanes) {
    if (!lane.bins.admitted.empty()) bin_us = std::max(bin_us, lane.bins.width_us);
  }
  const double span_us = static_cast<double>(std::max<int64_t>(t_end - t0, 1));
  const auto target =
      std::max(static_cast<int64_t>(span_us * kBarPixels / kPlotWidth), bar_width.count());
  int64_t bar_us = bin_us;
  while (bar_us < target) bar_us *= 2;
  const auto bar_count = static_cast<size_t>((t_end - t0) / bar_us + 1);
  const int64_t t1 = t0 + static_cast<int64_t>(bar_count) * bar_us;
  const bool absolute = t0 >= kEpochTimesFromUs;
  auto x_of = [&](int64_t t) {
    return kLeft + kPlotWidth * static_cast<double>(t - t0) / static_cast<double>(t1 - t0);
  };
  const double bar_px = kPlotWidth * static_cast<double>(bar_us) / static_cast<double>(t1 - t0);
  const double bar_s = static_cast<double>(bar_us) / 1e6;

  std::vector<Bars> bars;
  for (size_t i = 0; i < lanes; ++i) bars.push_back(regroup(chart.lanes[i].bins, t0, bar_us, bar_count));
  std::vector<int64_t> offered(bar_count, 0);
  if (!bars.empty()) {
    for (size_t j = 0; j < bar_count; ++j) offered[j] = bars[0].admitted[j] + bars[0].denied[j];
  }

  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(kWidth) << "\" height=\""
    << num(height) << "\" viewBox=\"0 0 " << num(kWidth) << " " << num(height)
    << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  o << "<title>ratelimit-sim: " << xml_escape(report.title) << "</title>\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  o << "<text x=\"12\" y=\"26\" font-size=\"16\" font-weight=\"bold\">ratelimit-sim — "
    << xml_escape(report.title) << ": " << xml_escape(report.description) << "</text>\n";

  // Legend.
  {
    double x = 12;
    const double y = 54;
    o << "<g id=\"legend\">\n";
    auto swatch = [&](const char* colour, const std::string& text, double width) {
      o << "<rect x=\"" << f1(x) << "\" y=\"" << f1(y - 10) << "\" width=\"10\" height=\"10\" fill=\""
        << colour << "\"/>\n<text x=\"" << f1(x + 14) << "\" y=\"" << f1(y) << "\">" << xml_escape(text)
        << "</text>\n";
      x += width;
    };
    auto stroke = [&](const char* colour, bool dashed, const std::string& text, double width) {
      o << "<line x1=\"" << f1(x) << "\" y1=\"" << f1(y - 4) << "\" x2=\"" << f1(x + 22)
        << "\" y2=\"" << f1(y - 4) << "\" stroke=\"" << colour << "\" stroke-width=\"2\""
        << (dashed ? " stroke-dasharray=\"5,3\"" : "") << "/>\n<text x=\"" << f1(x + 28)
        << "\" y=\"" << f1(y) << "\">" << xml_escape(text) << "</text>\n";
      x += width;
    };
    swatch(kAdmittedColour, "admitted per bar", 130);
    swatch(kDeniedColour, "denied per bar", 118);
    swatch(kDepartureColour, "leaky bucket departures per bar", 222);
    stroke(kKeyColour, false, "busiest key: admitted within the window", 284);
    stroke(kPolicyColour, true, "per-key limit", 116);
    o << "<text x=\"" << f1(x) << "\" y=\"" << f1(y) << "\" fill=\"#555555\">bar = "
      << xml_escape(format_duration(Micros{bar_us})) << "; left: tallest bar's count</text>\n";
    o << "</g>\n";
  }

  // Backgrounds: the aggregate panel, then alternating lanes.
  o << "<rect x=\"0\" y=\"" << f1(kTop) << "\" width=\"" << num(kWidth) << "\" height=\""
    << num(kAggregateHeight) << "\" fill=\"#fbfbf6\"/>\n";
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
  // Vertical grid and the time axis, from the run's start.
  {
    const double step = nice_step(static_cast<double>(t1 - t0) / 8.0 / 1e6);
    const auto step_us = std::max<int64_t>(1, static_cast<int64_t>(step * 1e6 + 0.5));
    o << "<g id=\"time-axis\">\n";
    for (int64_t t = t0; t <= t1; t += step_us) {
      const double x = x_of(t);
      o << "<line x1=\"" << f1(x) << "\" y1=\"" << f1(kTop) << "\" x2=\"" << f1(x) << "\" y2=\""
        << f1(plot_bottom + 5) << "\" stroke=\"#dddddd\" stroke-width=\"1\"/>\n";
      o << "<text x=\"" << f1(x) << "\" y=\"" << f1(plot_bottom + 20)
        << "\" text-anchor=\"middle\">" << (absolute ? "+" : "")
        << format_seconds(absolute ? t - t0 : t) << "</text>\n";
    }
    o << "<line x1=\"" << f1(kLeft) << "\" y1=\"" << f1(plot_bottom) << "\" x2=\""
      << f1(kLeft + kPlotWidth) << "\" y2=\"" << f1(plot_bottom)
      << "\" stroke=\"#444444\" stroke-width=\"1\"/>\n";
    o << "<text x=\"" << f1(kLeft + kPlotWidth / 2) << "\" y=\"" << f1(plot_bottom + 42)
      << "\" text-anchor=\"middle\" font-weight=\"bold\">"
      << (absolute ? "seconds since the first request, " + format_rfc3339(t0)
                   : std::string("time (s)"))
      << "</text>\n</g>\n";
  }

  // The aggregate panel: requests per second in each bar, all keys together.
  {
    const double top = kTop;
    double max_rate = 1;
    for (int64_t c : offered) max_rate = std::max(max_rate, static_cast<double>(c) / bar_s);
    max_rate = nice_ceiling(max_rate * 1.05);
    auto y_of = [&](double rate) { return top + kAggBottom - (kAggBottom - kAggTop) * rate / max_rate; };
    o << "<g class=\"panel\" id=\"aggregate\" data-top=\"" << f1(top + kAggTop) << "\" data-bottom=\""
      << f1(top + kAggBottom) << "\">\n";
    o << "<text x=\"12\" y=\"" << f1(top + 24) << "\" font-size=\"14\" font-weight=\"bold\">all keys</text>\n";
    o << "<text x=\"12\" y=\"" << f1(top + 42) << "\">requests/s in each bar:</text>\n";
    o << "<text x=\"12\" y=\"" << f1(top + 58) << "\" fill=\"#777777\">offered " << report.requests
      << " (grey)</text>\n";
    for (size_t i = 0; i < lanes; ++i) {
      o << "<text x=\"12\" y=\"" << f1(top + 74 + 14 * static_cast<double>(i)) << "\" fill=\""
        << kAlgorithmColours[i % 5] << "\" font-size=\"11\">"
        << algorithm_name(report.algorithms[i].policy.algorithm()) << " admitted "
        << report.algorithms[i].admitted << "</text>\n";
    }
    o << "<text x=\"" << f1(kLeft - 6) << "\" y=\"" << f1(top + kAggTop + 4)
      << "\" text-anchor=\"end\" font-size=\"10\" fill=\"#555555\">" << num(max_rate)
      << "/s</text>\n<text x=\"" << f1(kLeft - 6) << "\" y=\"" << f1(top + kAggBottom + 3)
      << "\" text-anchor=\"end\" font-size=\"10\" fill=\"#555555\">0/s</text>\n";
    o << "<line x1=\"" << f1(kLeft) << "\" y1=\"" << f1(top + kAggTop) << "\" x2=\"" << f1(kLeft)
      << "\" y2=\"" << f1(top + kAggBottom) << "\" stroke=\"#999999\" stroke-width=\"1\"/>\n";
    o << "<g class=\"offered\" fill=\"" << kOfferedColour << "\">\n";
    for (size_t j = 0; j < bar_count; ++j) {
      if (offered[j] == 0) continue;
      const double y = y_of(static_cast<double>(offered[j]) / bar_s);
      o << "<rect x=\"" << f1(x_of(t0 + static_cast<int64_t>(j) * bar_us)) << "\" y=\"" << f1(y)
        << "\" width=\"" << f1(std::max(bar_px, 0.8)) << "\" height=\""
        << f1(top + kAggBottom - y) << "\" data-count=\"" << offered[j] << "\"/>\n";
    }
    o << "</g>\n";
    for (size_t i = 0; i < lanes; ++i) {
      o << "<polyline class=\"admitted-rate\" data-algorithm=\""
        << algorithm_name(report.algorithms[i].policy.algorithm()) << "\" fill=\"none\" stroke=\""
        << kAlgorithmColours[i % 5] << "\" stroke-width=\"1.4\" points=\"";
      for (size_t j = 0; j < bar_count; ++j) {
        const double y = y_of(static_cast<double>(bars[i].admitted[j]) / bar_s);
        const int64_t t = t0 + static_cast<int64_t>(j) * bar_us;
        o << (j == 0 ? "" : " ") << f1(x_of(t)) << "," << f1(y) << " " << f1(x_of(t + bar_us))
          << "," << f1(y);
      }
      o << "\"/>\n";
    }
    o << "</g>\n";
  }

  for (size_t i = 0; i < lanes; ++i) {
    const AlgorithmResult& a = report.algorithms[i];
    const Bars& b = bars[i];
    const std::string name = algorithm_name(a.policy.algorithm());
    const bool leaky = a.policy.algorithm() == Algorithm::kLeakyBucket;
    const double y0 = lane_top[i];
    const auto limit = static_cast<double>(a.policy.limit());
    const double key_max = nice_ceiling(
        std::max(limit, static_cast<double>(std::max<int64_t>(1, max_of(b.key_peak)))) * 1.15);
    auto y_key = [&](double v) { return y0 + kKeyBottom - (kKeyBottom - kKeyTop) * v / key_max; };
    const int64_t up_max = std::max<int64_t>(1, max_of(b.admitted));
    const int64_t down_max = std::max<int64_t>(1, max_of(b.denied));
    o << "<g class=\"lane\" id=\"lane-" << name << "\" data-algorithm=\"" << name
      << "\" data-top=\"" << f1(y0) << "\" data-baseline=\"" << f1(y0 + kBaseline)
      << "\" data-bottom=\"" << f1(lane_top[i + 1]) << "\">\n";
    // Labels.
    o << "<text x=\"12\" y=\"" << f1(y0 + 22) << "\" font-size=\"14\" font-weight=\"bold\">"
      << name << "</text>\n";
    o << "<text x=\"12\" y=\"" << f1(y0 + 40) << "\">" << xml_escape(describe_policy(a.policy))
      << " per key</text>\n";
    o << "<text x=\"12\" y=\"" << f1(y0 + 58) << "\" fill=\"" << kAdmittedColour << "\">admitted "
      << a.admitted << " of " << a.requests << "</text>\n";
    o << "<text x=\"12\" y=\"" << f1(y0 + 76) << "\" fill=\"" << kDeniedColour << "\">denied "
      << a.denied << " (" << a.clients_limited << (a.clients_limited == 1 ? " key" : " keys")
      << " limited)</text>\n";
    o << "<text x=\"12\" y=\"" << f1(y0 + 94) << "\">busiest key: " << a.peak_admitted_per_key
      << " in " << xml_escape(format_duration(a.peak_window)) << "</text>\n";
    if (a.marked_requests > 0) {
      o << "<text x=\"12\" y=\"" << f1(y0 + 112) << "\">attack: " << a.marked_admitted << " of "
        << a.marked_requests << "</text>\n";
    }
    // Per-key view: axis, the limit, the busiest key's count within the window.
    o << "<text x=\"" << f1(kLeft - 6) << "\" y=\"" << f1(y0 + kKeyTop + 4)
      << "\" text-anchor=\"end\" font-size=\"10\" fill=\"#555555\">" << num(key_max) << " per "
      << xml_escape(format_duration(a.peak_window)) << "</text>\n";
    o << "<text x=\"" << f1(kLeft - 6) << "\" y=\"" << f1(y0 + kKeyBottom + 3)
      << "\" text-anchor=\"end\" font-size=\"10\" fill=\"#555555\">0</text>\n";
    o << "<line x1=\"" << f1(kLeft) << "\" y1=\"" << f1(y0 + kKeyTop) << "\" x2=\"" << f1(kLeft)
      << "\" y2=\"" << f1(y0 + kKeyBottom) << "\" stroke=\"#999999\" stroke-width=\"1\"/>\n";
    const double ly = y_key(limit);
    o << "<line class=\"policy-rate\" x1=\"" << f1(kLeft) << "\" y1=\"" << f1(ly) << "\" x2=\""
      << f1(kLeft + kPlotWidth) << "\" y2=\"" << f1(ly) << "\" stroke=\"" << kPolicyColour
      << "\" stroke-width=\"1.2\" stroke-dasharray=\"5,3\"/>\n";
    o << "<text x=\"" << f1(kLeft + kPlotWidth - 4) << "\" y=\"" << f1(ly - 3)
      << "\" text-anchor=\"end\" font-size=\"10\" fill=\"" << kPolicyColour << "\">limit "
      << a.policy.limit() << " per " << xml_escape(format_duration(a.peak_window)) << "</text>\n";
    // Only where the bar holds admissions: between them the count is not known exactly (it
    // decays as admissions leave the window), so the line breaks rather than drop to 0.
    o << "<path class=\"rate\" fill=\"none\" stroke=\"" << kKeyColour
      << "\" stroke-width=\"1.6\" d=\"";
    bool drawing = false;
    for (size_t j = 0; j < bar_count; ++j) {
      if (b.key_peak[j] == 0) {
        drawing = false;
        continue;
      }
      const double y = y_key(static_cast<double>(b.key_peak[j]));
      const int64_t t = t0 + static_cast<int64_t>(j) * bar_us;
      o << (drawing ? " L" : " M") << f1(x_of(t)) << "," << f1(y) << " L" << f1(x_of(t + bar_us))
        << "," << f1(y);
      drawing = true;
    }
    o << "\"/>\n";
    // Bars: admitted above the baseline, denied below, each on its own count scale.
    const double base = y0 + kBaseline;
    o << "<line x1=\"" << f1(kLeft) << "\" y1=\"" << f1(base) << "\" x2=\"" << f1(kLeft + kPlotWidth)
      << "\" y2=\"" << f1(base) << "\" stroke=\"#999999\" stroke-width=\"0.8\"/>\n";
    // Each direction's scale: the count of its tallest bar.
    o << "<text class=\"scale\" x=\"" << f1(kLeft - 6) << "\" y=\"" << f1(base - kUpBars + 8)
      << "\" text-anchor=\"end\" font-size=\"10\" fill=\"" << kAdmittedColour << "\">"
      << max_of(b.admitted) << "</text>\n";
    o << "<text class=\"scale\" x=\"" << f1(kLeft - 6) << "\" y=\"" << f1(base + kDownBars)
      << "\" text-anchor=\"end\" font-size=\"10\" fill=\"" << kDeniedColour << "\">"
      << max_of(b.denied) << "</text>\n";
    auto draw_bars = [&](const char* cls, const char* colour, const std::vector<int64_t>& counts,
                         int64_t max, double baseline, double room, bool up) {
      o << "<g class=\"" << cls << "\" fill=\"" << colour << "\">\n";
      for (size_t j = 0; j < counts.size(); ++j) {
        if (counts[j] == 0) continue;
        // At least 1.5 px, so that a single request next to thousands still shows.
        const double h = std::max(1.5, room * static_cast<double>(counts[j]) / static_cast<double>(max));
        o << "<rect x=\"" << f1(x_of(t0 + static_cast<int64_t>(j) * bar_us)) << "\" y=\""
          << f1(up ? baseline - h : baseline) << "\" width=\"" << f1(std::max(bar_px, 0.8))
          << "\" height=\"" << f1(h) << "\" data-count=\"" << counts[j] << "\"/>\n";
      }
      o << "</g>\n";
    };
    draw_bars("admitted", kAdmittedColour, b.admitted, up_max, base, kUpBars, true);
    draw_bars("denied", kDeniedColour, b.denied, down_max, base, kDownBars, false);
    if (leaky) {
      const double row = y0 + kLaneHeight + kDepartureHeight - 6;
      const int64_t dep_max = std::max<int64_t>(1, max_of(b.departed));
      o << "<text class=\"scale\" x=\"" << f1(kLeft - 6) << "\" y=\"" << f1(row - 16)
        << "\" text-anchor=\"end\" font-size=\"10\" fill=\"" << kDepartureColour << "\">"
        << max_of(b.departed) << "</text>\n";
      o << "<line x1=\"" << f1(kLeft) << "\" y1=\"" << f1(row) << "\" x2=\"" << f1(kLeft + kPlotWidth)
        << "\" y2=\"" << f1(row) << "\" stroke=\"#bbbbbb\" stroke-width=\"0.8\"/>\n";
      draw_bars("departures", kDepartureColour, b.departed, dep_max, row, 28, true);
    }
    o << "</g>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace ratelimit::sim
