#!/usr/bin/env python3
"""stall-load.py HOST PORT NSTALL RATE SECONDS [DIR]: NSTALL connections held in the middle of a rock's hello (its 8-byte magic and 16 more bytes, then silence; reopened when the server drops one) plus RATE EDP probes a second (connect, then end of file at once), for SECONDS or until DIR/stop exists; DIR/ready is made once the stalls are in place. Prints the counts on stderr."""
import os
import select
import signal
import socket
import sys
import time

host, port = sys.argv[1], int(sys.argv[2])
nstall, rate, seconds = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
folder = sys.argv[6] if len(sys.argv) > 6 else None
stopfile = folder and os.path.join(folder, "stop")
HELLO_START = b"\x89ROCKS\r\n" + bytes(16)


def stall():
    s = socket.create_connection((host, port))
    s.sendall(HELLO_START)
    return s


def stop(signum, frame):
    raise SystemExit(0)


signal.signal(signal.SIGTERM, stop)
stalls = [stall() for _ in range(nstall)]
if folder:
    open(os.path.join(folder, "ready"), "w").close()
reopened = probes = failed = 0
start = time.monotonic()
end = start + seconds
next_check = start
try:
    while time.monotonic() < end and not (stopfile and os.path.exists(stopfile)):
        try:
            s = socket.create_connection((host, port))
            s.shutdown(socket.SHUT_WR)
            s.close()
            probes += 1
        except OSError:
            failed += 1
        now = time.monotonic()
        if now >= next_check:
            # A stall the server ended (its hello deadline, the cap) is replaced.
            gone, _, _ = select.select(stalls, [], [], 0)
            for s in gone:
                stalls.remove(s)
                s.close()
                stalls.append(stall())
                reopened += 1
            next_check = now + 0.25
        wait = start + (probes + failed) / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
finally:
    elapsed = time.monotonic() - start
    print("stall-load: %d probes in %.1f s (%.0f/s, %d failed), %d stalls reopened" %
          (probes, elapsed, probes / elapsed, failed, reopened), file=sys.stderr)
