#!/usr/bin/env python3
"""rock-readiness.py: the servers and clients of rock-readiness.sh: readiness and endings that a reader of its own would get wrong.

  rock-readiness.py serve PORT     backend: per connection, by its first line:
      "hello": a greeting, its end (SHUT_WR), no reading for 15 s
      "answer": reads 10 bytes, answers, then resets (SO_LINGER 0)
  rock-readiness.py MODE PORT      a client; prints one line "MODE: ..."
"""
import ctypes
import errno
import json
import select
import socket
import struct
import subprocess
import sys
import threading
import time


def out(mode, *a):
    print(mode + ":", *a, flush=True)


def handle(c):
    try:
        what = c.recv(6)
        if what == b"answer":
            c.recv(10)
            c.sendall(b"HTTP/1.0 413 Too Large\r\n\r\nthe whole answer\n")
            time.sleep(0.3)
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()
            return
        c.sendall(b"hello from backend\n")
        c.shutdown(socket.SHUT_WR)
        time.sleep(15)
        while c.recv(1 << 20):
            pass
    except OSError:
        pass
    c.close()


def serve(port):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    while True:
        c, _ = listener.accept()
        threading.Thread(target=handle, args=(c,), daemon=True).start()


def hello(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"hello\n")
    return s


def greeting_then_end(s):
    """The greeting and the backend's (authenticated) end, by poll."""
    p = select.poll()
    p.register(s.fileno(), select.POLLIN)
    buf = b""
    while True:
        p.poll(5000)
        try:
            d = s.recv(65536)
        except BlockingIOError:
            continue
        if not d:
            return buf
        buf += d


def fill(s):
    """Our sending side full (the backend does not read for a while): no
    progress for 0.5 s, or 10 s of it (a slow build's rings fill slowly)."""
    last = start = time.monotonic()
    while time.monotonic() - last < 0.5 and time.monotonic() - start < 10:
        try:
            s.send(b"x" * 65536)
            last = time.monotonic()
        except BlockingIOError:
            time.sleep(0.02)


def writer(mode, port):
    """Waiting to write after the peer's end: no CPU (it spun at 100 %)."""
    s = hello(port)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    s.setblocking(False)
    greeting_then_end(s)
    fill(s)
    c0 = time.process_time()
    if mode == "poll-out":
        p = select.poll()
        p.register(s.fileno(), select.POLLOUT)
        p.poll(2000)
    elif mode == "select-out":
        select.select([], [s], [], 2.0)
    else:
        ep = select.epoll()
        ep.register(s.fileno(), select.EPOLLOUT)
        ep.poll(2)
    out(mode, "cpu %.2f" % (time.process_time() - c0))


def et_rdhup(port):
    """nginx's reader: EPOLLET|EPOLLRDHUP, bytes and the end both in."""
    s = hello(port)
    s.setblocking(False)
    time.sleep(1.0)
    ep = select.epoll()
    ep.register(s.fileno(), select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLET)
    got, end = b"", False
    deadline = time.monotonic() + 5
    while not end and time.monotonic() < deadline:
        evs = ep.poll(max(0.0, deadline - time.monotonic()))
        while evs:
            try:
                d = s.recv(65536)
            except BlockingIOError:
                break
            if not d:
                end = True
                break
            got += d
    out("et-rdhup", "%d bytes, %s" % (len(got), "the end" if end else "no end in 5 s"))


def exclusive(port):
    s = hello(port)
    ep = select.epoll()
    try:
        ep.register(s.fileno(), select.EPOLLIN | select.EPOLLEXCLUSIVE)
        out("exclusive", "registered, events", [hex(e) for _, e in ep.poll(3)])
    except OSError as e:
        out("exclusive", "refused:", e)


def answer(port):
    """A server that answers, then resets: the answer, then the error."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"answer" + b"POST / HTTP/1.0\r\n\r\n")
    time.sleep(1.5)
    got = b""
    while True:
        try:
            d = s.recv(4096)
        except OSError as e:
            out("answer", "%d bytes, then %s" % (len(got), errno.errorcode.get(e.errno)))
            return
        if not d:
            out("answer", "%d bytes, then a clean end" % len(got))
            return
        got += d


def reuse(port, echo_port, rock):
    """The rock's number closed behind the library (close_range) and taken
    by a plain connection: the rock's end must not touch that one."""
    libc = ctypes.CDLL(None, use_errno=True)
    a = hello(port)
    a.recv(100)
    fd = a.fileno()
    if libc.syscall(436, fd, fd, 0) != 0:     # close_range(fd, fd, 0)
        out("reuse", "no close_range")
        return
    a.detach()
    b = socket.create_connection(("127.0.0.1", echo_port))
    if b.fileno() != fd:
        out("reuse", "the number was not reused")
        return
    b.sendall(b"ping1\n")
    b.recv(100)
    ls = json.loads(subprocess.run([rock, "ls", "--json"], capture_output=True,
                                   text=True).stdout)
    for r in ls:
        subprocess.run([rock, "kill", r["id"]], capture_output=True)
    time.sleep(1)
    try:
        b.sendall(b"ping2\n")
        out("reuse", "the plain connection after the kill:", b.recv(100))
    except OSError as e:
        out("reuse", "the plain connection after the kill: error", e)


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "serve":
        serve(port)
    elif mode in ("poll-out", "select-out", "epoll-out"):
        writer(mode, port)
    elif mode == "et-rdhup":
        et_rdhup(port)
    elif mode == "exclusive":
        exclusive(port)
    elif mode == "answer":
        answer(port)
    elif mode == "reuse":
        reuse(port, int(sys.argv[3]), sys.argv[4])


main()
