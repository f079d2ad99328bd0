#!/usr/bin/env python3
"""tests/proxies/proxy_e2e.py — a real reverse proxy from Debian (nginx, caddy, haproxy) in front of a
tiny backend, every request decided by the real ratelimitd through the proxy's example
configuration (examples/nginx/ratelimit.conf: auth_request; examples/caddy/Caddyfile:
forward_auth; examples/haproxy/haproxy.cfg + ratelimit.lua).

Asserts what a client behind nginx must see: 200 + RateLimit headers while admitted; 429 +
Retry-After + RateLimit headers when denied (not nginx's 500); and a forged X-Forwarded-For
(nginx appends the real address with $proxy_add_x_forwarded_for) never buys more requests.
Then ratelimitd is stopped: the proxy as shipped answers what docs/proxies.md says (nginx 500,
Caddy 502, HAProxy 503: fail closed), and the example's documented fail-open variant (the lines
between its fail-open markers uncommented; for HAProxy the fail-closed line commented out)
serves the backend instead. For HAProxy, docs/proxies.md installs ratelimit.lua at exactly the
path haproxy.cfg loads.
The client connects from 127.0.0.2 so its address differs from the proxy's (127.0.0.1, the
only trusted proxy). Everything runs on free loopback ports in a private directory, every wait is
bounded, every process is stopped by pid.
usage: proxy_e2e.py nginx|caddy|haproxy BIN_DIR SOURCE_DIR
"""
import http.client, http.server, os, re, shutil, signal, subprocess, sys, tempfile, threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
from loopback import await_window_room, die_with_parent, free_port, listening, wait_for  # noqa: E402

PROXY, BIN, SRC = sys.argv[1], sys.argv[2], sys.argv[3]
LIMIT = 3


def wait_port(port, proc, what, seconds=10.0):
    def up():
        if proc is not None and proc.poll() is not None:
            sys.exit(f"{what} exited with {proc.returncode}")
        return listening(port)
    if not wait_for(up, seconds):
        sys.exit(f"{what} did not listen on {port} within {seconds}s")


