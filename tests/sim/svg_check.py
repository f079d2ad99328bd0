#!/usr/bin/env python3
"""Parses an SVG written by ratelimit-sim as XML (failing on malformed XML) and prints, as
JSON, its root element and per lane (<g class="lane">) the id and the number of admitted,
denied and departure marks and rate lines. Used by tests/sim/render_test.cc."""
import json
import sys
import xml.dom.minidom

doc = xml.dom.minidom.parse(sys.argv[1])
root = doc.documentElement
lanes = []
for g in root.getElementsByTagName("g"):
    if g.getAttribute("class") != "lane":
        continue
    lane = {"id": g.getAttribute("id"), "admitted": 0, "denied": 0, "departures": 0, "rate": 0}
    for child in g.getElementsByTagName("g"):
        kind = child.getAttribute("class")
        if kind in lane:
            lane[kind] += len(child.getElementsByTagName("line")) + len(child.getElementsByTagName("rect"))
    lane["rate"] = sum(1 for p in g.getElementsByTagName("polyline") if p.getAttribute("class") == "rate")
    lanes.append(lane)
texts = " ".join(t.firstChild.data for t in root.getElementsByTagName("text") if t.firstChild)
print(json.dumps({"root": root.tagName, "width": root.getAttribute("width"), "lanes": lanes,
                  "text": texts}))
