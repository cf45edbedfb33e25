#!/usr/bin/env python3
"""rock-serve-blocking.py HOST PORT FILE: FILE over HTTP/1.0 from two single-threaded blocking servers: socketserver.TCPServer on PORT, and a bare loop of blocking accept() calls (no poll) on PORT+1."""
import socket
import socketserver
import sys
import threading

host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(path, "rb") as f:
    body = f.read()
reply = b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body


def answer(conn):
    # A client's request within 2 s, as a blocking server must bound it
    # (a silent client would hold every other one up): on a lossy path a
    # rock's hello can come after the engine's first-bytes time, and then
    # it is a plain client's silence, here as without rock.
    conn.settimeout(2.0)
    got = b""
    try:
        while b"\r\n\r\n" not in got:
            d = conn.recv(4096)
            if not d:
                return  # a rock client's probe, were the listener plain
            got += d
    except socket.timeout:
        print("a client silent for 2 s: dropped", flush=True)
        return
    conn.settimeout(None)
    conn.sendall(reply)


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        answer(self.request)


def bare_loop():
    ls = socket.create_server((host, port + 1))
    while True:
        conn, _ = ls.accept()
        try:
            answer(conn)
        except OSError:
            pass
        conn.close()


socketserver.TCPServer.allow_reuse_address = True
server = socketserver.TCPServer((host, port), Handler)
threading.Thread(target=bare_loop, daemon=True).start()
print("listening", flush=True)
server.serve_forever()
