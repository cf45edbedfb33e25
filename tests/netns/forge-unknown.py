#!/usr/bin/env python3
# forge-unknown.py: a fake rockd for rock-identity.sh: answers reconnect requests with an ERROR UNKNOWN nobody signed, every other one with an ERROR longer than any (a text length of 255, then 319 bytes).
# usage: forge-unknown.py ADDR PORT READY COUNT
# Writes READY once listening; appends a line to COUNT per answer.
import socket
import sys

addr, port, ready, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
REQUEST_LEN = 85
TEXT = b"no such session"
# type, code 4 (UNKNOWN), length, text, then 64 bytes where the server's
# signature would be: well formed, not signed.
UNSIGNED = bytes([0x7F, 4, len(TEXT)]) + TEXT + bytes(64)
# Past the 200-byte limit on the text: the client must not read it all.
TOO_LONG = bytes([0x7F, 4, 0xFF]) + b"A" * 319
answers = 0

ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((addr, port))
ls.listen(64)
with open(ready, "w") as f:
    f.write("ready\n")
while True:
    c, _ = ls.accept()
    c.settimeout(2)
    got = b""
    try:
        while len(got) < REQUEST_LEN:
            b = c.recv(REQUEST_LEN - len(got))
            if not b:
                break
            got += b
        if len(got) == REQUEST_LEN and got[:8] == b"\x89ROCKR\r\n":
            c.sendall(TOO_LONG if answers % 2 else UNSIGNED)
            answers += 1
            with open(count, "a") as f:
                f.write("answered\n")
    except OSError:
        pass
    c.close()
