#!/usr/bin/env python3
"""Looks at a ratelimit-sim chart the way a person does, in headless Chromium, and checks
what the XML alone cannot show:
  - bars: the tallest admitted, denied, departure and offered bars show their colour on screen;
  - text: every label lies inside the canvas (a long title once ran off it) and no two labels
    overlap (a lane title once sat on its axis label) — boxes as the browser lays them out;
  - "all keys": every algorithm's admitted line is visible (five equal lines once drew as one);
  - the busiest key's count is a shaded step, not a line that reads like the dashed limit;
    where it reaches the limit the dashed line still shows; the limit's label is not covered;
  - admitted and denied bars share one labelled scale: pixels per request match on screen;
  - a bar counts a 1, 2 or 5 x 10^k interval ("bar = 20ms", never "2.048s").
With --html REPORT.html it also drives the report's script with real mouse and wheel events:
hover shows the bar's figures, the wheel zooms around the pointer, a drag zooms to a range,
a double click resets.

usage: chart_pixels.py CHART.svg OUT_DIR [--html REPORT.html]
Prints one line per check; exits 1 if any fails, 2 if Chromium cannot render."""
import json
import os
import re
import sys
import xml.dom.minidom

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chart_browser import close, dump_dom, hex_rgb, read_png, screenshot, tallest  # noqa: E402

GREEN, RED = hex_rgb("#1a9850"), hex_rgb("#d73027")
KEY, KEY_FILL = hex_rgb("#253494"), hex_rgb("#c6d2ea")

failures = 0
checks = 0


def check(ok, what):
    global failures, checks
    checks += 1
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures += 1


def is_grey(p):
    return max(p) - min(p) < 25 and max(p) < 150


def result_json(dom):
    m = re.search(r'<pre id="test-result">(.*?)</pre>', dom, re.S)
    if not m:
        return None
    text = m.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
    return json.loads(text.replace("&amp;", "&"))


TEXT_BOXES = """<script>
(function () {
  var svg = document.querySelector('svg'), r0 = svg.getBoundingClientRect(), out = [];
  var texts = svg.querySelectorAll('text');
  for (var i = 0; i < texts.length; i++) {
    var t = texts[i];
    if (t.getAttribute('visibility') === 'hidden' || !t.textContent) continue;
    var b = t.getBoundingClientRect();
    out.push({text: t.textContent, cls: t.getAttribute('class') || '', x: b.left - r0.left,
              y: b.top - r0.top, w: b.width, h: b.height});
  }
  var pre = document.createElement('pre');
  pre.id = 'test-result';
  pre.textContent = JSON.stringify({width: r0.width, height: r0.height, texts: out});
  document.body.appendChild(pre);
})();
</script>"""


def text_checks(svg_path, out_dir, width, height):
    svg = open(svg_path, encoding="utf-8").read()
    svg = svg[svg.index("<svg"):]
    page = os.path.join(out_dir, "texts.html")
    with open(page, "w", encoding="utf-8") as f:
        f.write('<!DOCTYPE html><html><body style="margin:0">' + svg + TEXT_BOXES + "</body></html>")
    res = result_json(dump_dom(page, width + 50, height + 50))
    if res is None:
        check(False, "text boxes measured in the browser")
        return []
    texts = res["texts"]
    outside = [t for t in texts if t["x"] < -0.5 or t["y"] < -0.5 or t["x"] + t["w"] > width + 0.5
               or t["y"] + t["h"] > height + 0.5]
    check(not outside, "every label inside the %dx%d canvas%s" % (
        width, height, "" if not outside else ": " + "; ".join(
            "'%s' spans x %.0f..%.0f" % (t["text"][:50], t["x"], t["x"] + t["w"]) for t in outside[:3])))
    overlaps = []
    for i, a in enumerate(texts):
        for b in texts[i + 1:]:
            dx = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
            dy = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
            if dx > 1 and dy > 1:
                overlaps.append("'%s' and '%s'" % (a["text"][:40], b["text"][:40]))
    check(not overlaps, "no two labels overlap%s" % ("" if not overlaps else ": " + "; ".join(overlaps[:4])))
    return texts


