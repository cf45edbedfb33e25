#!/usr/bin/env python3
"""eof-reader.py: a download client in Python, one way of waiting per mode (select, selectors, epoll edge-triggered, asyncio, urllib over HTTP), telling a clean end from an error.

Usage: eof-reader.py MODE HOST PORT OUT
Exit 0 at a clean end of file; 1 with "eof-reader.py MODE: error ENAME
after N bytes" on stderr when a call failed. Then "eof-reader.py MODE:
empty wakeups N": how often a wait ended for a read that found nothing.
"""
import asyncio
import errno
import select
import selectors
import socket
import sys
import urllib.error
import urllib.request

mode, host, port, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
got = 0
empty = 0  # wakeups whose first read found nothing


def report():
    sys.stderr.write(f"eof-reader.py {mode}: empty wakeups {empty}\n")


def fail(e):
    name = errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__
    sys.stderr.write(f"eof-reader.py {mode}: error {name} after {got} bytes ({e})\n")
    report()
    sys.exit(1)


def drain(sock, out):
    """After a wakeup: non-blocking reads until EAGAIN (False) or the end (True)."""
    global got, empty
    first = True
    while True:
        try:
            b = sock.recv(65536)
        except BlockingIOError:
            empty += first
            return False
        except OSError as e:
            fail(e)
        first = False
        if not b:
            return True
        got += len(b)
        out.write(b)


def by_select(sock, out):
    sock.setblocking(False)
    while True:
        r, _, _ = select.select([sock], [], [])
        if r and drain(sock, out):
            return


def by_selectors(sock, out):
    sock.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    while True:
        if sel.select() and drain(sock, out):
            return


def by_epoll_et(sock, out):
    sock.setblocking(False)
    ep = select.epoll()
    ep.register(sock.fileno(), select.EPOLLIN | select.EPOLLET | select.EPOLLRDHUP)
    while True:
        if ep.poll() and drain(sock, out):
            return


def by_http(out):
    """urllib, as a script fetches a URL: an HTTP/1.0 body read to its end."""
    global got
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/") as r:
            while True:
                b = r.read(65536)
                if not b:
                    break
                got += len(b)
                out.write(b)
    except OSError as e:
        fail(e.reason if isinstance(e, urllib.error.URLError) and
             isinstance(e.reason, OSError) else e)


async def by_asyncio_main(out):
    global got
    try:
        reader, writer = await asyncio.open_connection(host, port)
        while True:
            b = await reader.read(65536)
            if not b:
                break
            got += len(b)
            out.write(b)
        writer.close()
    except OSError as e:
        fail(e)


def main():
    with open(path, "wb", buffering=0) as out:
        if mode == "asyncio":
            asyncio.run(by_asyncio_main(out))
            return
        if mode == "http":
            by_http(out)
            return
        sock = socket.create_connection((host, port))
        {"select": by_select, "selectors": by_selectors,
         "epoll-et": by_epoll_et}[mode](sock, out)


main()
report()
