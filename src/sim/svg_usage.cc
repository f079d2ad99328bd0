// svg_usage.cc — render_usage_svg (what and why in svg_usage.h).
#include "svg_usage.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "chart_layout.h"
#include "render.h"

namespace ratelimit::sim {
namespace {

constexpr double kLeft = 70, kTop = 40, kPlotW = 640, kPlotH = 220, kWidth = 770;
constexpr const char* kColours[kStrategies] = {"#1f77b4", "#ff7f0e", "#2ca02c"};

std::string fmt(double v, const char* f = "%.1f") {
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

void text(std::ostringstream& o, double x, double y, const std::string& s, const char* anchor = "start") {
  o << "<text x=\"" << fmt(x) << "\" y=\"" << fmt(y) << "\" text-anchor=\"" << anchor << "\">" << xml_escape(s)
    << "</text>\n";
}

// The most held in each pixel column, as polyline points.
std::string line_points(const StrategyResult& r, double end_us, double top) {
  std::vector<int64_t> column(static_cast<size_t>(kPlotW), -1);
  for (const auto& [t, used] : r.held) {
    const auto x = std::min<size_t>(column.size() - 1, static_cast<size_t>(static_cast<double>(t) / end_us * kPlotW));
    column[x] = std::max(column[x], used);
  }
  std::string points;
  for (size_t x = 0; x < column.size(); ++x) {
    if (column[x] < 0) continue;
    points += fmt(kLeft + static_cast<double>(x)) + "," +
              fmt(kTop + kPlotH - static_cast<double>(column[x]) / top * kPlotH) + " ";
  }
  return points;
}

}  // namespace

std::string render_usage_svg(const UsageReport& report) {
  double end_us = 1, most = static_cast<double>(report.limit);
  for (const StrategyResult& r : report.results) {
    if (!r.held.empty()) end_us = std::max(end_us, static_cast<double>(r.held.back().first));
    most = std::max(most, static_cast<double>(r.max_held));
  }
  const double top = nice_ceiling(most * 1.05);
  const double height = kTop + kPlotH + 28 + 16 * kStrategies;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"ratelimit-sim-usage\" width=\"" << kWidth
    << "\" height=\"" << fmt(height, "%.0f") << "\" viewBox=\"0 0 " << kWidth << " " << fmt(height, "%.0f")
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  text(o, 10, 16,
       "units the policy holds (" + std::to_string(report.limit) + " per " +
           fmt(static_cast<double>(report.window.count()) / 1e6, "%.3g") +
           " s): above the dashed limit the key is in debt and refuses");
  const double step = nice_step(top / 4);
  for (double v = 0; v <= top + step / 2; v += step) {
    const double y = kTop + kPlotH - v / top * kPlotH;
    o << "<line x1=\"" << kLeft << "\" y1=\"" << fmt(y) << "\" x2=\"" << kLeft + kPlotW << "\" y2=\"" << fmt(y)
      << "\" stroke=\"#e0e0e0\"/>\n";
    text(o, kLeft - 5, y + 4, fmt(v, "%.0f"), "end");
  }
  const double limit_y = kTop + kPlotH - static_cast<double>(report.limit) / top * kPlotH;
  o << "<line x1=\"" << kLeft << "\" y1=\"" << fmt(limit_y) << "\" x2=\"" << kLeft + kPlotW << "\" y2=\""
    << fmt(limit_y) << "\" stroke=\"#000\" stroke-dasharray=\"6,4\"/>\n";
  const double tstep = nice_step(end_us / 1e6 / 6);
  for (double s = 0; s * 1e6 <= end_us; s += tstep) {
    text(o, kLeft + s * 1e6 / end_us * kPlotW, kTop + kPlotH + 16, fmt(s, "%.0f") + " s", "middle");
  }
  for (size_t k = 0; k < kStrategies; ++k) {
    const StrategyResult& r = report.results[k];
    o << "<polyline fill=\"none\" stroke=\"" << kColours[k] << "\" stroke-width=\"1.2\" points=\""
      << line_points(r, end_us, top) << "\"/>\n";
    const double y = kTop + kPlotH + 26 + 16 * static_cast<double>(k);
    o << "<rect x=\"" << fmt(kLeft) << "\" y=\"" << fmt(y) << "\" width=\"12\" height=\"12\" fill=\"" << kColours[k]
      << "\"/>\n";
    text(o, kLeft + 16, y + 11,
         std::string(strategy_name(r.strategy)) + ": deepest debt " + std::to_string(r.over_limit) + ", in debt " +
             fmt(100 * r.debt_fraction) + " % of the run");
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace ratelimit::sim
