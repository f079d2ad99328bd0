#!/usr/bin/env python3
"""Parses an SVG written by ratelimit-sim as XML (failing on malformed XML) and prints, as
JSON, its root element, the aggregate panel and per lane (<g class="lane">): the id, the
lane's box (data-top, data-baseline, data-bottom), per kind of bar (admitted, denied,
departures) the number of bars, the sum and largest of their data-count and the extent of
their rectangles, the bars' shared scale (data-scale), and the number of per-key lines.
Used by tests/sim/render_test.cc."""
import json
import sys
import xml.dom.minidom


def bars(group):
    out = {"bars": 0, "count": 0, "max_count": 0, "min_y": None, "max_y": None, "max_h": 0.0,
           "min_x": None, "max_x": None}
    for r in group.getElementsByTagName("rect"):
        x, y = float(r.getAttribute("x")), float(r.getAttribute("y"))
        w, h = float(r.getAttribute("width")), float(r.getAttribute("height"))
        out["bars"] += 1
        out["count"] += int(r.getAttribute("data-count"))
        out["max_count"] = max(out["max_count"], int(r.getAttribute("data-count")))
        out["min_y"] = y if out["min_y"] is None else min(out["min_y"], y)
        out["max_y"] = y + h if out["max_y"] is None else max(out["max_y"], y + h)
        out["min_x"] = x if out["min_x"] is None else min(out["min_x"], x)
        out["max_x"] = x + w if out["max_x"] is None else max(out["max_x"], x + w)
        out["max_h"] = max(out["max_h"], h)
    return out


doc = xml.dom.minidom.parse(sys.argv[1])
root = doc.documentElement
lanes = []
aggregate = None
for g in root.getElementsByTagName("g"):
    kind = g.getAttribute("class")
    if kind == "panel" and g.getAttribute("id") == "aggregate":
        aggregate = {"top": float(g.getAttribute("data-top")),
                     "bottom": float(g.getAttribute("data-bottom")),
                     "lines": sum(1 for p in g.getElementsByTagName("polyline")
                                  if p.getAttribute("class") == "admitted-rate")}
        for child in g.getElementsByTagName("g"):
            if child.getAttribute("class") == "offered":
                aggregate["offered"] = bars(child)
    if kind != "lane":
        continue
    lane = {"id": g.getAttribute("id"), "top": float(g.getAttribute("data-top")),
            "baseline": float(g.getAttribute("data-baseline")),
            "bottom": float(g.getAttribute("data-bottom")),
            "scale": int(g.getAttribute("data-scale") or 0)}
    for child in g.getElementsByTagName("g"):
        c = child.getAttribute("class")
        if c in ("admitted", "denied", "departures"):
            lane[c] = bars(child)
    lane["rate"] = sum(1 for p in g.getElementsByTagName("path") if p.getAttribute("class") == "rate")
    lanes.append(lane)
texts = [t.firstChild.data for t in root.getElementsByTagName("text") if t.firstChild]
print(json.dumps({"root": root.tagName, "width": root.getAttribute("width"),
                  "plot_left": float(root.getAttribute("data-plot-left")),
                  "height": root.getAttribute("height"), "lanes": lanes, "aggregate": aggregate,
                  "text": " ".join(texts), "texts": texts}))
