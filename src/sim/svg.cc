// svg.cc — the SVG chart of a run (render_svg in render.h), drawn so that it tells the truth
// per client and at any scale, and so that no mark or label hides another.
//
// Layout (pixels): the title, the run's description and a legend on top; then the aggregate
// panel (all keys together: requests offered and admitted by each algorithm, in requests per
// second per bar, on its own axis); then one lane per algorithm: above, the busiest key's
// admissions within the policy's window (a shaded step) against the policy's limit (a dashed
// line drawn over it, labelled in the axis column, never inside the plot); below, admitted
// (up) and denied (down) requests per bar as bars on one labelled scale; for the leaky bucket
// a row of departures per bar. Three columns: the lane's text (x 12 ... 240), its axis labels
// (right-aligned at kLeft - 6), the plot. Bar widths come from chart_layout.h.
// Each panel's plot is a nested <svg class="plot"> whose viewBox spans the whole time axis:
// the HTML report zooms by narrowing that viewBox (html_script.cc), so every mark in a plot
// is in time coordinates and every text outside it. The bars' figures are also in
// <metadata class="chart-data"> as JSON, for the report's hover and for scripts.
// Invariants: every figure is derived from the Report; bars carry data-count, the sum of a
// lane's admitted (denied, departure) bars is that algorithm's admitted (denied, departure)
// count; every coordinate lies inside its panel. Nothing here decides anything.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "chart_layout.h"
#include "render.h"
#include "timestamps.h"

namespace ratelimit::sim {
namespace {

constexpr double kWidth = 1200;
constexpr double kLeft = 330;  // the text column and the axis labels
constexpr double kRight = 28;
constexpr double kTop = 90;  // title, description and legend
constexpr double kPlotWidth = kWidth - kLeft - kRight;
constexpr double kAxisX = kLeft - 6;  // axis labels end here
constexpr double kAggregateHeight = 150;
constexpr double kLaneHeight = 150;      // window algorithms and the token bucket
constexpr double kDepartureHeight = 40;  // the leaky bucket's extra row
constexpr double kBottom = 64;           // time axis labels
constexpr double kBarPixels = 2;         // at least this wide, rounded up to a 1-2-5 width
// Offsets inside a lane.
constexpr double kKeyTop = 12;  // per-key view
constexpr double kKeyBottom = 60;
constexpr double kBaseline = 112;  // bars: admitted above, denied below, one scale
constexpr double kBarRoom = 30;
// Inside the aggregate panel.
constexpr double kAggTop = 14;
constexpr double kAggBottom = 130;
constexpr double kLabelHeight = 12;  // a 10 px label's box: closer labels collide

const char* kAdmittedColour = "#1a9850";
const char* kDeniedColour = "#d73027";
const char* kKeyColour = "#253494";
const char* kKeyFill = "#c6d2ea";
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

int64_t max_of(const std::vector<int64_t>& v) {
  int64_t m = 0;
  for (int64_t x : v) m = std::max(m, x);
  return m;
}

class Chart {
 public:
  Chart(const Report& r, Micros bar_width)
      : r_(r), c_(chart_bars(r, bar_width, kPlotWidth, kBarPixels)) {}

  double x_of(int64_t t) const {
    return kLeft + kPlotWidth * static_cast<double>(t - c_.t0_us) /
                       static_cast<double>(c_.t1_us - c_.t0_us);
  }
  double bar_x(size_t j) const { return x_of(c_.t0_us + static_cast<int64_t>(j) * c_.bar_us); }
  double bar_px() const { return std::max(0.8, bar_x(1) - bar_x(0)); }

  // A label in the axis column.
  void axis_label(double y, const std::string& text, const char* colour, const char* cls = "axis") {
    o_ << "<text class=\"" << cls << "\" x=\"" << f1(kAxisX) << "\" y=\"" << f1(y)
       << "\" text-anchor=\"end\" font-size=\"10\" fill=\"" << colour << "\">" << xml_escape(text)
       << "</text>\n";
  }
  void text(double x, double y, const std::string& s, const std::string& attrs = "") {
    o_ << "<text x=\"" << f1(x) << "\" y=\"" << f1(y) << "\"" << (attrs.empty() ? "" : " ") << attrs
       << ">" << xml_escape(s) << "</text>\n";
  }
  // A nested plot spanning the time axis over [top, top + height).
  void open_plot(double top, double height) {
    o_ << "<svg class=\"plot\" x=\"" << f1(kLeft) << "\" y=\"" << f1(top) << "\" width=\""
       << f1(kPlotWidth) << "\" height=\"" << f1(height) << "\" viewBox=\"" << f1(kLeft) << " "
       << f1(top) << " " << f1(kPlotWidth) << " " << f1(height)
       << "\" preserveAspectRatio=\"none\" overflow=\"hidden\">\n";
  }
  void close_plot() { o_ << "</svg>\n"; }

