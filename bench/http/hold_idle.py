#!/usr/bin/env python3
"""Open N kept-alive connections to a server and hold them idle.

Usage: hold_idle.py PORT N

Each connection sends one `GET /health` (so it is a kept-alive connection that
has been served once, like an idle client of a pool) and then stays silent.
After waiting up to 3 s for those answers it prints `ready answered=M open=K`,
holds the connections until stdin closes or SIGTERM, then prints
`done answered=M open=K` (M: first requests answered by then; K: connections
the server has not closed).
"""
import selectors
import signal
import socket
import sys
import time

REQUEST = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def main() -> int:
    port, n = int(sys.argv[1]), int(sys.argv[2])
    sel = selectors.DefaultSelector()
    answered: set[int] = set()
    count_open = 0
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(REQUEST)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, i)
        count_open += 1

    stop = False

    def on_term(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)

    def poll(timeout: float) -> None:
        nonlocal stop, count_open
        for key, _ in sel.select(timeout):
            if key.data is None:  # stdin: EOF ends the hold
                if not sys.stdin.readline():
                    stop = True
                continue
            s = key.fileobj
            try:
                data = s.recv(65536)
            except BlockingIOError:
                continue
            except ConnectionResetError:
                data = b""
            if data:
                answered.add(key.data)
            else:  # closed by the server
                sel.unregister(s)
                s.close()
                count_open -= 1

    deadline = time.monotonic() + 3.0
    while len(answered) < n and time.monotonic() < deadline and not stop:
        poll(0.05)
    print(f"ready answered={len(answered)} open={count_open}", flush=True)

    sel.register(sys.stdin, selectors.EVENT_READ, None)
    while not stop:
        poll(0.2)
    print(f"done answered={len(answered)} open={count_open}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
