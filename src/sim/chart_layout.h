// chart_layout.h — the arithmetic behind ratelimit-sim's chart (svg.cc): which bars to draw,
// how wide, on which scales, and how to keep marks and labels from hiding one another.
//
// Why apart from the drawing: each of these choices once produced a chart that misled (bars
// "2.048 s" wide, five equal lines drawn as one, a title running off the canvas), and as pure
// functions they are tested on their own (tests/sim/chart_layout_test.cc) while the browser
// test (tests/sim/chart_pixels.py) checks what a person finally sees.
// Invariants: bar widths are 1, 2 or 5 x 10^k µs and a whole number of the replay's bins, so
// every bar sums whole bins and no count is split or lost; nothing here changes a figure of
// the Report. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/clock.h"
#include "replay.h"

namespace ratelimit::sim {

// One lane's bins regrouped into the chart's bars.
struct LaneBars {
  std::vector<int64_t> admitted, denied, departed, key_peak;
};

// The chart's bars: `count` bars of `bar_us` from `t0_us` (the run's start) to `t1_us`.
struct ChartBars {
  int64_t t0_us = 0;
  int64_t t1_us = 1;
  int64_t bar_us = 1;
  size_t count = 0;
  std::vector<int64_t> offered;  // admitted + denied of the first lane (every lane sees all)
  std::vector<LaneBars> lanes;   // report order
};

// The smallest width w >= max(target_us, bin_us) of the form 1, 2 or 5 x 10^k µs that is a
// whole multiple of bin_us (bin_us > 0). RateBins widths (1 or 2 x 10^k) always have one.
int64_t nice_bar_width(int64_t bin_us, int64_t target_us);

// Bars about `bar_pixels` wide across `plot_width` pixels, at least `min_bar` long.
ChartBars chart_bars(const Report& report, Micros min_bar, double plot_width, double bar_pixels);

// Display positions for values that share one axis: each y is kept, except that ys closer
// than `gap` to one another are fanned out around their mean, `gap` apart, in index order
// (so five equal lines show as five parallel lines instead of one); a fanned group is then
// shifted as a whole to lie within [lo, hi]. Returns a y per input.
std::vector<double> fan_out(const std::vector<double>& ys, double gap, double lo, double hi);

// Estimated width in pixels of `text` in DejaVu Sans at `font_px` (bold or not): an upper
// bound for ASCII text within about 10 %, measured against Chromium (chart_pixels.py checks
// the result in a browser).
double text_width(std::string_view text, double font_px, bool bold);

// `text` cut to fit `max_px` (with "…" at the end when cut, never inside a UTF-8 sequence).
std::string fit_text(std::string_view text, double max_px, double font_px, bool bold);

// Smallest 1, 2 or 5 x 10^k that is >= raw (raw > 0): a grid step.
// The bars' figures as one JSON object (t0_us, t1_us, bar_us, absolute, offered, and per lane
// its algorithm, limit, peak window and bar counts): the SVG's <metadata class="chart-data">,
// read by the HTML report's hover and by scripts. Numbers and algorithm names only: nothing
// in it needs escaping in XML.
std::string chart_metadata(const Report& report, const ChartBars& bars);

double nice_step(double raw);

// Smallest of 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 x 10^k that is >= v (v > 0): an axis top.
double nice_ceiling(double v);

}  // namespace ratelimit::sim