def scan_height(rows, x, y_from, step, colour, limit):
    """Pixels of `colour` in column x from y_from going `step` (+1 down, -1 up)."""
    n, y = 0, y_from
    while 0 <= y < len(rows) and n < limit and close(rows[y][x], colour, 50):
        n += 1
        y += step
    return n


def main():
    svg_path, out_dir = sys.argv[1], sys.argv[2]
    html_path = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--html" else None
    root = xml.dom.minidom.parse(svg_path).documentElement
    width, height = int(float(root.getAttribute("width"))), int(float(root.getAttribute("height")))
    left = float(root.getAttribute("data-plot-left") or 236)
    right = left + float(root.getAttribute("data-plot-width") or 936)
    png = os.path.join(out_dir, "chart.png")
    screenshot(svg_path, png, width, height)
    w, h, rows = read_png(png)
    check(w >= width and h >= height, "screenshot %dx%d covers the chart %dx%d" % (w, h, width, height))

    groups = root.getElementsByTagName("g")
    for g in groups:
        cls = g.getAttribute("class")
        if cls not in ("admitted", "denied", "departures", "offered"):
            continue
        parent = g.parentNode
        while parent.getAttribute("id") == "" and parent.parentNode is not None and parent.parentNode.nodeType == 1:
            parent = parent.parentNode
        colour = hex_rgb(g.getAttribute("fill"))
        for bh, x, y, bw in tallest(g):
            if bh < 2 or bw < 1:
                continue  # too small to hold a solid pixel after anti-aliasing
            cx, cy = int(x + bw / 2), int(y + bh / 2)
            got = rows[cy][cx] if cy < h and cx < w else None
            check(got is not None and close(got, colour), "%s %s bar at (%d,%d) %.1fx%.1f px shows %s (want %s)"
                  % (parent.getAttribute("id") or "?", cls, cx, cy, bw, bh, got, colour))

    texts = text_checks(svg_path, out_dir, width, height)

    # Every algorithm's line in "all keys" shows.
    for g in groups:
        if g.getAttribute("id") != "aggregate":
            continue
        top, bottom = int(float(g.getAttribute("data-top"))) - 3, int(float(g.getAttribute("data-bottom"))) + 3
        seen = {}
        for p in g.getElementsByTagName("polyline"):
            c = hex_rgb(p.getAttribute("stroke"))
            seen[p.getAttribute("data-algorithm")] = sum(
                1 for y in range(top, min(bottom, h)) for x in range(int(left), min(int(right), w))
                if close(rows[y][x], c, 40))
        hidden = [a for a, n in seen.items() if n < 0.05 * (right - left)]
        check(seen and not hidden, "all keys: every algorithm's admitted line visible (%s)"
              % ", ".join("%s %d px" % kv for kv in seen.items()))

    data = None
    for m in root.getElementsByTagName("metadata"):
        if m.getAttribute("class") == "chart-data":
            data = json.loads(m.firstChild.data)
    check(data is not None, "the chart carries its bars' figures (metadata chart-data)")
    bar_text = [t["text"] for t in texts if t["text"].startswith("bar = ")]
    m = re.match(r"bar = (\d+)(us|ms|s)\b", bar_text[0]) if bar_text else None
    if m:
        us = int(m.group(1)) * {"us": 1, "ms": 1000, "s": 1000000}[m.group(2)]
        while us % 10 == 0:
            us //= 10
    check(m is not None and us in (1, 2, 5), "a bar counts a 1, 2 or 5 x 10^k interval (%s)" % (bar_text or "no legend"))

    for lane_index, g in enumerate(x for x in groups if x.getAttribute("class") == "lane"):
        name = g.getAttribute("id")
        top, base = int(float(g.getAttribute("data-top"))), int(float(g.getAttribute("data-baseline")))
        n = sum(1 for y in range(top, min(base, h)) for x in range(int(left), min(int(right), w))
                if close(rows[y][x], GREEN, 40))
        check(n >= 4, "%s: %d admitted-green pixels above the baseline" % (name, n))
        limit = [l for l in g.getElementsByTagName("line") if l.getAttribute("class") == "policy-rate"][0]
        ly = float(limit.getAttribute("y1"))
        # The shaded step: below the busiest key's level, the fill (a line alone reads as dashes).
        path = [p for p in g.getElementsByTagName("path") if p.getAttribute("class") == "rate"][0]
        levels = [(float(a), float(b), float(c)) for a, b, c in
                  re.findall(r"M([\d.]+),([\d.]+) [LH]\s*([\d.]+)", path.getAttribute("d"))]
        # Levels at or above the limit (at least a sixth of the view's height above its 0).
        filled = [close(rows[int(y + 4)][int((xa + xb) / 2)], KEY_FILL, 30)
                  for xa, y, xb in levels if xb - xa >= 2 and y <= ly + 1 and int(y + 4) < h]
        check(filled and sum(filled) >= 0.8 * len(filled),
              "%s: the busiest key is a shaded step, not a line (%d of %d bars filled)"
              % (name, sum(filled), len(filled)))
        cols = [x for xa, y, xb in levels if abs(y - ly) < 1 for x in range(int(xa) + 1, int(xb))]
        dashed = sum(1 for x in cols if any(is_grey(rows[y][x]) for y in range(int(ly) - 1, int(ly) + 2)))
        check(dashed >= 0.4 * len(cols),
              "%s: the dashed limit shows where the busiest key reaches it (%d of %d columns)"
              % (name, dashed, len(cols)))
        label = [t for t in texts if t["text"].startswith("limit ") and abs(t["y"] + t["h"] / 2 - ly) < 12]
        covered = -1
        if label:
            t = label[0]
            covered = sum(1 for y in range(int(t["y"]), int(t["y"] + t["h"])) for x in range(int(t["x"]), int(t["x"] + t["w"]))
                          if close(rows[y][x], KEY, 40))
        check(covered == 0, "%s: the limit's label is not covered by the busiest key's line (%d px)" % (name, covered))
        # One scale: pixels per request equal for the tallest admitted and denied bars.
        per = {}
        for cls, colour, step in (("admitted", GREEN, -1), ("denied", RED, 1)):
            bars = [x for x in g.getElementsByTagName("g") if x.getAttribute("class") == cls]
            best = max(bars[0].getElementsByTagName("rect"), key=lambda r: int(r.getAttribute("data-count")), default=None) if bars else None
            if best is not None and float(best.getAttribute("width")) >= 1.5:
                cx = int(float(best.getAttribute("x")) + float(best.getAttribute("width")) / 2)
                px = scan_height(rows, cx, base + (-2 if step < 0 else 2), step, colour, 200) + 2
                per[cls] = (px, int(best.getAttribute("data-count")))
        if len(per) == 2 and min(per["admitted"][1], per["denied"][1]) >= 3:
            a, d = per["admitted"][0] / per["admitted"][1], per["denied"][0] / per["denied"][1]
            check(abs(a - d) <= 0.2 * max(a, d) + 1.5 / min(per["admitted"][1], per["denied"][1]),
                  "%s: admitted and denied on one scale (%.2f vs %.2f px per request on screen)" % (name, a, d))
        scales = [t["text"] for t in texts if t["cls"] == "scale" and top <= t["y"] <= top + 200]
        check(any("/bar" in s for s in scales), "%s: the bars' scale is labelled with its unit (%s)" % (name, scales))

    if html_path:
        html_checks(html_path, out_dir)
    print("%d checks, %d failed" % (checks, failures))
    sys.exit(1 if failures else 0)


