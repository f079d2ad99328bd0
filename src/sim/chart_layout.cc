// chart_layout.cc — bar widths, regrouping, fanned-out lines and text fitting for the chart
// (see chart_layout.h).
#include "chart_layout.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include "render.h"

namespace ratelimit::sim {

int64_t nice_bar_width(int64_t bin_us, int64_t target_us) {
  bin_us = std::max<int64_t>(1, bin_us);
  const int64_t want = std::max(bin_us, target_us);
  for (int64_t p = 1; p <= INT64_MAX / 50; p *= 10) {
    for (int64_t m : {1, 2, 5}) {
      const int64_t w = m * p;
      if (w >= want && w % bin_us == 0) return w;
    }
  }
  return (want + bin_us - 1) / bin_us * bin_us;  // unreachable for RateBins widths
}

namespace {

void regroup(const RateBins& b, const ChartBars& c, LaneBars& out) {
  out.admitted.assign(c.count, 0);
  out.denied.assign(c.count, 0);
  out.departed.assign(c.count, 0);
  out.key_peak.assign(c.count, 0);
  for (size_t k = 0; k < b.admitted.size(); ++k) {
    const int64_t t = b.origin_us + static_cast<int64_t>(k) * b.width_us;
    const auto j = static_cast<size_t>(std::clamp<int64_t>(
        (t - c.t0_us) / c.bar_us, 0, static_cast<int64_t>(c.count) - 1));
    out.admitted[j] += b.admitted[k];
    out.denied[j] += b.denied[k];
    out.departed[j] += b.departed[k];
    out.key_peak[j] = std::max(out.key_peak[j], b.key_peak[k]);
  }
}

}  // namespace

ChartBars chart_bars(const Report& report, Micros min_bar, double plot_width, double bar_pixels) {
  ChartBars c;
  c.t0_us = std::min(report.start_us, report.first_us);
  int64_t t_end = report.last_us;
  for (const AlgorithmResult& a : report.algorithms) {
    if (a.departures > 0) t_end = std::max(t_end, a.last_departure_us);
  }
  int64_t bin_us = 1'000;
  for (const ChartLane& lane : report.chart.lanes) {
    if (!lane.bins.admitted.empty()) bin_us = std::max(bin_us, lane.bins.width_us);
  }
  const double span_us = static_cast<double>(std::max<int64_t>(t_end - c.t0_us, 1));
  const auto target =
      std::max(static_cast<int64_t>(span_us * bar_pixels / plot_width), min_bar.count());
  c.bar_us = nice_bar_width(bin_us, target);
  c.count = static_cast<size_t>((t_end - c.t0_us) / c.bar_us + 1);
  c.t1_us = c.t0_us + static_cast<int64_t>(c.count) * c.bar_us;
  for (size_t i = 0; i < report.algorithms.size(); ++i) {
    regroup(report.chart.lanes[i].bins, c, c.lanes.emplace_back());
  }
  c.offered.assign(c.count, 0);
  if (!c.lanes.empty()) {
    for (size_t j = 0; j < c.count; ++j) c.offered[j] = c.lanes[0].admitted[j] + c.lanes[0].denied[j];
  }
  return c;
}

std::vector<double> fan_out(const std::vector<double>& ys, double gap, double lo, double hi) {
  std::vector<size_t> order(ys.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ys[a] < ys[b]; });
  std::vector<double> out(ys);
  for (size_t first = 0; first < order.size();) {
    // A cluster: consecutive values (by y) each closer than `gap` to the previous.
    size_t last = first;
    while (last + 1 < order.size() && ys[order[last + 1]] - ys[order[last]] < gap) ++last;
    const size_t n = last - first + 1;
    if (n > 1) {
      double mean = 0;
      std::vector<size_t> members(order.begin() + static_cast<std::ptrdiff_t>(first),
                                  order.begin() + static_cast<std::ptrdiff_t>(last) + 1);
      for (size_t m : members) mean += ys[m];
      mean /= static_cast<double>(n);
      std::sort(members.begin(), members.end());  // index order: the same lines on top everywhere
      const double half = gap * static_cast<double>(n - 1) / 2;
      mean = std::clamp(mean, lo + half, std::max(lo + half, hi - half));
      for (size_t k = 0; k < n; ++k) out[members[k]] = mean - half + gap * static_cast<double>(k);
    }
    first = last + 1;
  }
  return out;
}

double text_width(std::string_view text, double font_px, bool bold) {
  double em = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      if ((c & 0xC0) == 0x80) continue;  // a continuation byte: counted with its lead byte
      em += 0.8;
    } else if (std::string_view(" .,:;'!|il").find(static_cast<char>(c)) != std::string_view::npos) {
      em += 0.32;
    } else if (std::string_view("ftrjI()[]/-{}\"").find(static_cast<char>(c)) != std::string_view::npos) {
      em += 0.42;
    } else if (std::string_view("mwMW%@").find(static_cast<char>(c)) != std::string_view::npos) {
      em += 0.98;
    } else if (c >= 'A' && c <= 'Z') {
      em += 0.74;
    } else {
      em += 0.64;
    }
  }
  return em * font_px * (bold ? 1.1 : 1.0);
}

std::string fit_text(std::string_view text, double max_px, double font_px, bool bold) {
  if (text_width(text, font_px, bold) <= max_px) return std::string(text);
  const std::string_view ellipsis = "\xE2\x80\xA6";  // …
  const double room = max_px - text_width(ellipsis, font_px, bold);
  size_t end = 0;
  for (size_t i = 0; i < text.size();) {
    size_t next = i + 1;
    while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) ++next;
    if (text_width(text.substr(0, next), font_px, bold) > room) break;
    end = next;
    i = next;
  }
  return std::string(text.substr(0, end)) + std::string(ellipsis);
}

double nice_step(double raw) {
  double p = 1e-6;
  while (p * 10 <= raw) p *= 10;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10 * p;
}

double nice_ceiling(double v) {
  double p = 1e-6;
  while (p * 10 <= v) p *= 10;
  for (double m : {1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

std::string chart_metadata(const Report& report, const ChartBars& bars) {
  nlohmann::json j;
  j["t0_us"] = bars.t0_us;
  j["t1_us"] = bars.t1_us;
  j["bar_us"] = bars.bar_us;
  j["absolute"] = bars.t0_us >= kEpochTimesFromUs;
  j["offered"] = bars.offered;
  for (size_t i = 0; i < bars.lanes.size(); ++i) {
    const AlgorithmResult& a = report.algorithms[i];
    j["lanes"].push_back({{"algorithm", algorithm_name(a.policy.algorithm())},
                          {"limit", a.policy.limit()},
                          {"peak_window_us", a.peak_window.count()},
                          {"admitted", bars.lanes[i].admitted},
                          {"denied", bars.lanes[i].denied},
                          {"departed", bars.lanes[i].departed},
                          {"key_peak", bars.lanes[i].key_peak}});
  }
  return j.dump();  // numbers and algorithm names only: nothing to escape in XML
}

}  // namespace ratelimit::sim
