#!/usr/bin/env python3
"""rock-early.py: one program's second connect to a rockd, which returns at TCP up while the handshake finishes behind it, used the ways programs use a new connection (rock-early.sh)."""
import ctypes
import errno
import os
import select
import socket
import struct
import sys
import time

MSG = bytes(range(64)) * 4          # 256 bytes, every value


def connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=None)


def echo_blocking(s, data=MSG):
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        d = s.recv(65536)
        if not d:
            raise SystemExit("end of stream after %d bytes" % len(got))
        got += d
    if got != data:
        raise SystemExit("the echo differs")


def wait_for(s, ev, ms=10000):
    p = select.poll()
    p.register(s.fileno(), ev)
    r = p.poll(ms)
    if not r or not (r[0][1] & ev):
        raise SystemExit("poll gave %r for %#x" % (r, ev))
    return r[0][1]


def read_all(s, n):
    got = b""
    while len(got) < n:
        wait_for(s, select.POLLIN)
        try:
            d = s.recv(65536)
        except BlockingIOError:
            continue
        if not d:
            raise SystemExit("end of stream after %d bytes" % len(got))
        got += d
    return got


def m_blocking(s, port):
    echo_blocking(s)


def m_nonblock_write(s, port):
    # A first write on a new connection finds room: never EAGAIN.
    s.setblocking(False)
    n = s.send(MSG)
    if n != len(MSG):
        raise SystemExit("a first non-blocking send took %d of %d" % (n, len(MSG)))
    if read_all(s, len(MSG)) != MSG:
        raise SystemExit("the echo differs")


def m_poll_out(s, port):
    s.setblocking(False)
    wait_for(s, select.POLLOUT)
    s.send(MSG)
    if read_all(s, len(MSG)) != MSG:
        raise SystemExit("the echo differs")


def m_select(s, port):
    _, w, _ = select.select([], [s], [], 10)
    if s not in w:
        raise SystemExit("select: not writable within 10 s")
    s.sendall(MSG)
    r, _, _ = select.select([s], [], [], 10)
    if s not in r:
        raise SystemExit("select: not readable within 10 s")
    got = s.recv(65536)
    got += read_rest(s, len(MSG) - len(got))
    if got != MSG:
        raise SystemExit("the echo differs")


def read_rest(s, n):
    got = b""
    while len(got) < n:
        d = s.recv(65536)
        if not d:
            raise SystemExit("end of stream")
        got += d
    return got


def m_epoll(s, port):
    s.setblocking(False)
    ep = select.epoll()
    ep.register(s.fileno(), select.EPOLLIN | select.EPOLLOUT | select.EPOLLET)
    sent = False
    got = b""
    deadline = time.monotonic() + 10
    while len(got) < len(MSG):
        if time.monotonic() > deadline:
            raise SystemExit("epoll: no echo within 10 s")
        for _, ev in ep.poll(1):
            if ev & select.EPOLLOUT and not sent:
                if s.send(MSG) != len(MSG):
                    raise SystemExit("short send")
                sent = True
            if ev & select.EPOLLIN:
                while True:
                    try:
                        d = s.recv(65536)
                    except BlockingIOError:
                        break
                    if not d:
                        raise SystemExit("end of stream")
                    got += d
    if got != MSG:
        raise SystemExit("the echo differs")


def m_names(s, port):
    local = s.getsockname()
    peer = s.getpeername()
    if local[1] == 0 or local[0] != "127.0.0.1":
        raise SystemExit("getsockname right after connect: %r" % (local,))
    if peer != ("127.0.0.1", port):
        raise SystemExit("getpeername right after connect: %r" % (peer,))
    echo_blocking(s)


def m_sockopt(s, port):
    # Options set at once (http.client's TCP_NODELAY) are the rock's.
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 7, 0))
    if s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 1:
        raise SystemExit("TCP_NODELAY set after connect reads back off")
    if struct.unpack("ll", s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16)) != (7, 0):
        raise SystemExit("SO_RCVTIMEO set after connect reads back otherwise")
    echo_blocking(s)


def m_shut_wr(s, port):
    s.sendall(MSG)
    s.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
    if got != MSG:
        raise SystemExit("after SHUT_WR: %d bytes back, not the %d sent" % (len(got), len(MSG)))


def m_fork(s, port):
    pid = os.fork()
    if pid == 0:
        try:
            echo_blocking(s)
            os._exit(0)
        except SystemExit as e:
            sys.stderr.write("child: %s\n" % e)
            os._exit(1)
    _, st = os.waitpid(pid, 0)
    if st != 0:
        raise SystemExit("the child's echo failed (status %d)" % st)


def m_stdio(s, port):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fdopen.restype = ctypes.c_void_p
    libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
    libc.fwrite.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
    libc.fflush.argtypes = [ctypes.c_void_p]
    fd = os.dup(s.fileno())
    f = libc.fdopen(fd, b"w")
    if not f:
        raise SystemExit("fdopen failed")
    if libc.fwrite(MSG, 1, len(MSG), f) != len(MSG) or libc.fflush(f) != 0:
        raise SystemExit("stdio write failed: %s" % os.strerror(ctypes.get_errno()))
    if read_rest(s, len(MSG)) != MSG:
        raise SystemExit("the echo differs")


def m_close(s, port):
    pass                        # closed at once, as a connect-only client


def m_failed(s, port):
    # The backend is gone: the connect returned, the failure is the next
    # call's error, never an end of stream.
    try:
        s.sendall(MSG)
        d = s.recv(65536)
    except OSError as e:
        if e.errno in (errno.ECONNREFUSED, errno.ECONNRESET, errno.EPIPE):
            print("error %s" % errno.errorcode[e.errno])
            return
        raise SystemExit("unexpected error %r" % e)
    raise SystemExit("no error: read %r" % d[:16])


def m_zero_write(s, port):
    """A zero-length write says 0 at once (it hung on a rock: taken for
    no room), before the answer and after."""
    if s.send(b"") != 0:
        raise SystemExit("a zero-length send did not return 0")
    echo_blocking(s)
    if s.send(b"") != 0:
        raise SystemExit("a zero-length send on the rock did not return 0")
    echo_blocking(s)


MODES = {n[2:].replace("_", "-"): f for n, f in globals().items() if n.startswith("m_")}


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    pause = sys.argv[3] if len(sys.argv) > 3 else None
    first = connect(port)           # a full handshake: the ticket
    echo_blocking(first)
    first.close()
    if pause:                       # the script changes the world here
        open(pause + ".ready", "w").close()
        deadline = time.monotonic() + 30
        while not os.path.exists(pause + ".go"):
            if time.monotonic() > deadline:
                raise SystemExit("no go within 30 s")
            time.sleep(0.02)
    if mode == "refused":           # rockd gone: TCP's own answer
        try:
            connect(port)
        except ConnectionRefusedError:
            print("ok refused")
            return
        raise SystemExit("a connect to a closed port succeeded")
    s = connect(port)
    MODES[mode](s, port)
    s.close()
    print("ok %s" % mode)


if __name__ == "__main__":
    main()
