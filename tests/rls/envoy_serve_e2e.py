#!/usr/bin/env python3
"""tests/rls/envoy_serve_e2e.py — the real `ratelimitd --envoy-env`, configured only by
envoyproxy/ratelimit's environment variables, serving an envoyproxy/ratelimit-format
configuration directory laid out as a Kubernetes ConfigMap volume (files behind the `..data`
symlink), as a user migrating from envoyproxy/ratelimit runs it.

Scenarios (one per ctest test, each well under 20 s):
  memory  BACKEND_TYPE=memory: POST /json answers (statuses, codes as strings, 200/429, exactly N
          OK of M under concurrency, 400 with the reason on bad input), /healthcheck, /rlconfig,
          the debug index, Prometheus metrics on PROMETHEUS_ADDR (names and values after a known
          sequence; promtool check metrics), /healthcheck 500 once SIGTERM drains, LOG_FORMAT=json
          lines that parse as JSON.
  redis   BACKEND_TYPE=redis (REDIS_SOCKET_TYPE=tcp, REDIS_URL=host:port) with two ratelimitd
          sharing one Redis: exactly N OK of M across both.
  reload  under load: a `..data` symlink swap that changes a limit (no request fails; the new limit
          takes effect), a swap to a broken set (refused whole, the last good rules keep serving,
          the failure metric grows), SIGHUP (generation + 1), SIGTERM (exit 0).
  refused a bad file in the watched directory is refused once per change (issue 23 item 4): one
          log line and reloads_total{result="error"} 1 however long it stays; a second bad
          version is one more; the fix is loaded.
  mixed   a rolling migration on one Redis (issue 23 item 6): ratelimitd (REDIS_URL set, no
          BACKEND_TYPE: redis, as envoyproxy/ratelimit) and a writer doing exactly what
          envoyproxy/ratelimit does (INCRBY prefix+domain_key_value_<window start> hits, EXPIRE
          unit, pipelined) share one count; a request's limit override counts on it too;
          LOCAL_CACHE_SIZE_IN_BYTES answers over-limit hits locally (not counted, as there).
  env     bad environment values: exit 2 with a message naming the variable, nothing listening;
          --log-level/--log-format for the native daemon (JSON lines, level filter).
Every process listens on 127.0.0.1 only (PORT=0 etc.: the bound ports are read from the log),
every wait is bounded, every process is stopped by pid.
usage: envoy_serve_e2e.py memory|redis|reload|refused|env|mixed BIN_DIR
"""
import http.client, json, os, re, shutil, signal, socket, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
from loopback import await_window_room, die_with_parent, free_port, listening, read_by_server, wait_for  # noqa: E402

SCENARIO, BIN = sys.argv[1], sys.argv[2]
RATELIMITD = os.path.join(BIN, "ratelimitd")

CONFIG = """domain: edge
descriptors:
  - key: user
    rate_limit: {{ unit: minute, requests_per_unit: {user_limit}, name: per_user }}
  - key: remote_address
    rate_limit: {{ unit: hour, requests_per_unit: 100 }}
    descriptors:
      - key: path
        value: /login
        rate_limit: {{ unit: minute, requests_per_unit: 5 }}
  - key: free
    rate_limit: {{ unlimited: true }}
"""


def fail(msg):
    sys.exit("FAIL: " + msg)


def check(cond, msg):
    if not cond:
        fail(msg)


class ConfigMap:
    """A ConfigMap volume mounted at RUNTIME_ROOT/ratelimit/config, as Kubernetes writes it: the
    files live in a hidden timestamped directory, `..data` points at it, and each key is a
    symlink `ratelimit.yaml -> ..data/ratelimit.yaml`. An update writes a new timestamped
    directory and renames a new `..data` symlink over the old one (one atomic swap)."""

    def __init__(self, root):
        self.vol = os.path.join(root, "ratelimit", "config")
        os.makedirs(self.vol)
        self.n = 0

    def publish(self, text):
        self.n += 1
        stamp = f"..2026_12_01_{self.n:04d}"
        os.makedirs(os.path.join(self.vol, stamp))
        with open(os.path.join(self.vol, stamp, "ratelimit.yaml"), "w") as f:
            f.write(text)
        tmp = os.path.join(self.vol, "..data_tmp")
        os.symlink(stamp, tmp)
        os.rename(tmp, os.path.join(self.vol, "..data"))
        link = os.path.join(self.vol, "ratelimit.yaml")
        if not os.path.islink(link):
            os.symlink("..data/ratelimit.yaml", link)


