#!/usr/bin/env python3
"""rock-server.py: an asyncio (epoll, non-blocking listeners) server for rock-server.sh: FILE over HTTP/1.0 on PORT, and unasked (server speaks first) on PORT+1."""
import asyncio
import sys

host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(path, "rb") as f:
    body = f.read()


async def http(reader, writer):
    try:
        await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        # A rock client's probe, when the listener is plain (no ROCK_SERVE).
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
