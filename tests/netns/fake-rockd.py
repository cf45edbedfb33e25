#!/usr/bin/env python3
# fake-rockd.py: a stranger posing as rockd for rock-identity.sh: announces itself to probes, answers every hello with MODE (busy: an unsigned ERROR BUSY; garbage: bytes that are no answer), and logs any plain connection.
# usage: fake-rockd.py ADDR PORT READY LOG MODE VERSION (the protocol version it claims)
import os
import socket
import sys

addr, port, ready, log, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
version = int(sys.argv[6])
ANNOUNCE = b"\x89ROCKS\r\n" + bytes([version, version, 0, 3]) + os.urandom(1012)
HELLO_TOTAL = 1024 + 62
ANSWER = {
    "busy": bytes([0x7F, 3, 4]) + b"busy" + bytes(64),
    "garbage": b"HTTP/1.0 400 Bad Request\r\n\r\n",
}[mode]

ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((addr, port))
ls.listen(16)
with open(ready, "w") as f:
    f.write("ready\n")
out = open(log, "a", buffering=1)
while True:
    c, _ = ls.accept()
    c.settimeout(1)
    got = b""
    try:
        while len(got) < HELLO_TOTAL:
            b = c.recv(HELLO_TOTAL - len(got))
            if not b:
                break
            got += b
            if not (b"\x89ROCKS".startswith(got) or got.startswith(b"\x89ROCKS")):
                break
    except OSError:
        pass
    if got == b"":
        out.write("probe\n")
        c.sendall(ANNOUNCE)
    elif got.startswith(b"\x89ROCKS"):
        out.write("hello\n")
        c.sendall(ANSWER)
    else:
        out.write("PLAIN %r\n" % got[:40])
    c.close()