class Daemon:
    def __init__(self, workdir, env, name="ratelimitd"):
        self.log_path = os.path.join(workdir, name + ".log")
        full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        full.update(env)
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(preexec_fn=die_with_parent, args=[RATELIMITD, "--envoy-env"], env=full, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.ports = {}
        end = time.monotonic() + 10
        want = {"HTTP", "debug", "gRPC"} | ({"Prometheus"} if env.get("USE_PROMETHEUS") == "true" else set())
        while time.monotonic() < end and set(self.ports) != want:
            if self.proc.poll() is not None:
                fail(f"{name} exited with {self.proc.returncode}:\n{self.text()}")
            for m in re.finditer(r"listening for (\w+) on 127\.0\.0\.1:(\d+)", self.text()):
                self.ports[m.group(1)] = int(m.group(2))
            time.sleep(0.05)
        check(set(self.ports) == want, f"{name} did not log its ports:\n{self.text()}")

    def text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_log(self, needle, seconds=5.0):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if needle in self.text():
                return True
            time.sleep(0.05)
        return False

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
                self.log.close()
                fail(f"did not exit within 10 s of signal {sig}:\n{self.text()[-3000:]}")
        self.log.close()
        return self.proc.returncode


def stop_all(*daemons):
    """Stops every daemon — each one even when another did not exit — and returns their exit
    codes; fails afterwards if one did not exit in time."""
    codes, problems = [], []
    for d in daemons:
        try:
            codes.append(d.stop())
        except SystemExit as e:  # fail(): stop the others first
            codes.append(None)
            problems.append(str(e))
    if problems:
        fail("\n".join(problems))
    return codes


def request(port, method, path, body=None, conn=None):
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
    r = c.getresponse()
    data = r.read()
    if conn is None:
        c.close()
    return r.status, r.getheader("Content-Type"), data.decode("utf-8", "replace")


def ask(port, entries, conn=None, domain="edge", **extra):
    body = {"domain": domain, "descriptors": [{"entries": [{"key": k, "value": v} for k, v in entries]}]}
    body.update(extra)
    status, ctype, text = request(port, "POST", "/json", json.dumps(body), conn)
    return status, (json.loads(text) if text.startswith("{") else text)


def pb_field(number, payload):
    """One length-delimited protobuf field (wire type 2)."""
    out = bytes([number << 3 | 2])
    n = len(payload)
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n]) + payload


def grpc_should_rate_limit(port, domain, entries):
    """ShouldRateLimit over real gRPC (python3-grpcio) with a hand-encoded RateLimitRequest
    (domain = 1, descriptors = 2 { entries = 1 { key = 1, value = 2 } }); returns overall_code."""
    import grpc  # Debian's python3-grpcio
    desc = b"".join(pb_field(1, pb_field(1, k.encode()) + pb_field(2, v.encode())) for k, v in entries)
    req = pb_field(1, domain.encode()) + pb_field(2, desc)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        call = ch.unary_unary("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
                              request_serializer=lambda b: b, response_deserializer=lambda b: b)
        resp = call(req, timeout=5)
    check(resp[:1] == b"\x08", f"RateLimitResponse starts with overall_code: {resp!r}")
    return {1: "OK", 2: "OVER_LIMIT"}[resp[1]]


def metric(text, name, labels=""):
    for line in text.splitlines():
        if line.startswith(name + ("{" + labels + "}" if labels else " ")):
            return float(line.rsplit(" ", 1)[1])
    return None


def concurrent(ports, entries, clients, per_client):
    """`clients` threads released together, each sending `per_client` /json on its own kept-alive
    connection to ports[i % len(ports)]; returns the counts of 200, 429 and anything else."""
    counts = {"ok": 0, "over": 0, "other": 0}
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def run(i):
        conn = http.client.HTTPConnection("127.0.0.1", ports[i % len(ports)], timeout=10)
        barrier.wait(timeout=10)
        for _ in range(per_client):
            try:
                status, _ = ask(ports[i % len(ports)], entries, conn)
            except Exception:  # noqa: BLE001 - any failure is counted
                status = 0
            with lock:
                counts["ok" if status == 200 else "over" if status == 429 else "other"] += 1
        conn.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return counts