DRIVE = """<script>
(function () {
  var res = {};
  try {
    var c = window.ratelimitSimCharts && window.ratelimitSimCharts[0];
    res.controller = !!c;
    var svg = c ? c.svg : document.querySelector('svg');
    var best = null, rects = svg.querySelectorAll('g.offered rect');
    for (var i = 0; i < rects.length; i++) {
      if (!best || +rects[i].getAttribute('data-count') > +best.getAttribute('data-count')) best = rects[i];
    }
    var r = best.getBoundingClientRect(), cx = r.left + r.width / 2, cy = r.top + r.height / 2;
    res.count = +best.getAttribute('data-count');
    svg.dispatchEvent(new MouseEvent('mousemove', {clientX: cx, clientY: cy, bubbles: true}));
    var tip = svg.parentNode.querySelector('div.chart-tip');
    res.tip = tip && tip.style.display !== 'none' ? tip.textContent : null;
    res.width_before = r.width;
    for (var k = 0; k < 3; k++) {
      svg.dispatchEvent(new WheelEvent('wheel', {clientX: cx, clientY: cy, deltaY: -120, bubbles: true,
                                                 cancelable: true}));
    }
    var r2 = best.getBoundingClientRect();
    res.width_after = r2.width;
    res.shift = (r2.left + r2.width / 2) - cx;
    res.full = [+svg.getAttribute('data-t0-us'), +svg.getAttribute('data-t1-us')];
    res.view_wheel = c ? c.view() : null;
    var ticks = svg.querySelectorAll('#time-axis text.tick');
    res.ticks = Array.prototype.map.call(ticks, function (t) { return t.textContent; });
    svg.dispatchEvent(new MouseEvent('dblclick', {clientX: cx, clientY: cy, bubbles: true}));
    res.view_reset = c ? c.view() : null;
    var box = svg.getBoundingClientRect(), s = box.width / svg.viewBox.baseVal.width;
    var L = +svg.getAttribute('data-plot-left'), W = +svg.getAttribute('data-plot-width');
    var y = box.top + (+svg.getAttribute('data-plot-top') + 60) * s;
    var xa = box.left + (L + 0.25 * W) * s, xb = box.left + (L + 0.5 * W) * s;
    svg.dispatchEvent(new MouseEvent('mousedown', {clientX: xa, clientY: y, bubbles: true}));
    svg.dispatchEvent(new MouseEvent('mousemove', {clientX: xb, clientY: y, bubbles: true}));
    window.dispatchEvent(new MouseEvent('mouseup', {clientX: xb, clientY: y, bubbles: true}));
    res.view_drag = c ? c.view() : null;
  } catch (e) { res.error = String(e); }
  var pre = document.createElement('pre');
  pre.id = 'test-result';
  pre.textContent = JSON.stringify(res);
  document.body.appendChild(pre);
})();
</script>"""