class Backend(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"backend\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        pass


def get(port, xff=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5, source_address=("127.0.0.2", 0))
    c.request("GET", "/api/items", headers={"X-Forwarded-For": xff} if xff else {})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


EXAMPLE = {"nginx": "examples/nginx/ratelimit.conf", "caddy": "examples/caddy/Caddyfile",
           "haproxy": "examples/haproxy/haproxy.cfg"}[PROXY]
DOWN_STATUS = {"nginx": 500, "caddy": 502, "haproxy": 503}[PROXY]  # as docs/proxies.md says


def fail_open(example):
    """The example's documented fail-open variant: uncomment the lines between the fail-open
    markers, or comment out those between the fail-closed markers."""
    out, region = [], None
    for line in example.split("\n"):
        body = line.strip()
        if body in ("# fail-open:begin", "# fail-closed:begin"):
            region = body.split(":")[0][2:]
        elif body in ("# fail-open:end", "# fail-closed:end"):
            region = None
        elif region == "fail-open":
            indent = line[:len(line) - len(line.lstrip())]
            line = indent + line.lstrip()[2:] if line.lstrip().startswith("# ") else line
        elif region == "fail-closed":
            line = "# " + line
        out.append(line)
    variant = "\n".join(out)
    if variant == example:
        raise SystemExit(f"{EXAMPLE} has no fail-open/fail-closed markers")
    return variant


def start_proxy(work, rl_port, px_port, be_port, variant="as shipped"):
    """The proxy on its example configuration, with this run's ports; nothing else changed."""
    example = open(os.path.join(SRC, EXAMPLE)).read()
    if variant == "fail open":
        example = fail_open(example)
    example = example.replace("127.0.0.1:8080", f"127.0.0.1:{rl_port}")
    example = example.replace("127.0.0.1:9000", f"127.0.0.1:{be_port}")
    stderr = open(os.path.join(work, "proxy.stderr"), "a")
    if PROXY == "haproxy":
        example = example.replace("/etc/haproxy/ratelimit.lua", os.path.join(SRC, "examples/haproxy/ratelimit.lua"))
        example = example.replace("127.0.0.1:8000", f"127.0.0.1:{px_port}")
        path = os.path.join(work, f"haproxy-{px_port}.cfg")
        open(path, "w").write(example)
        env = dict(os.environ, RATELIMITD_URL=f"http://127.0.0.1:{rl_port}")
        return subprocess.Popen(preexec_fn=die_with_parent, args=["haproxy", "-db", "-f", path], stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    if PROXY == "caddy":
        example = example.replace(":8000 {", f":{px_port} {{")
        path = os.path.join(work, f"Caddyfile-{px_port}")
        open(path, "w").write(example)
        env = dict(os.environ, HOME=work, XDG_DATA_HOME=work, XDG_CONFIG_HOME=work)
        return subprocess.Popen(preexec_fn=die_with_parent, args=["caddy", "run", "--config", path, "--adapter", "caddyfile"],
                                stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    example = example.replace("127.0.0.1:8000", f"127.0.0.1:{px_port}")
    temps = "".join(f"  {k}_temp_path {work}/{k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = os.path.join(work, f"nginx-{px_port}.conf")
    with open(conf, "w") as f:
        f.write(f"worker_processes 1;\nerror_log {work}/error.log warn;\npid {work}/nginx-{px_port}.pid;\n"
                f"events {{ worker_connections 64; }}\nhttp {{\n  access_log off;\n{temps}{example}\n}}\n")
    return subprocess.Popen(preexec_fn=die_with_parent, args=["nginx", "-p", work, "-c", conf, "-g", "daemon off;"],
                            stdout=subprocess.DEVNULL, stderr=stderr)


failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def main():
    work = tempfile.mkdtemp(prefix="rl-nginx-")
    procs = []
    backend = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Backend)
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    try:
        rl_port, ng_port = free_port(), free_port()
        with open(os.path.join(work, "ratelimit.yaml"), "w") as f:
            f.write(f"listen: 127.0.0.1:{rl_port}\nthreads: 1\n"
                    f"policies:\n  api: {{ algorithm: fixed_window, limit: {LIMIT}, window: 60s }}\n"
                    "forward_auth: { trusted_proxies: [127.0.0.1/32] }\n")
        rl_log = open(os.path.join(work, "ratelimitd.log"), "w")
        rl = subprocess.Popen(preexec_fn=die_with_parent, args=[os.path.join(BIN, "ratelimitd"), "--config", os.path.join(work, "ratelimit.yaml")],
                              stdout=rl_log, stderr=subprocess.STDOUT)
        procs.append(rl)
        wait_port(rl_port, rl, "ratelimitd")

        ng = start_proxy(work, rl_port, ng_port, backend.server_address[1])
        procs.append(ng)
        wait_port(ng_port, ng, PROXY)

        # "api" is a 60 s fixed window aligned to the clock's minute: a boundary among these
        # requests would admit the forged ones. They take well under a second: 10 s left.
        await_window_room([60], 10)
        for i in range(LIMIT):
            # Admitted; the later ones carry a forged X-Forwarded-For, which must not matter.
            status, h, body = get(ng_port, None if i == 0 else f"198.51.100.{i}")
            check(status == 200 and body == b"backend\n", f"request {i}: 200 from the backend, got {status} {body!r}")
            check(re.fullmatch(rf'"api";r={LIMIT - 1 - i};t=\d+', h.get("ratelimit", "")) is not None,
                  f"request {i}: RateLimit on 200, got {h.get('ratelimit')!r}")
            check(h.get("ratelimit-policy", "").startswith('"api";q=3'), f"request {i}: RateLimit-Policy, got {h.get('ratelimit-policy')!r}")
        admitted_forged = 0
        for i in range(5):
            status, h, body = get(ng_port, f"203.0.113.{i}")
            admitted_forged += status == 200
            check(status == 429, f"forged request {i}: 429, got {status}")
            check(h.get("retry-after", "").isdigit() and int(h["retry-after"]) >= 1, f"forged {i}: Retry-After, got {h.get('retry-after')!r}")
            check(re.fullmatch(r'"api";r=0;t=\d+', h.get("ratelimit", "")) is not None, f"forged {i}: RateLimit, got {h.get('ratelimit')!r}")
            check(h.get("ratelimit-policy", "").startswith('"api";q=3'), f"forged {i}: RateLimit-Policy, got {h.get('ratelimit-policy')!r}")
        print(f"forged X-Forwarded-For admitted after the limit: {admitted_forged} of 5")
        # The key was the client's real address, the one nginx appended.
        c = http.client.HTTPConnection("127.0.0.1", rl_port, timeout=5)
        c.request("POST", "/v1/peek", body='{"key":"127.0.0.2","policy":"api"}')
        check(c.getresponse().status == 429, "the key is the client's real address 127.0.0.2")
        c.close()

        # ratelimitd down: the proxy as shipped fails closed with the documented status ...
        rl.terminate()
        rl.wait(timeout=10)
        status, _, body = get(ng_port)
        check(status == DOWN_STATUS, f"ratelimitd down: {PROXY} answers {DOWN_STATUS} as documented, got {status} {body!r}")
        # ... and the documented fail-open variant serves the backend.
        fo_port = free_port()
        fo = start_proxy(work, rl_port, fo_port, backend.server_address[1], "fail open")
        procs.append(fo)
        wait_port(fo_port, fo, PROXY + " (fail open)")
        status, _, body = get(fo_port)
        check(status == 200 and body == b"backend\n", f"ratelimitd down, fail-open variant: 200 from the backend, got {status} {body!r}")
        print(f"ratelimitd down: {PROXY} as shipped {DOWN_STATUS}, fail-open variant {status}")
        if PROXY == "haproxy":
            loaded = re.search(r"^\s*lua-load (\S+)", open(os.path.join(SRC, EXAMPLE)).read(), re.M).group(1)
            docs = open(os.path.join(SRC, "docs/proxies.md")).read()
            check(f"install -m 0644 examples/haproxy/ratelimit.lua {loaded}" in docs,
                  f"docs/proxies.md installs ratelimit.lua where haproxy.cfg loads it ({loaded})")
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGQUIT if p is not procs[0] and PROXY == "nginx" else signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
        backend.shutdown()
        if failures:
            for name in ("error.log", "ratelimitd.log", "proxy.stderr"):
                path = os.path.join(work, name)
                if os.path.exists(path):
                    print(f"--- {name}\n" + open(path).read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("ok")


main()