def base_env(root, extra=None):
    env = {
        "RUNTIME_ROOT": root, "RUNTIME_SUBDIRECTORY": "ratelimit", "RUNTIME_APPDIRECTORY": "config",
        "RUNTIME_IGNOREDOTFILES": "true", "HOST": "127.0.0.1", "PORT": "0", "DEBUG_HOST": "127.0.0.1",
        "DEBUG_PORT": "0", "GRPC_HOST": "127.0.0.1", "GRPC_PORT": "0", "USE_STATSD": "false",
        "LOG_LEVEL": "info",
    }
    env.update(extra or {})
    return env


def scenario_memory(work):
    cm = ConfigMap(work)
    cm.publish(CONFIG.format(user_limit=10))
    d = Daemon(work, base_env(work, {"USE_PROMETHEUS": "true", "PROMETHEUS_ADDR": "127.0.0.1:0",
                                     "LOG_FORMAT": "json", "LIMIT_RESPONSE_HEADERS_ENABLED": "true",
                                     "NEAR_LIMIT_RATIO": "0.8"}))
    try:
        port = d.ports["HTTP"]
        # 5 per minute on (remote_address, path=/login): 5 OK, then OVER_LIMIT with 429.
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        answers = [ask(port, [("remote_address", "10.0.0.1"), ("path", "/login")], conn) for _ in range(7)]
        check([s for s, _ in answers] == [200] * 5 + [429] * 2, f"statuses {[s for s, _ in answers]}")
        ok = answers[0][1]
        check(ok["overallCode"] == "OK", f"overallCode {ok}")
        st = ok["statuses"][0]
        check(st["code"] == "OK" and st["currentLimit"] == {"requestsPerUnit": 5, "unit": "MINUTE"}, f"status {st}")
        check(st["limitRemaining"] == 4, f"limitRemaining {st}")
        check(re.fullmatch(r"\d+s", st["durationUntilReset"]) and 0 < int(st["durationUntilReset"][:-1]) <= 60,
              f"durationUntilReset {st}")
        hdrs = {h["key"]: h["value"] for h in ok["responseHeadersToAdd"]}
        check(hdrs.get("RateLimit-Limit") == "5" and hdrs.get("RateLimit-Remaining") == "4" and
              "RateLimit-Reset" in hdrs, f"headers {hdrs}")
        over = answers[-1][1]
        check(over["overallCode"] == "OVER_LIMIT" and over["statuses"][0]["code"] == "OVER_LIMIT" and
              "limitRemaining" not in over["statuses"][0], f"over {over}")
        # No rule: OK without currentLimit; unlimited: 4294967295; one request, statuses in order.
        s, r = ask(port, [("nothing", "x")])
        check(s == 200 and r["statuses"] == [{"code": "OK"}], f"no match {r}")
        body = {"domain": "edge", "descriptors": [{"entries": [{"key": "free", "value": "a"}]},
                                                   {"entries": [{"key": "user", "value": "u0"}]}]}
        s, _, t = request(port, "POST", "/json", json.dumps(body))
        r = json.loads(t)
        check(s == 200 and r["statuses"][0] == {"code": "OK", "limitRemaining": 4294967295} and
              r["statuses"][1]["currentLimit"]["name"] == "per_user", f"order {r}")
        # Bad input: 400 with the reason; nothing counted.
        for bad, why in [("{", "not valid JSON"), ('{"domain":"edge","descriptors":[{"entries":[{"key":"user","vlaue":"x"}]}]}',
                                                      'unknown field \\"vlaue\\"'),
                         ('{"domain":"","descriptors":[{}]}', "rate limit domain must not be empty"),
                         ('{"domain":"edge"}', "rate limit descriptor list must not be empty"),
                         # The proto's shape rules, refused by the decision service as over gRPC.
                         ('{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"crowd"}]},{}]}',
                          "descriptor 1 has no entries"),
                         ('{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"crowd"},{"key":"","value":"x"}]}]}',
                          "descriptor 0 entry 1: the key must not be empty"),
                         ('{"domain":"edge","descriptors":[{"entries":[{"key":"user"}]}]}',
                          "descriptor 0 entry 0 (key 'user'): the value must not be empty")]:
            s, ctype, t = request(port, "POST", "/json", bad)
            check(s == 400 and why in t and ctype.startswith("application/json"), f"bad {bad!r}: {s} {t}")
        # gRPC and /json share one decision service: 3 OK over gRPC, then 2 OK of 3 over /json.
        codes = [grpc_should_rate_limit(d.ports["gRPC"], "edge", [("user", "both")]) for _ in range(3)]
        check(codes == ["OK"] * 3, f"gRPC {codes}")
        c = [ask(port, [("user", "both")])[0] for _ in range(8)]
        check(c == [200] * 7 + [429], f"/json after gRPC {c}")
        check(grpc_should_rate_limit(d.ports["gRPC"], "edge", [("user", "both")]) == "OVER_LIMIT", "gRPC over")
        # Exactly 10 of 60 concurrent requests on one descriptor at 10/minute.
        c = concurrent([port], [("user", "crowd")], 12, 5)
        check(c == {"ok": 10, "over": 50, "other": 0}, f"concurrent {c}")
        # /healthcheck, /rlconfig, the debug index.
        s, ctype, t = request(port, "GET", "/healthcheck")
        check(s == 200 and t == "OK", f"healthcheck {s} {t}")
        s, _, t = request(d.ports["debug"], "GET", "/rlconfig")
        check(s == 200 and "edge.remote_address.path_/login: unit=MINUTE requests_per_unit=5" in t and
              "edge.user: unit=MINUTE requests_per_unit=10" in t, f"rlconfig {t}")
        s, _, t = request(d.ports["debug"], "GET", "/")
        check(s == 200 and "/rlconfig" in t, f"debug index {t}")
        # Prometheus: names and values after the sequence above.
        s, _, t = request(d.ports["Prometheus"], "GET", "/metrics")
        check(s == 200, f"metrics {s}")
        login = 'domain="edge",key1="remote_address",key2="path_/login"'
        for name, want in [("total_hits_total", 7), ("within_limit_total", 5), ("near_limit_total", 1),
                           ("over_limit_total", 2)]:
            got = metric(t, "ratelimit_service_rate_limit_" + name, login)
            check(got == want, f"{name}: {got} != {want}\n{t}")
        user = 'domain="edge",key1="user"'
        check(metric(t, "ratelimit_service_rate_limit_total_hits_total", user) == 73, "user total_hits")
        check(metric(t, "ratelimit_service_rate_limit_over_limit_total", user) == 52, "user over_limit")
        check(metric(t, "ratelimitd_config_generation") == 1, "generation")
        check(metric(t, "ratelimitd_http_requests_total", 'endpoint="json",status="429"') == 53, "json 429 count")
        lint = subprocess.run(["promtool", "check", "metrics"], input=t.encode(), capture_output=True, timeout=20)
        check(lint.returncode == 0, f"promtool: {lint.stdout.decode()} {lint.stderr.decode()}")
        check(request(port, "GET", "/metrics")[0] == 404, "no /metrics on the API port (as envoyproxy/ratelimit)")
        # /healthcheck answers 500 once draining (envoyproxy/ratelimit's signal to take the
        # instance out of rotation): half a request is in flight when SIGTERM arrives.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"GET /healthcheck HTTP/1.1\r\nHost: x\r\n")
            # The server must have read it (unread, the connection is idle and the drain closes
            # it): the event, not a guessed 0.1 s.
            check(read_by_server(sock), "the server never read the half request")
            d.proc.send_signal(signal.SIGTERM)
            check(d.wait_log("draining"), "no draining line:\n" + d.text())
            sock.sendall(b"\r\n")
            head = sock.recv(4096).decode("latin-1")
            check(head.startswith("HTTP/1.1 500 "), f"healthcheck while draining: {head!r}")
        d.proc.wait(timeout=10)
    finally:
        rc = d.stop()
    check(rc == 0, f"exit {rc}")
    lines = [l for l in d.text().splitlines() if l.strip()]
    check(len(lines) >= 4, "log lines")
    for line in lines:
        obj = json.loads(line)  # raises (fails) on any non-JSON line
        check(set(obj) == {"level", "msg", "time"}, f"log keys {obj}")
    check(any("ignored" not in json.loads(l)["msg"] and "listening for HTTP" in json.loads(l)["msg"] for l in lines),
          "listening line")


