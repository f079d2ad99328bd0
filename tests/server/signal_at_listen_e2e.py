#!/usr/bin/env python3
"""signal_at_listen_e2e.py — the real ratelimitd, signalled between binding its port and
serving: SIGTERM must drain and exit 0; SIGHUP must reload and keep it serving.

Why: the daemon bound its listeners in App::open() but caught signals only in App::run(),
moments later. A SIGTERM in between — a supervisor stopping a daemon that has just come up, a
script that waits only for the port — killed it with the default action (exit by signal, the
connections it had accepted into its backlog reset), and a SIGHUP killed it too. Signals are now
caught from just before the first bind (app.h). The window was under a millisecond (1 in 60 to
67 in 300 starts signalled at their first accept died of it here, by load), too narrow for a
test to hit reliably, so this one widens it: the daemon runs under strace, which holds the return
of its first listen() for 300 ms — the socket already listens in the kernel, so a client's
connect is accepted — and the signal is sent inside that hold. Before the fix the SIGTERM case
died of it every time (exit -15; SIGHUP's default action ends a process the same way); after
it, both exit 0.

usage: signal_at_listen_e2e.py BIN_DIR
Exit 0 when both cases behave; 1 at the first that does not (its log printed). Loopback only,
a free port, every wait bounded; the daemon is stopped by pid.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
from loopback import die_with_parent, free_port, listening  # noqa: E402

RATELIMITD = os.path.join(sys.argv[1], "ratelimitd")
HOLD_US = 300000  # how long strace holds the first listen()'s return


class Held:
    """ratelimitd under strace, its first listen() held: .pid is the daemon's, .port accepts."""

    def __init__(self, work, name):
        self.log_path = os.path.join(work, name + ".log")
        self.port = free_port()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                ["strace", "-o", "/dev/null", "-f", "-e", "trace=listen",
                 "-e", "inject=listen:delay_exit=%d:when=1" % HOLD_US,
                 RATELIMITD, "--config", os.path.join(work, "c.yaml"), "--listen", "127.0.0.1:%d" % self.port],
                stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        # listen() was entered after the last refused connect began: a signal sent less than
        # the hold after that moment lands inside the hold.
        self.t0 = self.refused = time.monotonic()
        self.was_refused = False
        end = self.t0 + 10
        while time.monotonic() < end and self.proc.poll() is None:
            attempt = time.monotonic()
            if listening(self.port, 0.5):
                break
            self.refused, self.was_refused = attempt, True
            time.sleep(0.002)
        self.accepted = time.monotonic() - self.t0
        kids = []
        if self.proc.poll() is None:
            with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
                kids = f.read().split()
        self.pid = int(kids[0]) if kids else None

    def fail(self, msg):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)
        print("%s\n%s" % (msg, open(self.log_path, errors="replace").read()))
        sys.exit(1)

    def exit_code(self):
        """strace exits with its tracee's status (a negative code: killed by that signal)."""
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.fail("did not exit within 10 s of SIGTERM")


def run(work):
    with open(os.path.join(work, "c.yaml"), "w") as f:
        f.write("policies:\n  api: { algorithm: fixed_window, limit: 5, window: 1m }\n")
    for sig in (signal.SIGTERM, signal.SIGHUP):
        d = Held(work, sig.name)
        if d.pid is None:
            d.fail("%s: the daemon never accepted (strace exit %s)" % (sig.name, d.proc.poll()))
        os.kill(d.pid, sig)
        # Inside the hold, or the case proves nothing (a machine too slow to connect in 300 ms).
        inside = d.was_refused and time.monotonic() - d.refused < HOLD_US / 1e6
        if sig == signal.SIGHUP:
            time.sleep(HOLD_US / 1e6)  # past the hold: run() has handled the SIGHUP (a reload)
            if d.proc.poll() is not None or not listening(d.port):
                d.fail("SIGHUP at listen: exit %s, serving %s" % (d.proc.poll(), listening(d.port)))
            os.kill(d.pid, signal.SIGTERM)
        rc = d.exit_code()
        if rc != 0:
            d.fail("%s at listen: exit %d (negative: killed by that signal)" % (sig.name, rc))
        if not inside:
            d.fail("%s may have missed the %d ms hold (a refused connect first: %s; sent %.0f ms after "
                   "the last): rerun on a quieter machine" %
                   (sig.name, HOLD_US / 1000, d.was_refused, (time.monotonic() - d.refused) * 1e3))
        print("%s sent at the first accept (%.0f ms after start, inside the hold): exit 0" %
              (sig.name, d.accepted * 1e3))


def main():
    work = tempfile.mkdtemp(prefix="signal-at-listen-")
    try:
        run(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
