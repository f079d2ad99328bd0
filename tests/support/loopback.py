"""loopback.py — the small helpers every Python test and bench script of this repository needs
to run real processes on this machine: a free loopback port, a bounded wait, "does anything
listen there", "has the server read what I sent", and a start with room left in the clock's
rate-limit windows.

Why one module: these lines were copied into six scripts (tests/fault, tests/monitoring,
tests/proxies, tests/docs, tests/rls, tools/sim) and had begun to drift. A script imports it by
path, so it works from a clean clone, from ctest and by hand, with nothing installed:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
    from loopback import free_port, listening, wait_for  # noqa: E402

Invariants: loopback only (127.0.0.1); every wait is bounded by its caller's timeout; nothing
here starts or stops a process (die_with_parent is what a script's Popen runs in its child). A free port is bound to port 0 and released, so another process
may take it before it is used: callers that start a server on it must check it came up.
"""
import ctypes
import signal
import socket
import time

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)  # loaded here, not in the forked child


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout, step=0.05):
    """Polls pred() every `step` seconds until it is true or `timeout` seconds have passed;
    returns its last answer (asked once more at the deadline)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


def listening(port, timeout=0.2):
    """True when a TCP connection to 127.0.0.1:port is accepted within `timeout` seconds."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=timeout).close()
        return True
    except OSError:
        return False


def die_with_parent():
    """preexec_fn for subprocess.Popen of a server (redis-server, ratelimitd, a proxy): the child
    gets SIGKILL when the script dies, however it dies (Linux PR_SET_PDEATHSIG), so a script
    killed by a ctest timeout leaves no server holding ports, files or the quiet lock. The
    signal follows the *thread* that started the child: start servers from the main thread."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def await_window_room(windows_s, room_s):
    """Returns when each window (seconds; fixed_window, sliding_window_counter and Envoy's
    per-unit counters count in windows aligned to the Unix epoch on the wall clock, in
    ratelimitd and in Redis alike) has at least `room_s` seconds left, sleeping past the
    nearest boundary that lacks it. A script that asserts exact counts calls it before it
    counts, with `room_s` its own generous bound on how long the counting takes: else a
    boundary mid-count (at certain times of day) gives the units back. The Python twin of
    tests/support/window_room.h."""
    if any(room_s >= w for w in windows_s):
        raise ValueError("await_window_room: room must be below the window")
    for _ in range(len(windows_s) + 1):
        now = time.time()
        lacking = [w - now % w for w in windows_s if w - now % w < room_s]
        if not lacking:
            return
        time.sleep(min(lacking) + 0.05)  # a known instant, not a guess: 50 ms past the boundary


def read_by_server(sock, timeout=10.0):
    """True once the server's end of `sock` (a TCP connection on 127.0.0.1) has read every byte
    sent on it: this end has nothing unacknowledged and the server's socket nothing left to read
    (/proc/net/tcp's tx_queue:rx_queue). The event "the server has read this partial request",
    which no answer shows, instead of a guessed sleep. The Python twin of
    tests/server/daemon.h's Client::wait_read_by_server."""
    me = "0100007F:%04X" % sock.getsockname()[1]
    server = "0100007F:%04X" % sock.getpeername()[1]

    def done():
        sent = taken = False
        with open("/proc/net/tcp") as f:
            next(f)  # the header
            for line in f:
                fields = line.split()
                tx, rx = fields[4].split(":")
                if fields[1] == me and fields[2] == server:
                    sent = int(tx, 16) == 0
                if fields[1] == server and fields[2] == me:
                    taken = int(rx, 16) == 0
        return sent and taken
    return wait_for(done, timeout, step=0.001)
