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
    got = b""
    while b"\r\n\r\n" not in got:
        d = conn.recv(4096)
        if not d:
            return  # a rock client's probe, were the listener plain
        got += d
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