def html_checks(html_path, out_dir):
    hpng = os.path.join(out_dir, "report.png")
    screenshot(html_path, hpng, 1300, 2400)
    hw, hh, hrows = read_png(hpng)
    ng = sum(1 for y in range(0, hh, 2) for x in range(0, hw, 2) if close(hrows[y][x], GREEN, 40))
    nr = sum(1 for y in range(0, hh, 2) for x in range(0, hw, 2) if close(hrows[y][x], RED, 40))
    check(ng > 20 and nr > 20, "HTML report shows the chart (%d green, %d red samples)" % (ng, nr))
    page = open(html_path, encoding="utf-8").read()
    driven = os.path.join(out_dir, "driven.html")
    with open(driven, "w", encoding="utf-8") as f:
        f.write(page.replace("</body>", DRIVE + "</body>"))
    res = result_json(dump_dom(driven)) or {}
    check(res.get("controller") and "error" not in res, "HTML report: the chart script runs (%s)" % res.get("error", "ok"))
    tip = res.get("tip") or ""
    check("offered %d" % res.get("count", -1) in tip and "fixed_window: admitted" in tip,
          "hover over the tallest bar shows its figures: %r" % tip[:120])
    full, wheel = res.get("full"), res.get("view_wheel")
    if full and wheel:
        ratio = (wheel[1] - wheel[0]) / (full[1] - full[0])
        check(0.4 < ratio < 0.6, "three wheel steps zoom to 0.8^3 of the axis (%.3f)" % ratio)
        grow = res["width_after"] / res["width_before"]
        check(abs(grow - 1 / 0.512) < 0.15, "the bar under the pointer widens on screen by %.2fx (want %.2f)"
              % (grow, 1 / 0.512))
        check(abs(res["shift"]) < 3, "the bar under the pointer stays under it (%.1f px)" % res["shift"])
        check(res.get("ticks") and len(res["ticks"]) >= 3, "the time axis is relabelled: %s" % res.get("ticks"))
    else:
        check(False, "the wheel zooms the chart")
    check(res.get("view_reset") == full, "a double click shows the whole run again")
    drag = res.get("view_drag")
    if full and drag:
        span = full[1] - full[0]
        want = [full[0] + 0.25 * span, full[0] + 0.5 * span]
        check(abs(drag[0] - want[0]) < 0.01 * span and abs(drag[1] - want[1]) < 0.01 * span,
              "a drag across a quarter of the axis zooms to it (%s, want %s)" % (drag, want))
    else:
        check(False, "a drag zooms the chart")


main()
