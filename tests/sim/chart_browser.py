#!/usr/bin/env python3
"""Headless Chromium for the chart tests (chart_pixels.py): a screenshot of a page, the DOM
a page leaves after its scripts ran, and a PNG decoder in zlib alone (no imaging library).
Every wait is bounded: Chromium gets 90 s, then the caller exits 2."""
import os
import struct
import subprocess
import sys
import tempfile
import xml.dom.minidom
import zlib

CHROMIUM = os.environ.get("CHROMIUM", "chromium")


def _chromium(args, path, capture):
    profile = tempfile.mkdtemp(prefix="ratelimit-sim-chromium-")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--hide-scrollbars", "--force-device-scale-factor=1",
           "--user-data-dir=" + profile] + args + ["file://" + os.path.abspath(path)]
    try:
        done = subprocess.run(cmd, stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=90, check=False)
    except subprocess.TimeoutExpired:
        print("FAIL chromium did not finish within 90 s")
        sys.exit(2)
    finally:
        subprocess.run(["rm", "-rf", profile], check=False)
    return cmd, done.stdout.decode("utf-8", "replace") if capture else ""


def screenshot(path, out_png, width, height):
    cmd, _ = _chromium(["--screenshot=" + out_png, "--window-size=%d,%d" % (width, height)], path,
                       False)
    if not os.path.exists(out_png):
        print("FAIL chromium wrote no screenshot: " + " ".join(cmd))
        sys.exit(2)


def dump_dom(path, width=1300, height=1200):
    """The page's DOM once its scripts have run (they must finish synchronously)."""
    cmd, out = _chromium(["--dump-dom", "--virtual-time-budget=3000",
                          "--window-size=%d,%d" % (width, height)], path, True)
    if "<html" not in out:
        print("FAIL chromium dumped no DOM: " + " ".join(cmd))
        sys.exit(2)
    return out


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