def redis_url():
    url = os.environ.get("RATELIMIT_TEST_REDIS_URL", "")
    m = re.match(r"redis://([^:/]+):(\d+)", url)
    return (m.group(1), int(m.group(2))) if m else None


def start_redis(work):
    port = free_port()
    proc = subprocess.Popen(preexec_fn=die_with_parent, args=["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", work], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if wait_for(lambda: listening(port), 10):
        return proc, port
    proc.kill()
    fail("redis-server did not start")


def two_daemons_on_one_redis(work, env):
    """Exactly 10 of 40 across two daemons sharing one Redis; returns their exit codes."""
    a = Daemon(work, env, "a")
    try:
        b = Daemon(work, env, "b")
    except BaseException:
        stop_all(a)
        raise
    try:
        c = concurrent([a.ports["HTTP"], b.ports["HTTP"]], [("user", "shared")], 10, 4)
        if c != {"ok": 10, "over": 30, "other": 0}:
            # Say why: a Redis call that timed out is answered by the failure policy (fail open).
            diag = []
            for name, dmn in (("a", a), ("b", b)):
                t = request(dmn.ports["debug"], "GET", "/metrics")[2]
                diag.append(f"{name}: failed_open={metric(t, 'ratelimitd_redis_failed_open_total')} "
                            f"timeouts={metric(t, 'ratelimitd_redis_timeouts_total')} "
                            f"errors={metric(t, 'ratelimitd_redis_errors_total')}\n{dmn.text()[-2000:]}")
            fail(f"two daemons on one Redis: {c}\n" + "\n".join(diag))
        s, r = ask(a.ports["HTTP"], [("user", "shared")])
        check(s == 429 and r["statuses"][0]["code"] == "OVER_LIMIT", f"after: {r}")
        s, r = ask(b.ports["HTTP"], [("remote_address", "1.1.1.1"), ("path", "/login")])
        check(s == 200 and r["statuses"][0]["limitRemaining"] == 4, f"login {r}")
        check("store redis" in a.text(), "store named in the start-up line:\n" + a.text())
    finally:
        codes = stop_all(a, b)
    return codes


def scenario_redis(work):
    server = None
    hp = redis_url()
    if hp is None:
        server, port = start_redis(work)
        hp = ("127.0.0.1", port)
    cm = ConfigMap(work)
    cm.publish(CONFIG.format(user_limit=10))
    prefix = f"e2e{os.getpid()}_{int(time.time())}_"  # a fresh count on a shared Redis
    env = base_env(work, {"BACKEND_TYPE": "redis", "REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": f"{hp[0]}:{hp[1]}",
                          "REDIS_POOL_SIZE": "4", "CACHE_KEY_PREFIX": prefix})
    try:
        ra, rb = two_daemons_on_one_redis(work, env)
    finally:
        if server:
            server.kill()
            server.wait(timeout=5)
    check(ra == 0 and rb == 0, f"exits {ra} {rb}")


class EnvoyWriter:
    """What envoyproxy/ratelimit's redis backend sends for one descriptor
    (src/limiter/cache_key.go, src/redis/fixed_cache_impl.go): the key prefix + domain + "_" +
    (key + "_" + value + "_") per entry + the window start (now / unit * unit, Unix seconds);
    INCRBY key hits and EXPIRE key unit, pipelined on one connection; over the limit when the
    count after it exceeds requests_per_unit."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""

    @staticmethod
    def encode(*args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        return out

    def reply(self):
        while b"\r\n" not in self.buf:
            self.buf += self.sock.recv(4096)
        line, self.buf = self.buf.split(b"\r\n", 1)
        if line[:1] == b":":
            return int(line[1:])
        if line[:1] == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(4096)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data.decode()
        return line[1:].decode()  # +status or -error

    def command(self, *args):
        self.sock.sendall(self.encode(*args))
        return self.reply()

    def hit(self, key_base, unit_seconds, hits=1):
        key = key_base + str(int(time.time()) // unit_seconds * unit_seconds)
        self.sock.sendall(self.encode("INCRBY", key, hits) + self.encode("EXPIRE", key, unit_seconds))
        count = self.reply()
        self.reply()
        return key, count


def json_override(port, entries, rpu, unit):
    body = {"domain": "edge", "descriptors": [{"entries": [{"key": k, "value": v} for k, v in entries],
                                               "limit": {"requests_per_unit": rpu, "unit": unit}}]}
    status, _, text = request(port, "POST", "/json", json.dumps(body))
    return status, json.loads(text)


def scenario_mixed(work):
    server, port = start_redis(work)
    try:
        # One minute for the whole scenario (the counters are per window): main() started it
        # with 20 s of the minute left.
        cm = ConfigMap(work)
        cm.publish(CONFIG.format(user_limit=10))
        prefix = f"mix{os.getpid()}_"
        env = base_env(work, {"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": f"127.0.0.1:{port}",
                              "REDIS_POOL_SIZE": "2", "CACHE_KEY_PREFIX": prefix})
        d = Daemon(work, env, "mixed")
        try:
            check("BACKEND_TYPE is not set: redis" in d.text(), "the default backend, said:\n" + d.text())
            check("store redis" in d.text(), "serving from Redis:\n" + d.text())
            w = EnvoyWriter(port)
            base = prefix + "edge_user_alice_"
            for i in range(4):
                key, count = w.hit(base, 60)
                check(count == i + 1, f"writer hit {i}: {count}")
            for i in range(6):
                s, r = ask(d.ports["HTTP"], [("user", "alice")])
                check(s == 200 and r["statuses"][0].get("limitRemaining", 0) == 5 - i,
                      f"ratelimitd hit {i} after 4 of the writer's: {r}")
            s, r = ask(d.ports["HTTP"], [("user", "alice")])
            check(s == 429 and r["statuses"][0]["code"] == "OVER_LIMIT", f"11th hit: {r}")
            key, count = w.hit(base, 60)
            check(count == 12, f"the writer sees ratelimitd's hits: {count}")
            check(w.command("TYPE", key) == "string", "an integer key, as envoyproxy/ratelimit's")
            ttl = w.command("TTL", key)
            check(0 < ttl <= 60, f"TTL {ttl}")
            check(w.command("EXISTS", key) == 1, "the counter exists")
            # A limit override on the same entries counts on the same counter: 13 of 20.
            s, r = json_override(d.ports["HTTP"], [("user", "alice")], 20, "MINUTE")
            check(s == 200 and r["statuses"][0]["limitRemaining"] == 7, f"override: {r}")
            check(w.command("GET", key) == "13", "the override's hit is on the shared counter")
        finally:
            stop_all(d)
        # LOCAL_CACHE_SIZE_IN_BYTES: over-limit hits of a denied counter answered locally.
        env2 = dict(env, BACKEND_TYPE="redis", LOCAL_CACHE_SIZE_IN_BYTES="1048576",
                    USE_PROMETHEUS="true", PROMETHEUS_ADDR="127.0.0.1:0")
        d = Daemon(work, env2, "cached")
        try:
            check("LOCAL_CACHE_SIZE_IN_BYTES" not in d.text(), "not ignored any more:\n" + d.text())
            w = EnvoyWriter(port)
            base = prefix + "edge_user_bob_"
            w.hit(base, 60, 10)
            for i in range(5):
                s, r = ask(d.ports["HTTP"], [("user", "bob")])
                check(s == 429, f"bob over: {r}")
            key = base + str(int(time.time()) // 60 * 60)
            check(w.command("GET", key) == "11", "one over-limit hit counted, the rest answered locally")
            t = request(d.ports["Prometheus"], "GET", "/metrics")[2]
            check((metric(t, "ratelimitd_denial_cache_hits_total") or 0) >= 4, "denial cache hits:\n" + t[-1500:])
        finally:
            stop_all(d)
    finally:
        server.kill()
        server.wait(timeout=5)


def scenario_reload(work):
    cm = ConfigMap(work)
    cm.publish(CONFIG.format(user_limit=1000))
    d = Daemon(work, base_env(work))
    port, debug = d.ports["HTTP"], d.ports["debug"]
    stop = threading.Event()
    seen = {"statuses": {}, "limits": set(), "errors": []}
    lock = threading.Lock()

    def load(i):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        n = 0
        while not stop.is_set():
            n += 1
            try:
                s, r = ask(port, [("user", f"load{i}_{n % 50}")], conn)
                with lock:
                    seen["statuses"][s] = seen["statuses"].get(s, 0) + 1
                    seen["limits"].add(r["statuses"][0]["currentLimit"]["requestsPerUnit"])
            except Exception as e:  # noqa: BLE001
                with lock:
                    seen["errors"].append(repr(e))
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.close()

    threads = [threading.Thread(target=load, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        # The load has been answered on the first rules (not a guessed 0.3 s: a slow machine may
        # not have answered one request by then, and "limits seen" would then miss 1000).
        check(wait_for(lambda: 1000 in seen["limits"], 10), f"no load answered: {seen}")
        # 1. A ConfigMap update (..data swap) that changes the limit, under load.
        cm.publish(CONFIG.format(user_limit=2))
        check(d.wait_log("configuration reloaded, generation 2"), "no reload after the ..data swap:\n" + d.text())
        end = time.monotonic() + 5
        while time.monotonic() < end:
            s, r = ask(port, [("user", "fresh")])
            if r["statuses"][0]["currentLimit"]["requestsPerUnit"] == 2:
                break
            time.sleep(0.05)
        statuses = [ask(port, [("user", "after_swap")])[0] for _ in range(3)]
        check(statuses == [200, 200, 429], f"new limit 2: {statuses}")
        check(wait_for(lambda: 2 in seen["limits"], 10), f"the load never saw limit 2: {seen['limits']}")
        # 2. A broken set: refused whole; the last good one keeps serving.
        cm.publish(CONFIG.format(user_limit=2) + "  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n")
        check(d.wait_log("configuration refused, generation 2 keeps serving"), "no refusal:\n" + d.text())
        s, _, t = request(debug, "GET", "/metrics")
        check(metric(t, "ratelimitd_config_reloads_total", 'result="error"') == 1, "failure metric:\n" + t)
        check(metric(t, "ratelimitd_config_generation") == 2, "generation after a refused set")
        check(ask(port, [("user", "after_swap")])[0] == 429 and
              ask(port, [("user", "after_bad")])[1]["statuses"][0]["currentLimit"]["requestsPerUnit"] == 2,
              "last good rules")
        # 3. SIGHUP reloads (the broken set is still there: refused again); fix it, then SIGHUP.
        cm.publish(CONFIG.format(user_limit=3))
        check(d.wait_log("configuration reloaded, generation 3"), "reload after the fix:\n" + d.text())
        d.proc.send_signal(signal.SIGHUP)
        check(d.wait_log("SIGHUP: configuration reloaded, generation 4"), "SIGHUP:\n" + d.text())
        s, _, t = request(debug, "GET", "/metrics")
        check(metric(t, "ratelimitd_config_generation") == 4 and
              metric(t, "ratelimitd_config_reloads_total", 'result="ok"') == 3, "metrics after SIGHUP:\n" + t)
        s, _, t = request(debug, "GET", "/rlconfig")
        check("edge.user: unit=MINUTE requests_per_unit=3" in t, "rlconfig after reload: " + t)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
    total = sum(seen["statuses"].values())
    check(not seen["errors"] and set(seen["statuses"]) <= {200, 429} and total > 100,
          f"under load: {seen['statuses']} errors {seen['errors'][:3]}")
    check(seen["limits"] >= {1000, 2}, f"limits seen under load: {seen['limits']}")
    # SIGTERM: the daemon drains and exits 0.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    check(request(port, "GET", "/healthcheck", conn=conn)[0] == 200, "healthy")
    rc = d.stop()
    check(rc == 0, f"exit {rc}")


def scenario_refused(work):
    cm = ConfigMap(work)
    cm.publish(CONFIG.format(user_limit=5))
    d = Daemon(work, base_env(work))
    port, debug = d.ports["HTTP"], d.ports["debug"]
    bad = CONFIG.format(user_limit=5) + "  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n"

    def refusals():
        return d.text().count("configuration refused")

    def errors():
        return metric(request(debug, "GET", "/metrics")[2], "ratelimitd_config_reloads_total", 'result="error"')

    try:
        cm.publish(bad)
        check(d.wait_log("configuration refused, generation 1 keeps serving"), "no refusal:\n" + d.text())
        # Before the fix the watcher reloaded (refused, logged, counted) every 100 ms: 30 lines in 3 s.
        time.sleep(2.0)
        check(refusals() == 1 and errors() == 1, f"one change, {refusals()} refusals logged, {errors()} counted:\n" + d.text())
        check(ask(port, [("user", "u")])[1]["statuses"][0]["currentLimit"]["requestsPerUnit"] == 5, "last good rules")
        # Another broken version is another change: refused once more, once.
        cm.publish(bad.replace("requests_per_unit: 1 }", "requests_per_unit: 2 }"))
        end = time.monotonic() + 5
        while time.monotonic() < end and refusals() < 2:
            time.sleep(0.05)
        time.sleep(1.0)
        check(refusals() == 2 and errors() == 2, f"two changes, {refusals()} refusals, {errors()} counted:\n" + d.text())
        cm.publish(CONFIG.format(user_limit=7))
        check(d.wait_log("configuration reloaded, generation 2"), "the fix was not loaded:\n" + d.text())
        check(errors() == 2, "the fix counted as an error")
    finally:
        rc = d.stop()
    check(rc == 0, f"exit {rc}")


def scenario_env(work):
    cm = ConfigMap(work)
    cm.publish(CONFIG.format(user_limit=10))
    port = free_port()
    cases = [
        ({"NEAR_LIMIT_RATIO": "high"}, "NEAR_LIMIT_RATIO: 'high' is not a number"),
        ({"HOST": "example.com"}, "HOST: 'example.com' is not an IP address"),
        ({"PORT": "70000"}, "PORT: '70000' must be between 0 and 65535"),
        ({"BACKEND_TYPE": "memcache"}, "BACKEND_TYPE: 'memcache' is not implemented here"),
        ({"LOG_FORMAT": "xml"}, "LOG_FORMAT: 'xml' must be text or json"),
        ({"PROMETHEUS_ADDR": "9090"}, "PROMETHEUS_ADDR: '9090' is not [host]:port"),
        ({"RUNTIME_SUBDIRECTORY": "missing"}, "missing"),
    ]
    for extra, msg in cases:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        env.update(base_env(work, {"PORT": str(port)}))
        env.update(extra)
        r = subprocess.run([RATELIMITD, "--envoy-env"], env=env, capture_output=True, timeout=10)
        out = (r.stdout + r.stderr).decode()
        check(r.returncode == 2 and msg in out, f"{extra}: exit {r.returncode}, {out!r}")
        if listening(port):
            fail(f"{extra}: something listens on {port}")
    r = subprocess.run([RATELIMITD, "--envoy-env", "--log-level", "loud"], capture_output=True, timeout=10)
    check(r.returncode == 2 and b"--log-level: 'loud' must be debug, info, warn or error" in r.stderr, "flag")
    # The same log options for the native daemon: --log-format json, every line a JSON object;
    # --log-level warn drops the info lines.
    cfg = os.path.join(work, "native.yaml")
    with open(cfg, "w") as f:
        f.write("policies:\n  api: { algorithm: fixed_window, limit: 5, window: 1m }\n")
    for level, want_info in [("info", True), ("warn", False)]:
        log_path = os.path.join(work, f"native-{level}.log")
        with open(log_path, "wb") as log:
            native_port = free_port()
            p = subprocess.Popen(preexec_fn=die_with_parent, args=[RATELIMITD, "--config", cfg, "--listen", f"127.0.0.1:{native_port}", "--log-format",
                                  "json", "--log-level", level], stdout=log, stderr=subprocess.STDOUT)
            # Up (listening) before SIGTERM, on any machine: a guessed 0.5 s could stop it before it
            # logged "listening" at level info (and at warn prove nothing).
            up = wait_for(lambda: listening(native_port) or p.poll() is not None, 10)
            p.send_signal(signal.SIGTERM)
            rc = p.wait(timeout=10)
        check(up and rc == 0, f"native: up {up}, exit {rc}")
        with open(log_path) as f:
            lines = [json.loads(l) for l in f if l.strip()]
        check(all(set(o) == {"level", "msg", "time"} for o in lines), f"native log {lines}")
        has_info = any(o["level"] == "info" and "listening on 127.0.0.1:" in o["msg"] for o in lines)
        check(has_info == want_info, f"--log-level {level}: {lines}")


def main():
    work = tempfile.mkdtemp(prefix=f"envoy-serve-{SCENARIO}-")
    # The descriptors count per minute and per hour in windows aligned to the clock (in
    # ratelimitd and in Redis): a boundary mid-scenario gives counts back. A scenario takes
    # 3-7 s here; it starts with 20 s of the minute and the hour left (once, before any daemon:
    # a wait between two daemons of one scenario would be the boundary it avoids).
    await_window_room([60, 3600], 20)
    try:
        {"memory": scenario_memory, "redis": scenario_redis, "reload": scenario_reload,
         "refused": scenario_refused, "env": scenario_env, "mixed": scenario_mixed}[SCENARIO](work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"envoy_serve_e2e {SCENARIO}: ok")


if __name__ == "__main__":
    main()
