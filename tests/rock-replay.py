#!/usr/bin/env python3
"""rock-replay.py: a recording tap in front of rockd, a backend that logs what it is given, a program whose second connect sends its first bytes early, and the recorded first flight sent to rockd again (rock-replay.sh)."""
import os
import socket
import sys
import threading
import time


def serve(port, handle):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(64)
    n = 0
    while True:
        c, _ = ls.accept()
        threading.Thread(target=handle, args=(c, n), daemon=True).start()
        n += 1


def backend(port, log):
    """Echoes every connection; appends what each gave to log."""
    lock = threading.Lock()

    def handle(c, n):
        while True:
            d = c.recv(65536)
            if not d:
                break
            with lock, open(log, "ab") as f:
                f.write(d)
            c.sendall(d)
        c.close()
    serve(port, handle)


def pump(src, dst, record):
    try:
        while True:
            d = src.recv(65536)
            if not d:
                break
            if record is not None:
                record.write(d)
                record.flush()
            dst.sendall(d)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def tap(port, to, outdir):
    """Relays to 127.0.0.1:to; what clients send, per connection, to
    outdir/conn-N.bin."""
    def handle(c, n):
        up = socket.create_connection(("127.0.0.1", to))
        with open(os.path.join(outdir, "conn-%d.bin" % n), "wb") as rec:
            t = threading.Thread(target=pump, args=(up, c, None), daemon=True)
            t.start()
            pump(c, up, rec)
            t.join(10)
        c.close()
        up.close()
    serve(port, handle)


def echo(port, data):
    # Blocking, as most programs connect: the early connect's way.
    s = socket.create_connection(("127.0.0.1", port), timeout=None)
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        d = s.recv(65536)
        if not d:
            break
        got += d
    s.close()
    return got == data


def client(port, marker):
    """Two connects: the first meets rockd (a full handshake, a ticket),
    the second resumes early with marker as its first bytes."""
    ok = echo(port, b"first connect\n") and echo(port, marker.encode())
    print("ok" if ok else "echo differs")


def replay(port, path):
    """The recorded bytes, again, on a connection of our own: what came
    back (its length, the answer's features, whether the echo did)."""
    with open(path, "rb") as f:
        data = f.read()
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(data)
    s.settimeout(1.5)
    got = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except (socket.timeout, OSError):
        pass
    s.close()
    feats = "%02x%02x" % (got[2], got[3]) if len(got) >= 4 else "none"
    print(len(got), feats, got[:1].hex() if got else "none")


def main():
    mode = sys.argv[1]
    if mode == "backend":
        backend(int(sys.argv[2]), sys.argv[3])
    elif mode == "tap":
        tap(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    elif mode == "client":
        client(int(sys.argv[2]), sys.argv[3])
    elif mode == "replay":
        replay(int(sys.argv[2]), sys.argv[3])
    else:
        raise SystemExit("mode?")


if __name__ == "__main__":
    main()
