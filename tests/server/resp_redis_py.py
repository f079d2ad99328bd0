#!/usr/bin/env python3
"""resp_redis_py.py — redis-py (Debian's python3-redis) as a ratelimitd client over resp_listen
(issue 32): ratelimitd's own acquire called with execute_command shares one count with HTTP
callers, a pipeline of acquires is answered in order, CL.THROTTLE answers redis-cell's five
integers (its quantity-0 peek too), and redis-py's password option (AUTH on connect) opens a protected listener.

Runs the real build/bin/ratelimitd on free loopback ports (usage: resp_redis_py.py BIN_DIR).
Every wait is bounded; the 1 h fixed window starts with room left (await_window_room).
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
from loopback import await_window_room, die_with_parent, free_port, listening, wait_for  # noqa: E402

BIN = sys.argv.pop(1) if len(sys.argv) > 1 else "build/bin"
PASSWORD = "s3cret-pass"


def http_acquire(port, key, policy):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/acquire",
                                 data=json.dumps({"key": key, "policy": policy}).encode(), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def as_dict(flat):
    """RESP2's flat array of name, value pairs as a dict (names decoded)."""
    return {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}


class RedisPy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        await_window_room([3600], 60)
        cls.http, cls.resp = free_port(), free_port()
        cls.dir = tempfile.mkdtemp(prefix="resp-redis-py-")
        config = os.path.join(cls.dir, "ratelimit.yaml")
        with open(config, "w") as f:
            f.write(f"listen: 127.0.0.1:{cls.http}\nresp_listen: 127.0.0.1:{cls.resp}\n"
                    f"resp_password: {PASSWORD}\n"
                    "policies:\n  api: {algorithm: fixed_window, limit: 10, window: 1h}\n")
        cls.log = open(os.path.join(cls.dir, "ratelimitd.log"), "w")
        cls.proc = subprocess.Popen([os.path.join(BIN, "ratelimitd"), "--config", config],
                                    stdout=cls.log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        if not wait_for(lambda: listening(cls.resp) and listening(cls.http), 10):
            cls.proc.kill()
            raise RuntimeError("ratelimitd did not come up: " + open(cls.log.name).read())

    @classmethod
    def tearDownClass(cls):
        cls.proc.kill()
        cls.proc.wait(10)
        cls.log.close()

    def client(self):
        return redis.Redis(host="127.0.0.1", port=self.resp, password=PASSWORD, socket_timeout=10)

    def test_acquire_shares_one_count_with_http(self):
        r = self.client()
        seen = []
        for i in range(10):  # alternately over RESP and HTTP: one count of 10
            if i % 2 == 0:
                d = as_dict(r.execute_command("RL.ACQUIRE", "shared", "api"))
                self.assertEqual(d["allowed"], 1, d)
                self.assertEqual(d["policy"], b"api")
                seen.append(d["remaining"])
            else:
                status, body = http_acquire(self.http, "shared", "api")
                self.assertEqual(status, 200, body)
                seen.append(body["remaining"])
        self.assertEqual(seen, list(range(9, -1, -1)))
        d = as_dict(r.execute_command("RL.ACQUIRE", "shared", "api"))
        self.assertEqual((d["allowed"], d["remaining"]), (0, 0), d)
        self.assertGreater(d["retry_after_ms"], 0)
        self.assertEqual(http_acquire(self.http, "shared", "api")[0], 429)

    def test_pipeline_in_order(self):
        p = self.client().pipeline(transaction=False)
        for _ in range(12):
            p.execute_command("RL.ACQUIRE", "piped", "api")
        answers = [as_dict(a) for a in p.execute()]
        self.assertEqual([a["remaining"] for a in answers], list(range(9, -1, -1)) + [0, 0])
        self.assertEqual([a["allowed"] for a in answers], [1] * 10 + [0, 0])

    def test_cl_throttle_and_errors(self):
        r = self.client()
        self.assertEqual(r.execute_command("CL.THROTTLE", "user123", 15, 30, 60, 1), [0, 16, 15, -1, 2])
        # Quantity 0, redis-cell's peek: what is left, taking nothing (twice the same answer).
        for _ in range(2):
            self.assertEqual(r.execute_command("CL.THROTTLE", "user123", 15, 30, 60, 0), [0, 16, 15, -1, 2])
        self.assertEqual(r.execute_command("CL.THROTTLE", "user123", 15, 30, 60), [0, 16, 14, -1, 4])
        with self.assertRaises(redis.ResponseError) as e:
            r.execute_command("RL.ACQUIRE", "k", "nope")
        self.assertEqual(str(e.exception), "unknown_policy: unknown policy 'nope'")
        self.assertTrue(r.ping())

    def test_password_required(self):
        bare = redis.Redis(host="127.0.0.1", port=self.resp, socket_timeout=10)
        with self.assertRaises(redis.AuthenticationError):
            bare.execute_command("RL.ACQUIRE", "k", "api")


if __name__ == "__main__":
    unittest.main()
