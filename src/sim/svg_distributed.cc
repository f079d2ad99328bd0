// svg_distributed.cc — render_distributed_svg (what and why in svg_distributed.h).
#include "svg_distributed.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "render.h"

namespace ratelimit::sim {
namespace {

constexpr double kRow = 22, kTop = 44, kLabel = 10;
constexpr double kErrX = 230, kErrW = 250;   // worst window: under | over
constexpr double kCallX = 510, kCallW = 120;  // store calls / decision
constexpr double kLatX = 660, kLatW = 90;     // latency p99
constexpr double kWidth = 770;

std::string fmt(double v, const char* f = "%.3g") {
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

void bar(std::ostringstream& o, double x, double y, double w, const char* colour) {
  o << "<rect x=\"" << fmt(x, "%.1f") << "\" y=\"" << fmt(y + 5, "%.1f") << "\" width=\"" << fmt(std::max(0.0, w), "%.1f")
    << "\" height=\"12\" fill=\"" << colour << "\"/>\n";
}

void text(std::ostringstream& o, double x, double y, const std::string& s, const char* anchor = "start") {
  o << "<text x=\"" << fmt(x, "%.1f") << "\" y=\"" << fmt(y + 15, "%.1f") << "\" text-anchor=\"" << anchor << "\">"
    << xml_escape(s) << "</text>\n";
}

}  // namespace

std::string render_distributed_svg(const DistributedReport& report) {
  const auto& rows = report.results;
  int64_t err = 1;
  double calls = 1e-9, lat = 1;
  for (const DistributedResult& r : rows) {
    err = std::max({err, r.worst_window_over, r.worst_window_under, r.bound});
    calls = std::max(calls, r.decisions > 0 ? static_cast<double>(r.store_calls) / static_cast<double>(r.decisions) : 0.0);
    lat = std::max(lat, static_cast<double>(r.latency_p99_us));
  }
  const double height = kTop + kRow * static_cast<double>(rows.size()) + 10;
  const double mid = kErrX + kErrW / 2, half = kErrW / 2 - 30;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"ratelimit-sim-distributed\" width=\"" << kWidth
    << "\" height=\"" << fmt(height, "%.0f") << "\" viewBox=\"0 0 " << kWidth << " " << fmt(height, "%.0f")
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  text(o, kLabel, 0, "exact vs cheaper modes: error in the worst window, cost per decision");
  text(o, mid, 18, "worst window: under | over (units; | = bound)", "middle");
  text(o, kCallX, 18, "store calls / decision");
  text(o, kLatX, 18, "latency p99");
  o << "<line x1=\"" << mid << "\" y1=\"" << kTop << "\" x2=\"" << mid << "\" y2=\"" << fmt(height - 10, "%.0f")
    << "\" stroke=\"#888\"/>\n";
  double y = kTop;
  for (const DistributedResult& r : rows) {
    text(o, kLabel, y, r.algorithm + " " + r.mode);
    const double scale = half / static_cast<double>(err);
    bar(o, mid, y, static_cast<double>(r.worst_window_over) * scale, "#d62728");
    bar(o, mid - static_cast<double>(r.worst_window_under) * scale, y,
        static_cast<double>(r.worst_window_under) * scale, "#1f77b4");
    text(o, mid + static_cast<double>(r.worst_window_over) * scale + 3, y, "+" + std::to_string(r.worst_window_over));
    text(o, mid - static_cast<double>(r.worst_window_under) * scale - 3, y, "-" + std::to_string(r.worst_window_under),
         "end");
    if (r.bound >= 0 && r.mode != "exact") {
      // lease bounds the shortfall, the others the excess.
      const double bx = r.mode == "lease" ? mid - static_cast<double>(r.bound) * scale
                                          : mid + static_cast<double>(r.bound) * scale;
      o << "<line x1=\"" << fmt(bx, "%.1f") << "\" y1=\"" << fmt(y + 3, "%.1f") << "\" x2=\"" << fmt(bx, "%.1f")
        << "\" y2=\"" << fmt(y + 19, "%.1f") << "\" stroke=\"#000\" stroke-width=\"2\"/>\n";
    }
    const double per = r.decisions > 0 ? static_cast<double>(r.store_calls) / static_cast<double>(r.decisions) : 0;
    bar(o, kCallX, y, per / calls * (kCallW - 40), "#7f7f7f");
    text(o, kCallX + per / calls * (kCallW - 40) + 3, y, fmt(per, "%.3f"));
    const double l = static_cast<double>(r.latency_p99_us);
    bar(o, kLatX, y, l / lat * (kLatW - 45), "#2ca02c");
    text(o, kLatX + l / lat * (kLatW - 45) + 3, y, fmt(l / 1000, "%.1f") + "ms");
    y += kRow;
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace ratelimit::sim
