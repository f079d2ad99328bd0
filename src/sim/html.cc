// html.cc — ratelimit-sim's HTML report (render_html in render.h): one self-contained page
// for people who would rather look than read.
//
// Why its own file: the page is the table output's pieces (summary_lines, algorithm_rows,
// top_key_rows — the same text, so the two never disagree) set as HTML, with each run's SVG
// chart inline, made to answer hover and zoom by one inline script (html_script.h).
// Invariant: nothing is fetched — no external script, style, font or image — so the file can
// be mailed or opened offline and shows the same everywhere; without script the charts are
// the same static SVG as --svg writes.
#include <sstream>

#include "html_script.h"
#include "render.h"
#include "svg_distributed.h"
#include "timestamps.h"

namespace ratelimit::sim {
namespace {

void table(std::ostringstream& o, const std::vector<std::vector<std::string>>& rows,
           size_t first_numeric, const char* cls) {
  o << "<table class=\"" << cls << "\">\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    o << "<tr>";
    for (size_t c = 0; c < rows[r].size(); ++c) {
      const char* tag = r == 0 ? "th" : "td";
      o << "<" << tag << (c >= first_numeric ? " class=\"n\"" : "") << ">" << xml_escape(rows[r][c])
        << "</" << tag << ">";
    }
    o << "</tr>\n";
  }
  o << "</table>\n";
}

constexpr const char* kStyle = R"(
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; }
p.summary { margin: 4px 0; }
p.warning { margin: 6px 0; padding: 6px 10px; background: #fff3cd; border-left: 4px solid #e0a800; }
table { border-collapse: collapse; margin: 12px 0; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: left; }
th { background: #f4f6f8; } td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
div.chart { overflow-x: auto; margin: 12px 0; }
)";

}  // namespace

std::string render_html(const std::vector<Report>& reports, Micros bar_width) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<title>ratelimit-sim report</title>\n<style>" << kStyle << chart_script_style()
    << "</style>\n</head>\n<body>\n"
    << "<h1>ratelimit-sim report</h1>\n"
    << "<p>Each run replayed through the five algorithms of libratelimit, one state per key, "
       "with the library's own decision functions.</p>\n"
    << "<p class=\"hint\">On a chart: hover for the figures of each bar; scroll to zoom the time "
       "axis, drag across it to zoom to a range, double-click or Reset zoom to see the whole "
       "run.</p>\n";
  for (size_t i = 0; i < reports.size(); ++i) {
    const Report& r = reports[i];
    o << "<section id=\"run-" << i << "\">\n<h2>" << xml_escape(r.title) << "</h2>\n<p class=\"summary\">"
      << xml_escape(r.description) << "</p>\n";
    for (const std::string& line : summary_lines(r)) {
      const bool warning = line.rfind("warning: ", 0) == 0;
      o << "<p class=\"" << (warning ? "warning" : "summary") << "\">" << xml_escape(line) << "</p>\n";
    }
    table(o, algorithm_rows(r), 2, "algorithms");
    if (const std::string d = departures_line(r); !d.empty()) {
      o << "<p class=\"summary\">" << xml_escape(d) << "</p>\n";
    }
    if (r.top_keys.size() > 1) {
      o << "<p class=\"summary\">" << xml_escape(top_keys_heading(r)) << "</p>\n";
      table(o, top_key_rows(r), 1, "keys");
    }
    if (r.throttle) {
      o << "<p class=\"summary\">" << xml_escape(throttle_heading(r)) << "</p>\n";
      table(o, throttle_rows(r), 2, "throttling");
    }
    if (r.distributed) {
      o << "<p class=\"summary\">" << xml_escape(distributed_heading(r)) << "</p>\n";
      table(o, distributed_rows(r), 2, "distributed");
      o << "<div class=\"distributed-chart\">\n" << render_distributed_svg(*r.distributed) << "</div>\n";
    }
    std::string svg = render_svg(r, bar_width);
    if (svg.rfind("<?xml", 0) == 0) svg = svg.substr(svg.find('\n') + 1);
    o << "<div class=\"chart\">\n" << svg << "</div>\n</section>\n";
  }
  o << "<script>" << chart_script() << "</script>\n</body>\n</html>\n";
  return o.str();
}

}  // namespace ratelimit::sim