  std::string render();

 private:
  void header(double height);
  void legend();
  void time_axis(double plot_bottom);
  void aggregate();
  void lane(size_t i, double y0, double y1);
  void bars(const char* cls, const char* colour, const std::vector<int64_t>& counts, int64_t max,
            double baseline, double room, bool up);

  const Report& r_;
  ChartBars c_;
  std::ostringstream o_;
};

void Chart::header(double height) {
  o_ << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"ratelimit-sim-chart\" width=\""
     << num(kWidth) << "\" height=\"" << num(height) << "\" viewBox=\"0 0 " << num(kWidth) << " "
     << num(height) << "\" data-plot-left=\"" << num(kLeft) << "\" data-plot-width=\""
     << num(kPlotWidth) << "\" data-plot-top=\"" << num(kTop) << "\" data-plot-bottom=\""
     << num(height - kBottom) << "\" data-t0-us=\"" << c_.t0_us << "\" data-t1-us=\"" << c_.t1_us
     << "\" data-bar-us=\"" << c_.bar_us
     << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  // The full title and description stay in <title> (a tooltip) when the lines are cut.
  o_ << "<title>ratelimit-sim: " << xml_escape(r_.title) << ": " << xml_escape(r_.description)
     << "</title>\n<metadata class=\"chart-data\">" << chart_metadata(r_, c_) << "</metadata>\n";
  o_ << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  text(12, 24, fit_text("ratelimit-sim — " + r_.title, kWidth - 24, 16, true),
       "id=\"chart-title\" font-size=\"16\" font-weight=\"bold\"");
  text(12, 44, fit_text(r_.description, kWidth - 24, 12, false), "fill=\"#444444\"");
}

void Chart::legend() {
  double x = 12;
  const double y = 70;
  o_ << "<g id=\"legend\">\n";
  auto swatch = [&](const char* colour, const std::string& label) {
    o_ << "<rect x=\"" << f1(x) << "\" y=\"" << f1(y - 10) << "\" width=\"10\" height=\"10\" fill=\""
       << colour << "\"/>\n";
    text(x + 14, y, label);
    x += 14 + text_width(label, 12, false) + 14;
  };
  auto stroke = [&](const char* colour, bool dashed, const std::string& label) {
    o_ << "<line x1=\"" << f1(x) << "\" y1=\"" << f1(y - 4) << "\" x2=\"" << f1(x + 22)
       << "\" y2=\"" << f1(y - 4) << "\" stroke=\"" << colour << "\" stroke-width=\"2\""
       << (dashed ? " stroke-dasharray=\"5,3\"" : "") << "/>\n";
    text(x + 28, y, label);
    x += 28 + text_width(label, 12, false) + 14;
  };
  swatch(kAdmittedColour, "admitted per bar");
  swatch(kDeniedColour, "denied per bar");
  swatch(kDepartureColour, "leaky bucket departures per bar");
  stroke(kKeyColour, false, "busiest key: admitted within the window");
  stroke(kPolicyColour, true, "per-key limit");
  text(x, y, "bar = " + format_duration(Micros{c_.bar_us}), "id=\"bar-width\" fill=\"#555555\"");
  o_ << "</g>\n";
}

void Chart::time_axis(double plot_bottom) {
  const bool absolute = c_.t0_us >= kEpochTimesFromUs;
  const double step = nice_step(static_cast<double>(c_.t1_us - c_.t0_us) / 8.0 / 1e6);
  const auto step_us = std::max<int64_t>(1, static_cast<int64_t>(step * 1e6 + 0.5));
  // Grid lines behind every panel (a plot of its own, so that they zoom with the bars).
  open_plot(kTop, plot_bottom - kTop);
  o_ << "<g id=\"grid\">\n";
  for (int64_t t = c_.t0_us; t <= c_.t1_us; t += step_us) {
    o_ << "<line x1=\"" << f1(x_of(t)) << "\" y1=\"" << f1(kTop) << "\" x2=\"" << f1(x_of(t))
       << "\" y2=\"" << f1(plot_bottom) << "\" stroke=\"#dddddd\" stroke-width=\"1\" "
       << "vector-effect=\"non-scaling-stroke\"/>\n";
  }
  o_ << "</g>\n";
  if (r_.marked_first_us >= 0) {
    const double x1 = x_of(r_.marked_first_us) - 3;
    const double x2 = x_of(r_.marked_last_us) + 3;
    o_ << "<rect id=\"attack\" x=\"" << f1(x1) << "\" y=\"" << f1(kTop) << "\" width=\""
       << f1(x2 - x1) << "\" height=\"" << f1(plot_bottom - kTop)
       << "\" fill=\"#fdae61\" fill-opacity=\"0.22\"/>\n";
  }
  close_plot();
  if (r_.marked_first_us >= 0) {
    const int64_t mid = (r_.marked_first_us + r_.marked_last_us) / 2;
    text(x_of(mid), kTop - 4, "attack",
         "class=\"at-time\" data-t-us=\"" + std::to_string(mid) +
             "\" text-anchor=\"middle\" font-size=\"11\" fill=\"#b35806\"");
  }
  o_ << "<g id=\"time-axis\" data-absolute=\"" << (absolute ? 1 : 0) << "\">\n";
  for (int64_t t = c_.t0_us; t <= c_.t1_us; t += step_us) {
    text(x_of(t), plot_bottom + 20,
         (absolute ? "+" : "") + format_seconds(absolute ? t - c_.t0_us : t),
         "class=\"tick\" text-anchor=\"middle\"");
  }
  o_ << "</g>\n<line x1=\"" << f1(kLeft) << "\" y1=\"" << f1(plot_bottom) << "\" x2=\""
     << f1(kLeft + kPlotWidth) << "\" y2=\"" << f1(plot_bottom)
     << "\" stroke=\"#444444\" stroke-width=\"1\"/>\n";
  text(kLeft + kPlotWidth / 2, plot_bottom + 42,
       absolute ? "seconds since the first request, " + format_rfc3339(c_.t0_us) : "time (s)",
       "text-anchor=\"middle\" font-weight=\"bold\"");
}

void Chart::aggregate() {
  const double top = kTop;
  const double bar_s = static_cast<double>(c_.bar_us) / 1e6;
  double max_rate = 1;
  for (int64_t n : c_.offered) max_rate = std::max(max_rate, static_cast<double>(n) / bar_s);
  max_rate = nice_ceiling(max_rate * 1.05);
  const double lo = top + kAggTop, hi = top + kAggBottom;
  auto y_of = [&](double rate) { return hi - (hi - lo) * rate / max_rate; };
  o_ << "<g class=\"panel\" id=\"aggregate\" data-top=\"" << f1(lo) << "\" data-bottom=\"" << f1(hi)
     << "\">\n";
  text(12, top + 24, "all keys", "font-size=\"14\" font-weight=\"bold\"");
  text(12, top + 42, "requests/s in each bar:");
  text(12, top + 58, "offered " + std::to_string(r_.requests) + " (grey)", "fill=\"#777777\"");
  const size_t lanes = r_.algorithms.size();
  for (size_t i = 0; i < lanes; ++i) {
    text(12, top + 74 + 14 * static_cast<double>(i),
         std::string(algorithm_name(r_.algorithms[i].policy.algorithm())) + " admitted " +
             std::to_string(r_.algorithms[i].admitted),
         std::string("fill=\"") + kAlgorithmColours[i % 5] + "\" font-size=\"11\"");
  }
  axis_label(lo + 4, num(max_rate) + "/s", kPolicyColour);
  axis_label(hi + 3, "0/s", kPolicyColour);
  open_plot(top, kAggregateHeight);
  o_ << "<g class=\"offered\" fill=\"" << kOfferedColour << "\">\n";
  for (size_t j = 0; j < c_.count; ++j) {
    if (c_.offered[j] == 0) continue;
    const double y = y_of(static_cast<double>(c_.offered[j]) / bar_s);
    o_ << "<rect x=\"" << f1(bar_x(j)) << "\" y=\"" << f1(y) << "\" width=\"" << f1(bar_px())
       << "\" height=\"" << f1(hi - y) << "\" data-count=\"" << c_.offered[j] << "\"/>\n";
  }
  o_ << "</g>\n";
  // Equal (or nearly equal) admissions would draw the five lines as one: fan them apart.
  std::vector<std::vector<double>> ys(lanes, std::vector<double>(c_.count));
  for (size_t j = 0; j < c_.count; ++j) {
    std::vector<double> at(lanes);
    for (size_t i = 0; i < lanes; ++i) at[i] = y_of(static_cast<double>(c_.lanes[i].admitted[j]) / bar_s);
    const std::vector<double> shown = fan_out(at, 2.2, lo, hi);
    for (size_t i = 0; i < lanes; ++i) ys[i][j] = shown[i];
  }
  for (size_t i = 0; i < lanes; ++i) {
    o_ << "<polyline class=\"admitted-rate\" data-algorithm=\""
       << algorithm_name(r_.algorithms[i].policy.algorithm()) << "\" fill=\"none\" stroke=\""
       << kAlgorithmColours[i % 5]
       << "\" stroke-width=\"1.6\" vector-effect=\"non-scaling-stroke\" points=\"";
    for (size_t j = 0; j < c_.count; ++j) {
      o_ << (j == 0 ? "" : " ") << f1(bar_x(j)) << "," << f1(ys[i][j]) << " " << f1(bar_x(j + 1))
         << "," << f1(ys[i][j]);
    }
    o_ << "\"/>\n";
  }
  close_plot();
  o_ << "</g>\n";
}

void Chart::bars(const char* cls, const char* colour, const std::vector<int64_t>& counts,
                 int64_t max, double baseline, double room, bool up) {
  o_ << "<g class=\"" << cls << "\" fill=\"" << colour << "\">\n";
  for (size_t j = 0; j < counts.size(); ++j) {
    if (counts[j] == 0) continue;
    // At least 1.5 px, so that a single request next to thousands still shows.
    const double h = std::max(1.5, room * static_cast<double>(counts[j]) / static_cast<double>(max));
    o_ << "<rect x=\"" << f1(bar_x(j)) << "\" y=\"" << f1(up ? baseline - h : baseline)
       << "\" width=\"" << f1(bar_px()) << "\" height=\"" << f1(h) << "\" data-count=\""
       << counts[j] << "\"/>\n";
  }
  o_ << "</g>\n";
}

void Chart::lane(size_t i, double y0, double y1) {
  const AlgorithmResult& a = r_.algorithms[i];
  const LaneBars& b = c_.lanes[i];
  const std::string name = algorithm_name(a.policy.algorithm());
  const std::string per = " per " + format_duration(a.peak_window);
  const auto limit = static_cast<double>(a.policy.limit());
  const double key_max = nice_ceiling(
      std::max(limit, static_cast<double>(std::max<int64_t>(1, max_of(b.key_peak)))) * 1.15);
  auto y_key = [&](double v) { return y0 + kKeyBottom - (kKeyBottom - kKeyTop) * v / key_max; };
  const double base = y0 + kBaseline;
  // Admitted and denied on one scale, so that their heights compare.
  const int64_t scale = std::max<int64_t>(1, std::max(max_of(b.admitted), max_of(b.denied)));
  o_ << "<g class=\"lane\" id=\"lane-" << name << "\" data-algorithm=\"" << name << "\" data-top=\""
     << f1(y0) << "\" data-baseline=\"" << f1(base) << "\" data-bottom=\"" << f1(y1)
     << "\" data-scale=\"" << scale << "\">\n";
  text(12, y0 + 22, name, "font-size=\"14\" font-weight=\"bold\"");
  text(12, y0 + 40, describe_policy(a.policy) + " per key");
  text(12, y0 + 58, "admitted " + std::to_string(a.admitted) + " of " + std::to_string(a.requests),
       std::string("fill=\"") + kAdmittedColour + "\"");
  text(12, y0 + 76,
       "denied " + std::to_string(a.denied) + " (" + std::to_string(a.clients_limited) +
           (a.clients_limited == 1 ? " key" : " keys") + " limited)",
       std::string("fill=\"") + kDeniedColour + "\"");
  text(12, y0 + 94, "busiest key: " + std::to_string(a.peak_admitted_per_key) + " in " +
                        format_duration(a.peak_window));
  if (a.marked_requests > 0) {
    text(12, y0 + 112, "attack: " + std::to_string(a.marked_admitted) + " of " +
                           std::to_string(a.marked_requests));
  }
  // The per-key view's axis: the limit always labelled; its top and 0 where they fit.
  const double ly = y_key(limit);
  axis_label(ly + 3, "limit " + std::to_string(a.policy.limit()), kPolicyColour, "limit-label");
  if (ly - (y0 + kKeyTop) >= kLabelHeight) axis_label(y0 + kKeyTop + 4, num(key_max) + per, kPolicyColour);
  if (y0 + kKeyBottom - ly >= kLabelHeight) axis_label(y0 + kKeyBottom + 3, "0", kPolicyColour);
  axis_label(base - kBarRoom + 8, std::to_string(scale) + "/bar", kAdmittedColour, "scale");
  axis_label(base + kBarRoom, std::to_string(scale) + "/bar", kDeniedColour, "scale");

  open_plot(y0, y1 - y0);
  // The busiest key's count as a shaded step: a step, not a line, so that it never reads as
  // the dashed limit drawn over it. Between admissions it breaks (the count is not known
  // exactly there: it decays as admissions leave the window) rather than drop to 0.
  std::ostringstream area, edge;
  for (size_t j = 0; j < c_.count; ++j) {
    if (b.key_peak[j] == 0) continue;
    const double y = y_key(static_cast<double>(b.key_peak[j]));
    const double xa = bar_x(j), xb = bar_x(j + 1), y_zero = y_key(0);
    area << " M" << f1(xa) << "," << f1(y_zero) << " V" << f1(y) << " H" << f1(xb) << " V"
         << f1(y_zero) << " Z";
    edge << " M" << f1(xa) << "," << f1(y) << " H" << f1(xb);
  }
  o_ << "<path class=\"rate-area\" fill=\"" << kKeyFill << "\" stroke=\"none\" d=\"" << area.str()
     << "\"/>\n<path class=\"rate\" fill=\"none\" stroke=\"" << kKeyColour
     << "\" stroke-width=\"1.6\" vector-effect=\"non-scaling-stroke\" d=\"" << edge.str() << "\"/>\n";
  o_ << "<line class=\"policy-rate\" x1=\"" << f1(kLeft) << "\" y1=\"" << f1(ly) << "\" x2=\""
     << f1(kLeft + kPlotWidth) << "\" y2=\"" << f1(ly) << "\" stroke=\"" << kPolicyColour
     << "\" stroke-width=\"1.4\" stroke-dasharray=\"5,3\" vector-effect=\"non-scaling-stroke\"/>\n";
  o_ << "<line x1=\"" << f1(kLeft) << "\" y1=\"" << f1(base) << "\" x2=\"" << f1(kLeft + kPlotWidth)
     << "\" y2=\"" << f1(base) << "\" stroke=\"#999999\" stroke-width=\"0.8\" "
     << "vector-effect=\"non-scaling-stroke\"/>\n";
  bars("admitted", kAdmittedColour, b.admitted, scale, base, kBarRoom, true);
  bars("denied", kDeniedColour, b.denied, scale, base, kBarRoom, false);
  if (a.policy.algorithm() == Algorithm::kLeakyBucket) {
    const double row = y0 + kLaneHeight + kDepartureHeight - 6;
    o_ << "<line x1=\"" << f1(kLeft) << "\" y1=\"" << f1(row) << "\" x2=\"" << f1(kLeft + kPlotWidth)
       << "\" y2=\"" << f1(row) << "\" stroke=\"#bbbbbb\" stroke-width=\"0.8\" "
       << "vector-effect=\"non-scaling-stroke\"/>\n";
    bars("departures", kDepartureColour, b.departed, std::max<int64_t>(1, max_of(b.departed)), row,
         24, true);
    close_plot();
    axis_label(row - 16, std::to_string(max_of(b.departed)) + "/bar", kDepartureColour, "scale");
  } else {
    close_plot();
  }
  o_ << "</g>\n";
}

std::string Chart::render() {
  const size_t lanes = r_.algorithms.size();
  std::vector<double> lane_top(lanes + 1, kTop + kAggregateHeight);
  for (size_t i = 0; i < lanes; ++i) {
    const bool leaky = r_.algorithms[i].policy.algorithm() == Algorithm::kLeakyBucket;
    lane_top[i + 1] = lane_top[i] + kLaneHeight + (leaky ? kDepartureHeight : 0);
  }
  const double plot_bottom = lane_top[lanes];
  header(plot_bottom + kBottom);
  legend();
  o_ << "<rect x=\"0\" y=\"" << f1(kTop) << "\" width=\"" << num(kWidth) << "\" height=\""
     << num(kAggregateHeight) << "\" fill=\"#fbfbf6\"/>\n";
  for (size_t i = 0; i < lanes; ++i) {
    o_ << "<rect x=\"0\" y=\"" << f1(lane_top[i]) << "\" width=\"" << num(kWidth) << "\" height=\""
       << num(lane_top[i + 1] - lane_top[i]) << "\" fill=\"" << (i % 2 == 0 ? "#f4f6f8" : "#ffffff")
       << "\"/>\n";
  }
  time_axis(plot_bottom);
  aggregate();
  for (size_t i = 0; i < lanes; ++i) lane(i, lane_top[i], lane_top[i + 1]);
  o_ << "</svg>\n";
  return o_.str();
}

}  // namespace

std::string render_svg(const Report& report, Micros bar_width) {
  return Chart(report, bar_width).render();
}

}  // namespace ratelimit::sim
