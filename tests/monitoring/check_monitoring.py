#!/usr/bin/env python3
"""check_monitoring.py — examples/monitoring against the real tools and the real ratelimitd.

Usage: check_monitoring.py rules|names SOURCE_DIR BIN_DIR

  rules  `promtool check rules` and `promtool test rules` on the alert rules, and every query of
         the Grafana dashboard checked by promtool as a recording rule (so a typo in PromQL fails)
  names  every metric the rules and the dashboard name is one ratelimitd exports: three real
         ratelimitd processes (memory store; Redis store with the denial cache, on a throwaway
         redis-server; --envoy-env with examples/envoy) each take a decision, and their /metrics
         pages are scraped. Loopback only, free ports, every wait bounded.
"""
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
from loopback import await_window_room, die_with_parent, free_port  # noqa: E402

MODE, SRC, BIN = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
MON = os.path.join(SRC, "examples/monitoring")
RULES, TESTS, DASHBOARD = "ratelimitd.rules.yml", "ratelimitd.rules.test.yml", "grafana-dashboard.json"
METRIC = re.compile(r"\b((?:ratelimitd|ratelimit_service)_[a-z0-9_]+)\b")


def dashboard_exprs():
    d = json.load(open(os.path.join(MON, DASHBOARD)))
    exprs = [t["expr"] for p in d["panels"] for t in p["targets"]]
    exprs += [a["expr"] for a in d.get("annotations", {}).get("list", []) if "expr" in a]
    exprs.append(d["templating"]["list"][1]["definition"].replace("label_values(", "").split(",")[0])
    assert len(d["panels"]) >= 8 and all(p["targets"] for p in d["panels"]), "a panel without a query"
    return exprs


def run(args, cwd=None):
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=60)
    print(r.stdout + r.stderr, end="")
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(args)} exited {r.returncode}")


def check_rules():
    run(["promtool", "check", "rules", RULES], cwd=MON)
    run(["promtool", "test", "rules", TESTS], cwd=MON)
    work = tempfile.mkdtemp(prefix="rl-mon-")
    try:
        rules = [{"record": f"dashboard:query_{i}",
                  "expr": e.replace("$__rate_interval", "5m").replace("$instance", ".*")}
                 for i, e in enumerate(dashboard_exprs())]
        path = os.path.join(work, "dashboard.rules.yml")
        json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(path, "w"))  # JSON is YAML
        run(["promtool", "check", "rules", path])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def request(port, method, path, body=None, timeout=5.0):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request(method, path, body=body)
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    return r.status, data


def wait_http(port, path, proc, seconds=15.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"FAIL: process exited {proc.returncode} before serving {path}")
        try:
            request(port, "GET", path, timeout=1.0)
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"FAIL: nothing served 127.0.0.1:{port}{path} within {seconds} s")


def names_on(text):
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            names.add(line.split()[2])
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, 1)[0])
    return names


def scrape_all(work):
    procs, exported = [], set()
    try:
        redis_port = free_port()
        redis = subprocess.Popen(preexec_fn=die_with_parent, args=["redis-server", "--bind", "127.0.0.1", "--port", str(redis_port), "--save", "",
                                  "--appendonly", "no", "--dir", work], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(redis)
        for _ in range(200):
            if subprocess.run(["redis-cli", "-p", str(redis_port), "ping"], capture_output=True).returncode == 0:
                break
            time.sleep(0.05)
        # The memory store with store.snapshot, so its families are exported too.
        snap = os.path.join(work, "counts.snap")
        for name, store in (("memory", f"{{ type: memory, snapshot: {{ path: {snap} }} }}"),
                            ("redis", f'{{ type: redis, url: "redis://127.0.0.1:{redis_port}/0", command_timeout: 2s, denial_cache: {{}} }}')):
            port = free_port()
            cfg = os.path.join(work, f"{name}.yaml")
            open(cfg, "w").write(f"listen: 127.0.0.1:{port}\nthreads: 1\nstore: {store}\n"
                                 "policies:\n  api: { algorithm: fixed_window, limit: 1, window: 60s }\n")
            p = subprocess.Popen(preexec_fn=die_with_parent, args=[os.path.join(BIN, "ratelimitd"), "--config", cfg],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(p)
            wait_http(port, "/healthz", p)
            await_window_room([60], 5)  # "api"'s 60 s window is the clock's minute: both in one
            for _ in range(2):  # one admitted, one denied
                request(port, "POST", "/v1/acquire", '{"key":"k","policy":"api"}')
            status, text = request(port, "GET", "/metrics")
            assert status == 200, f"/metrics answered {status}"
            exported |= names_on(text)
        http_port, grpc_port, debug_port = free_port(), free_port(), free_port()
        env = dict(os.environ, RUNTIME_ROOT=os.path.join(SRC, "examples/envoy"), RUNTIME_SUBDIRECTORY="",
                   RUNTIME_APPDIRECTORY="config", HOST="127.0.0.1", PORT=str(http_port), GRPC_HOST="127.0.0.1",
                   GRPC_PORT=str(grpc_port), DEBUG_HOST="127.0.0.1", DEBUG_PORT=str(debug_port), USE_STATSD="false")
        p = subprocess.Popen(preexec_fn=die_with_parent, args=[os.path.join(BIN, "ratelimitd"), "--envoy-env"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(p)
        wait_http(http_port, "/healthcheck", p)
        request(http_port, "POST", "/json",
                '{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]}')
        status, text = request(debug_port, "GET", "/metrics")
        assert status == 200, f"debug /metrics answered {status}"
        exported |= names_on(text)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
    return exported


def check_names():
    used = set()
    for f in (RULES, DASHBOARD):
        used |= set(METRIC.findall(open(os.path.join(MON, f)).read()))
    work = tempfile.mkdtemp(prefix="rl-mon-")
    try:
        exported = scrape_all(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(used)} metric names used by the rules and the dashboard; {len(exported)} exported")
    missing = sorted(used - exported)
    if missing:
        sys.exit("FAIL: named but not exported by ratelimitd: " + ", ".join(missing))
    print("ok")


if MODE == "rules":
    check_rules()
    print("ok")
elif MODE == "names":
    check_names()
else:
    sys.exit("usage: check_monitoring.py rules|names SOURCE_DIR BIN_DIR")
