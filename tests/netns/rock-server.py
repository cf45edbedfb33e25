#!/usr/bin/env python3
"""rock-server.py: an asyncio (epoll, non-blocking listeners) server for rock-server.sh: FILE over HTTP/1.0 on PORT, and unasked (server speaks first) on PORT+1."""
import asyncio
import socket
import sys

host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(path, "rb") as f:
    body = f.read()


def own_rto_max(writer):
    """TCP_RTO_MAX_MS (Linux 6.15) on an accepted rock is what the program's
    own socket would say, the system's, not the engine's bound."""
    try:
        with open("/proc/sys/net/ipv4/tcp_rto_max_ms") as f:
            system = int(f.read())
    except OSError:
        return True  # an older kernel: no such option
    sock = writer.get_extra_info("socket")
    return sock.getsockopt(socket.IPPROTO_TCP, 44) == system


async def http(reader, writer):
    try:
        await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        # A rock client's probe, when the listener is plain (no ROCK_SERVE).
        writer.close()
        return
    if not own_rto_max(writer):
        writer.write(b"HTTP/1.0 500 TCP_RTO_MAX_MS is the engine's\r\n\r\n")
        writer.close()
        return
    writer.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
    writer.write(body)
    await writer.drain()
    writer.close()


async def banner(reader, writer):
    writer.write(body)
    await writer.drain()
    writer.close()


async def main():
    a = await asyncio.start_server(http, host, port)
    b = await asyncio.start_server(banner, host, port + 1)
    print("listening", flush=True)
    await asyncio.gather(a.serve_forever(), b.serve_forever())

asyncio.run(main())
