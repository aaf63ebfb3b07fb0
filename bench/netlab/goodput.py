#!/usr/bin/python3
"""One TCP stream's goodput: `goodput.py receive --port P` prints what arrived per second once
the sender closes; `goodput.py send --host H --port P --seconds S` streams for S seconds.
Goodput is application bytes / time from the first to the last byte, as the receiver sees it."""

import argparse
import socket
import sys
import time

CHUNK = 1 << 20


def receive(port):
    with socket.create_server(("", port), reuse_port=False) as server:
        server.settimeout(30)
        conn, _ = server.accept()
        with conn:
            buf = bytearray(CHUNK)
            view = memoryview(buf)
            total, first, last = 0, None, None
            while True:
                n = conn.recv_into(view)
                if n == 0:
                    break
                last = time.monotonic()
                if first is None:
                    first = last
                total += n
    seconds = (last - first) if first is not None and last > first else 0.0
    rate = total * 8 / seconds / 1e6 if seconds else 0.0
    print(f"{rate:.1f} Mbit/s goodput ({total / 1e6:.1f} MB in {seconds:.2f} s)")


def send(host, port, seconds):
    deadline = time.monotonic() + 10
    while True:  # the receiver may not listen yet
        try:
            conn = socket.create_connection((host, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    data = bytes(CHUNK)
    with conn:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            conn.sendall(data)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("mode", choices=["receive", "send"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=5201)
    p.add_argument("--seconds", type=float, default=2.0)
    a = p.parse_args()
    if a.mode == "receive":
        receive(a.port)
    else:
        send(a.host, a.port, a.seconds)


if __name__ == "__main__":
    main()
