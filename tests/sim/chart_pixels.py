#!/usr/bin/env python3
"""Renders a ratelimit-sim SVG chart in headless Chromium and checks the pixels where bars
must be: for every lane, the tallest admitted, denied and departure bars (read from the SVG)
must show their colour at their centre on screen, and so must the aggregate panel's offered
bars. Catches what the XML alone cannot: bars hidden under other shapes, drawn off the
canvas, thinner than a pixel, or not drawn at all by a real browser.

usage: chart_pixels.py CHART.svg OUT_DIR [--html REPORT.html]
Prints one line per check and exits 1 if any fails, 2 if Chromium cannot render. Every wait
is bounded (Chromium gets 90 s). The PNG is decoded with zlib alone (no imaging library)."""
import os
import struct
import subprocess
import sys
import tempfile
import xml.dom.minidom
import zlib

CHROMIUM = os.environ.get("CHROMIUM", "chromium")


def screenshot(path, out_png, width, height):
    profile = tempfile.mkdtemp(prefix="ratelimit-sim-chromium-")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--hide-scrollbars", "--force-device-scale-factor=1",
           "--user-data-dir=" + profile, "--screenshot=" + out_png,
           "--window-size=%d,%d" % (width, height), "file://" + os.path.abspath(path)]
    try:
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=90,
                       check=False)
    except subprocess.TimeoutExpired:
        print("FAIL chromium did not finish within 90 s")
        sys.exit(2)
    finally:
        subprocess.run(["rm", "-rf", profile], check=False)
    if not os.path.exists(out_png):
        print("FAIL chromium wrote no screenshot: " + " ".join(cmd))
        sys.exit(2)


def read_png(path):
    """Returns (width, height, rows) with rows[y][x] = (r, g, b) for 8-bit RGB/RGBA PNGs."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, ctype = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), "unsupported PNG (depth %d type %d)" % (depth, ctype)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    bpp = 3 if ctype == 2 else 4
    stride = width * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        f = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows


def hex_rgb(colour):
    return tuple(int(colour[k:k + 2], 16) for k in (1, 3, 5))


def close(a, b, tolerance=60):
    return all(abs(p - q) <= tolerance for p, q in zip(a, b))


def tallest(group, n=3):
    rects = []
    for r in group.getElementsByTagName("rect"):
        x, y = float(r.getAttribute("x")), float(r.getAttribute("y"))
        w, h = float(r.getAttribute("width")), float(r.getAttribute("height"))
        rects.append((h, x, y, w))
    rects.sort(reverse=True)
    return rects[:n]


def main():
    svg_path, out_dir = sys.argv[1], sys.argv[2]
    html_path = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--html" else None
    doc = xml.dom.minidom.parse(svg_path)
    root = doc.documentElement
    width, height = int(float(root.getAttribute("width"))), int(float(root.getAttribute("height")))
    png = os.path.join(out_dir, "chart.png")
    screenshot(svg_path, png, width, height)
    w, h, rows = read_png(png)
    failures = 0
    checks = 0

    def check(ok, what):
        nonlocal failures, checks
        checks += 1
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures += 1

    check(w >= width and h >= height, "screenshot %dx%d covers the chart %dx%d" % (w, h, width, height))
    for g in root.getElementsByTagName("g"):
        cls = g.getAttribute("class")
        if cls not in ("admitted", "denied", "departures", "offered"):
            continue
        parent = g.parentNode
        where = parent.getAttribute("id") or "?"
        colour = hex_rgb(g.getAttribute("fill"))
        for bh, x, y, bw in tallest(g):
            if bh < 2 or bw < 1:
                continue  # too small to hold a solid pixel after anti-aliasing
            cx, cy = int(x + bw / 2), int(y + bh / 2)
            got = rows[cy][cx] if cy < h and cx < w else None
            check(got is not None and close(got, colour),
                  "%s %s bar at (%d,%d) %.1fx%.1f px shows %s (want %s)" %
                  (where, cls, cx, cy, bw, bh, got, colour))
    # Every lane must hold some admitted colour on screen (bars visible at any scale).
    for g in root.getElementsByTagName("g"):
        if g.getAttribute("class") != "lane":
            continue
        top, base = int(float(g.getAttribute("data-top"))), int(float(g.getAttribute("data-baseline")))
        green = hex_rgb("#1a9850")
        n = sum(1 for y in range(top, min(base, h)) for x in range(236, min(w, 1172))
                if close(rows[y][x], green, 40))
        check(n >= 4, "%s: %d admitted-green pixels above the baseline" % (g.getAttribute("id"), n))
    if html_path:
        hpng = os.path.join(out_dir, "report.png")
        screenshot(html_path, hpng, 1300, 2400)
        hw, hh, hrows = read_png(hpng)
        green, red = hex_rgb("#1a9850"), hex_rgb("#d73027")
        ng = sum(1 for y in range(0, hh, 2) for x in range(0, hw, 2) if close(hrows[y][x], green, 40))
        nr = sum(1 for y in range(0, hh, 2) for x in range(0, hw, 2) if close(hrows[y][x], red, 40))
        check(ng > 20 and nr > 20, "HTML report shows the chart (%d green, %d red samples)" % (ng, nr))
    print("%d checks, %d failed" % (checks, failures))
    sys.exit(1 if failures else 0)


main()
