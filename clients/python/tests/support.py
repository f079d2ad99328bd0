"""support.py — what the tests start: a throwaway redis-server and a real ratelimitd (the
project's build) on free loopback ports, each stopped by pid, every wait bounded.
Environment: RATELIMIT_TEST_REDIS_URL (shared Redis; else one is started), RATELIMIT_BIN_DIR,
RATELIMIT_REDIS_LIBRARY, RATELIMIT_VECTORS_DIR, RATELIMIT_CONFORMANCE_DIR."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
VECTORS_DIR = os.environ.get("RATELIMIT_VECTORS_DIR", os.path.join(SOURCE, "tests", "vectors"))
CONFORMANCE_DIR = os.environ.get("RATELIMIT_CONFORMANCE_DIR", os.path.join(SOURCE, "clients", "conformance"))
BIN_DIR = os.environ.get("RATELIMIT_BIN_DIR", os.path.join(SOURCE, "build", "bin"))
os.environ.setdefault("RATELIMIT_REDIS_LIBRARY", os.path.join(SOURCE, "build", "share", "ratelimit", "redis"))
RUN_ID = f"{os.getpid()}-{int(time.time() * 1000)}"

sys.path.insert(0, os.path.join(SOURCE, "tests", "support"))
from loopback import await_window_room, die_with_parent  # noqa: E402,F401  (servers die with the test: PR_SET_PDEATHSIG)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc, what: str, seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port} within {seconds}s")


class Process:
    def __init__(self, proc, url, port, tmpdir):
        self.proc, self.url, self.port, self.tmpdir = proc, url, port, tmpdir

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)


def start_redis() -> Process:
    port = free_port()
    d = tempfile.mkdtemp(prefix="rl-py-redis-")
    proc = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                             "--appendonly", "no", "--dir", d], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=die_with_parent)
    wait_port(port, proc, "redis-server")
    return Process(proc, f"redis://127.0.0.1:{port}/0", port, d)


def _free_cluster_port() -> int:
    """A free port whose cluster bus port (+10000) is free too."""
    while True:
        port = free_port()
        if port > 55535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
                return port
            except OSError:
                continue


class Cluster:
    """A Redis Cluster of our own: three primaries, no replicas (redis-cli --cluster create), each a
    redis-server in its own directory; ready when every node says cluster_state:ok. The twin of
    tests/support/redis_cluster.h, smaller. stop() ends every node."""

    def __init__(self):
        import redis
        self.nodes = []
        try:
            for _ in range(3):
                port = _free_cluster_port()
                d = tempfile.mkdtemp(prefix="rl-py-cluster-")
                proc = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                                         "--appendonly", "no", "--dir", d, "--cluster-enabled", "yes",
                                         "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
                self.nodes.append(Process(proc, f"redis://127.0.0.1:{port}/0", port, d))
                wait_port(port, proc, "redis-server (cluster)")
            subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{n.port}" for n in self.nodes],
                            "--cluster-replicas", "0", "--cluster-yes"], check=True, timeout=30,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
            self.clients = [redis.Redis(port=n.port, decode_responses=True, socket_timeout=10) for n in self.nodes]
            end = time.monotonic() + 20
            while not all("cluster_state:ok" in c.execute_command("CLUSTER", "INFO") for c in self.clients):
                if time.monotonic() > end:
                    raise RuntimeError("the cluster did not reach cluster_state:ok within 20 s")
                time.sleep(0.05)
        except BaseException:
            self.stop()
            raise
        self.url = f"redis-cluster://127.0.0.1:{self.nodes[0].port},127.0.0.1:{self.nodes[1].port}"

    def owner_of(self, slot: int) -> int:
        """The index of the primary that owns `slot` now."""
        for lo, hi, primary, *_ in self.clients[0].execute_command("CLUSTER", "SLOTS"):
            if lo <= slot <= hi:
                return [n.port for n in self.nodes].index(int(primary[1]))
        raise RuntimeError(f"no owner for slot {slot}")

    def stop(self) -> None:
        for c in getattr(self, "clients", []):
            c.close()
        for n in self.nodes:
            n.stop()


def test_redis() -> Process:
    url = os.environ.get("RATELIMIT_TEST_REDIS_URL")
    if url:
        return Process(None, url, int(url.rsplit(":", 1)[1].split("/")[0]), None)
    return start_redis()


def start_ratelimitd(yaml: str) -> Process:
    port = free_port()
    d = tempfile.mkdtemp(prefix="rl-py-d-")
    config = os.path.join(d, "ratelimit.yaml")
    with open(config, "w") as f:
        f.write(f"listen: 127.0.0.1:{port}\n{yaml}")
    log = open(os.path.join(d, "log"), "w")
    proc = subprocess.Popen([os.path.join(BIN_DIR, "ratelimitd"), "--config", config], stdout=log, stderr=log,
                            preexec_fn=die_with_parent)
    try:
        wait_port(port, proc, "ratelimitd")
    except RuntimeError as e:
        raise RuntimeError(f"{e}\n{open(os.path.join(d, 'log')).read()}") from None
    return Process(proc, f"http://127.0.0.1:{port}", port, d)


def in_flight(n: int, width: int, fn):
    """fn(i) for i in range(n), at most `width` at once (threads)."""
    with ThreadPoolExecutor(max_workers=width) as pool:
        return list(pool.map(fn, range(n)))


class BackEnds:
    """A Redis (test_redis), a real ratelimitd on it configured by `yaml` (a format of url and
    prefix), and a blocking limiter of each back-end on them; stop() ends all four. The timeouts
    (30 s) are hang guards, not claims: a loaded CI machine must not turn into failure-policy
    answers (under 4 CPU hogs the Node client's 200-request race took 4.6 s end to end, against
    the 5 s they were)."""

    def __init__(self, yaml: str, prefix: str, policies):
        from ratelimit_client import RatelimitdLimiter, RedisLimiter
        self.redis = test_redis()
        self.daemon = start_ratelimitd(yaml.format(url=self.redis.url, prefix=prefix))
        self.via_redis = RedisLimiter(self.redis.url, policies, key_prefix=prefix, on_failure="closed", timeout=30)
        self.via_daemon = RatelimitdLimiter(self.daemon.url, on_failure="closed", timeout=30)

    def stop(self) -> None:
        self.via_redis.close()
        self.daemon.stop()
        self.redis.stop()
