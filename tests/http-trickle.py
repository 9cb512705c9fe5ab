#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# http-trickle.py HOST PORT N INTERVAL_SEC : a hostile HTTP client for the
# exporter's tests.  It opens N connections, sends "GET /metrics HTTP/1.1"
# on each, then one more header line every INTERVAL_SEC seconds, never
# ending the headers (the trickle that keeps an idle timer from expiring).
# A connection the server closes is opened again at once.  Prints
# "ready N" once all N were opened and have sent their first line, and at
# SIGTERM "trickle cut=K" (how many connections the server closed).
import selectors
import signal
import socket
import sys
import time

host, port, n, interval = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
sel = selectors.DefaultSelector()
cut = 0
stop = False


def on_term(signum, frame):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
signal.signal(signal.SIGINT, on_term)


def open_one():
    while not stop:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.connect((host, port))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: trickle\r\n")
        except OSError:
            s.close()
            time.sleep(0.05)
            continue
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        return


for _ in range(n):
    open_one()
print("ready %d" % n, flush=True)

next_line = time.monotonic() + interval
k = 0
while not stop:
    timeout = max(0.0, next_line - time.monotonic())
    for key, _ in sel.select(timeout):
        s = key.fileobj
        try:
            data = s.recv(65536)
        except OSError:
            data = b""
        if not data:
            sel.unregister(s)
            s.close()
            cut += 1
            open_one()
    if time.monotonic() >= next_line:
        for key in list(sel.get_map().values()):
            try:
                key.fileobj.send(b"X-Trickle-%d: 1\r\n" % k)
            except OSError:
                pass
        k += 1
        next_line = time.monotonic() + interval
print("trickle cut=%d" % cut, flush=True)
