#!/usr/bin/env python3
"""Writes a realistic, deterministic nginx access log for trying ratelimit-sim: 10 minutes of
traffic from 8 clients (browsers loading pages with their assets, an API poller, a scraper
and a misbehaving bot), sorted by time.

usage: make_sample_access_log.py [--format combined|msec] > access.log

combined: nginx's default `combined` format, whose $time_local has one-second resolution.
msec:     the same requests with `$msec` appended (log_format sample '... "$http_user_agent"
          $msec'), so the millisecond times are kept.
The same seed always gives the same file (Python's random.Random(2024)), so docs/simulator.md's
example output can be reproduced."""
import argparse
import random
import time

START = 1714564800.0  # 2024-05-01T12:00:00Z
DURATION = 600.0
PAGES = ["/", "/products", "/products/42", "/cart", "/search?q=lamp", "/about", "/blog/rate-limits"]
ASSETS = ["/static/app.js", "/static/app.css", "/static/logo.svg", "/static/font.woff2",
          "/img/hero.jpg", "/img/thumb-1.jpg", "/img/thumb-2.jpg", "/img/thumb-3.jpg",
          "/favicon.ico", "/api/v1/cart", "/api/v1/recommendations"]
BROWSER = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
           "Chrome/124.0 Safari/537.36")


def browser(rng, ip, out, pages_per_minute):
    """Page views as a Poisson process; each loads the page, then its assets within ~400 ms."""
    t = START + rng.uniform(0, 20)
    while t < START + DURATION:
        page = rng.choice(PAGES)
        out.append((t, ip, "GET", page, 200, rng.randint(4000, 40000), "-", BROWSER))
        for _ in range(rng.randint(4, 12)):
            out.append((t + rng.uniform(0.02, 0.4), ip, "GET", rng.choice(ASSETS), 200,
                        rng.randint(300, 90000), "https://shop.example" + page, BROWSER))
        t += rng.expovariate(pages_per_minute / 60.0)


def poller(rng, ip, out, per_second):
    t = START
    while t < START + DURATION:
        out.append((t, ip, "GET", "/api/v1/orders?since=now", 200, 212, "-", "orders-sync/2.3"))
        t += 1.0 / per_second + rng.uniform(-0.01, 0.01)


def scraper(rng, ip, out):
    """Crawls in bursts: 20 pages as fast as it can, then a pause."""
    t = START + 30
    n = 0
    while t < START + DURATION:
        for _ in range(20):
            n += 1
            out.append((t, ip, "GET", "/products/%d" % (n % 500), 200, rng.randint(9000, 30000),
                        "-", "Mozilla/5.0 (compatible; PriceBot/1.1)"))
            t += rng.uniform(0.03, 0.08)
        t += rng.uniform(4, 9)


def bot(rng, ip, out):
    """Credential stuffing: ~30 logins a second for two minutes."""
    t = START + 240
    while t < START + 360:
        out.append((t, ip, "POST", "/login", 401, 54, "-", "python-requests/2.31"))
        t += rng.expovariate(30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--format", choices=["combined", "msec"], default="combined")
    args = ap.parse_args()
    rng = random.Random(2024)
    out = []
    for i, rate in enumerate([3, 4, 6, 2, 5]):
        browser(rng, "198.51.100.%d" % (10 + i), out, rate)
    poller(rng, "203.0.113.5", out, 4)
    scraper(rng, "192.0.2.77", out)
    bot(rng, "192.0.2.200", out)
    out.sort(key=lambda r: (r[0], r[1]))
    for t, ip, method, path, status, size, referer, agent in out:
        if t >= START + DURATION:
            continue
        stamp = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(int(t)))
        line = '%s - - [%s] "%s %s HTTP/1.1" %d %d "%s" "%s"' % (ip, stamp, method, path, status,
                                                               size, referer, agent)
        if args.format == "msec":
            line += " %.3f" % t
        print(line)


main()
