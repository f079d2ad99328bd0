// html_script.h — the script the HTML report (html.cc) carries inline to make its charts
// answer the mouse: hover shows the figures of the bar under the pointer, the wheel and a
// dragged range zoom the time axis, a double click (or the Reset button) zooms back out.
//
// Why a script, and why inline: a report is read by people who want to know "what happened
// at 12:03:10", which a static picture cannot answer at every scale. The page still fetches
// nothing (the script is part of it). It reads only what the SVG carries (svg.cc): the plot
// geometry in the root's data-* attributes, the bars' figures in <metadata class="chart-data">,
// and it zooms by narrowing each <svg class="plot">'s viewBox — it never recomputes a figure.
// For tests, window.ratelimitSimCharts lists one controller per chart with setView(t0, t1),
// hoverAt(t) and view() (tests/sim/chart_pixels.py drives them, and real mouse events, in
// headless Chromium).
#pragma once

#include <string_view>

namespace ratelimit::sim {

// The script's text (no <script> tags), and the style its tooltip and buttons need.
std::string_view chart_script();
std::string_view chart_script_style();

}  // namespace ratelimit::sim
