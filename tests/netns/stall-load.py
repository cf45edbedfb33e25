#!/usr/bin/env python3
"""stall-load.py HOST PORT NSTALL RATE SECONDS [DIR]: NSTALL connections held in the middle of a rock's hello (its 8-byte magic and 16 more bytes, then silence; reopened when the server drops one) plus RATE EDP probes a second (connect, then end of file at once), for SECONDS or until DIR/stop exists; DIR/ready is made once the stalls are in place. Every connection is made without waiting for it, many at once, so the rate holds on a long path. Prints the counts on stderr."""
import errno
import os
import resource
import selectors
import signal
import socket
import sys
import time

host, port = sys.argv[1], int(sys.argv[2])
nstall, rate, seconds = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
folder = sys.argv[6] if len(sys.argv) > 6 else None
stopfile = folder and os.path.join(folder, "stop")
HELLO_START = b"\x89ROCKS\r\n" + bytes(16)
# A probe not connected by then counts as failed: five SYN retries on a
# lossy path profile take 31 s.
PROBE_LIMIT_S = 40.0


def stop(signum, frame):
    raise SystemExit(0)


soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
signal.signal(signal.SIGTERM, stop)
sel = selectors.DefaultSelector()
inflight = {}  # a connecting socket -> (the time it was started, "probe" or "stall")
reopened = probes = failed = started = 0


def connect_start(kind, now):
    """Starts a connection without waiting for it: False if refused at once."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    if s.connect_ex((host, port)) not in (0, errno.EINPROGRESS):
        s.close()
        return False
    inflight[s] = (now, kind)
    sel.register(s, selectors.EVENT_WRITE, kind)
    return True


def connected(s, ok):
    """A connection's outcome: a probe ends at once, a stall sends the start of a hello and stays."""
    global probes, failed
    sel.unregister(s)
    _, kind = inflight.pop(s)
    if ok and kind == "stall":
        try:
            s.send(HELLO_START)
            sel.register(s, selectors.EVENT_READ, "stalled")
            return
        except OSError:
            pass
    elif ok:
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            ok = False
    s.close()
    # A stall that cannot connect is a failure, not retried (the server
    # is gone, or refusing).
    if kind == "stall" and ok:
        if not connect_start("stall", time.monotonic()):
            failed += 1
    elif ok:
        probes += 1
    else:
        failed += 1


def stalled_ended(s):
    """A stall the server ended (its hello deadline, the cap) is replaced."""
    global reopened
    global failed
    sel.unregister(s)
    s.close()
    if not connect_start("stall", time.monotonic()):
        failed += 1
    reopened += 1


for _ in range(nstall):
    s = socket.create_connection((host, port), timeout=60)
    s.sendall(HELLO_START)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, "stalled")
if folder:
    open(os.path.join(folder, "ready"), "w").close()
start = time.monotonic()
end = start + seconds
try:
    while time.monotonic() < end and not (stopfile and os.path.exists(stopfile)):
        now = time.monotonic()
        while started < (now - start) * rate:
            if not connect_start("probe", now):
                failed += 1
            started += 1
        wait = min(max(0.0, start + started / rate - time.monotonic()), 0.05)
        for key, _ in sel.select(wait):
            s = key.fileobj
            if key.data == "stalled":
                stalled_ended(s)
            else:
                connected(s, s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0)
        now = time.monotonic()
        for s in [s for s, (t, _) in inflight.items() if now - t > PROBE_LIMIT_S]:
            connected(s, False)
finally:
    elapsed = time.monotonic() - start
    print("stall-load: %d probes in %.1f s (%.0f/s, %d failed), %d stalls reopened" %
          (probes, elapsed, probes / elapsed, failed, reopened), file=sys.stderr)
