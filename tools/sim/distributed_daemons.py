#!/usr/bin/env python3
"""distributed_daemons.py — the real processes compare_distributed.py measures: ratelimitd
configurations (N daemons on one redis-server, one policy per consistency mode; or one daemon
per instance in R regions), starting them and waiting until they answer, the regions' redis-servers
and delay proxies, and stopping. Apart from compare_distributed.py so that the replay and the
checks against the model read on their own, and so compare_usage.py can start and stop a daemon
the same way.

Invariants: every process started here dies with the script that started it (die_with_parent)
and is appended to the caller's `procs` as it starts, so the caller stops it (stop) even when a
later one fails to start; every wait is bounded (a RuntimeError says what did not come up)."""
import http.client
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/support"))
from loopback import die_with_parent, free_port, listening, wait_for  # noqa: E402


def seconds(text):
    for unit, scale in (("ms", 1e-3), ("us", 1e-6), ("s", 1.0), ("m", 60.0)):
        if text.endswith(unit) and text[:-len(unit)].replace(".", "", 1).isdigit():
            return float(text[:-len(unit)]) * scale
    return float(text)


CONFIG = """listen: 127.0.0.1:{port}
threads: 1
store: {{ type: redis, url: "redis://127.0.0.1:{redis}/0", key_prefix: "cmp{run}:", on_failure: closed, command_timeout: 2s, connect_timeout: 5s }}
policies:
  exact: {{ algorithm: fixed_window, limit: {limit}, window: {window} }}
  lease: {{ algorithm: fixed_window, limit: {limit}, window: {window}, consistency: lease, lease_max: {lease_max}, sync_interval: {sync} }}
  async: {{ algorithm: fixed_window, limit: {limit}, window: {window}, consistency: async, sync_interval: {sync} }}
"""


REGIONS_CONFIG = """listen: 127.0.0.1:{port}
threads: 1
region: r{region}
regions:
  sync_interval: {sync}
  stores:
{stores}
store: {{ type: redis, key_prefix: "cmpr{run}:", on_failure: closed, command_timeout: 2s, connect_timeout: 5s }}
policies:
  global: {{ algorithm: fixed_window, limit: {limit}, window: {window} }}
"""


def stop(proc):
    if proc and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def ready(port):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        c.request("GET", "/readyz")
        return c.getresponse().status == 200
    except OSError:
        return False


def start_daemons(a, work, name, configs, procs):
    """One ratelimitd per config text, its config and log in `work` as <name><i>.yaml/.log, each
    process appended to `procs` as it starts (the caller stops them; each dies with this script).
    Returns once every one answers /readyz 200; raises RuntimeError with their logs if not."""
    ports = []
    for i, (port, text) in enumerate(configs):
        cfg = os.path.join(work, "%s%d.yaml" % (name, i))
        with open(cfg, "w") as f:
            f.write(text)
        log = open(os.path.join(work, "%s%d.log" % (name, i)), "w")
        procs.append(subprocess.Popen([os.path.join(a.bin, "ratelimitd"), "--config", cfg],
                                      stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent))
        ports.append(port)
    if not all(wait_for(lambda p=p: ready(p), 10) for p in ports):
        logs = "".join(open(os.path.join(work, "%s%d.log" % (name, i))).read() for i in range(len(ports)))
        raise RuntimeError(logs + "ratelimitd (%s) did not become ready" % name)
    return ports


def ping_rtt(port, n=20):
    """The shortest round trip of `n` Redis PINGs to 127.0.0.1:port (through a proxy: its latency;
    the shortest, as a loaded machine only ever adds to it)."""
    import socket
    rtts = []
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        for _ in range(n):
            t = time.time()
            c.sendall(b"PING\r\n")
            got = b""
            while not got.endswith(b"\r\n"):
                got += c.recv(64)
            rtts.append(time.time() - t)
    return min(rtts)


def regions_reachable(port, others):
    """True when the daemon on `port` reports every other region reachable (/metrics)."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        c.request("GET", "/metrics")
        page = c.getresponse().read().decode()
    except OSError:
        return False
    return page.count("ratelimitd_region_reachable{") == others and \
        page.count("ratelimitd_region_reachable{") == len([l for l in page.splitlines()
                                                            if l.startswith("ratelimitd_region_reachable{")
                                                            and l.endswith(" 1")])


def start_regions(a, work, redis_port, procs):
    """R regions: region 0's redis-server is `redis_port`, the others are started here; each gets
    a delay proxy (one way = --cross-rtt / 2) through which the other regions reach it; then N
    daemons, instance i in region i % R, each process appended to `procs` as it starts (the
    caller stops them). Returns (daemon ports, measured cross rtt)."""
    redis_ports, proxy_ports = [redis_port], []
    for r in range(1, a.regions):
        p = free_port()
        procs.append(subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(p), "--save", "",
                                       "--appendonly", "no", "--dir", work],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      preexec_fn=die_with_parent))
        redis_ports.append(p)
    for p in redis_ports:
        if not wait_for(lambda p=p: listening(p, 0.5), 10):
            raise RuntimeError("redis-server did not listen")
        proxy = subprocess.Popen([os.path.join(a.bin, "ratelimit-delay-proxy"), str(p),
                                  str(int(seconds(a.cross_rtt) * 1e6 / 2))],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                 preexec_fn=die_with_parent)
        procs.append(proxy)
        line = proxy.stdout.readline().split()
        if len(line) != 2 or line[0] != "port":
            raise RuntimeError("ratelimit-delay-proxy did not start")
        proxy_ports.append(int(line[1]))
    cross = ping_rtt(proxy_ports[0])
    configs = []
    for i in range(a.instances):
        port, region = free_port(), i % a.regions
        stores = "\n".join('    r%d: { redis: "redis://127.0.0.1:%d/0" }' %
                           (r, redis_ports[r] if r == region else proxy_ports[r]) for r in range(a.regions))
        configs.append((port, REGIONS_CONFIG.format(port=port, region=region, sync=a.sync_interval, stores=stores,
                                                    limit=a.limit, window=a.window, run=os.getpid())))
    ports = start_daemons(a, work, "r", configs, procs)
    # The other regions' Redis are opened lazily, through the proxy: the connection and its
    # handshake take several cross round trips. The model starts connected, so the replay waits
    # until every daemon has read every other region once (its probe), not for a fixed time.
    if not all(wait_for(lambda p=p: regions_reachable(p, a.regions - 1), 10) for p in ports):
        raise RuntimeError("ratelimitd (regions) did not reach the other regions within 10 s")
    return ports, cross
