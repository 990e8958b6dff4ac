#!/usr/bin/env python3
"""A connection flooder for test_mgmt_budgets.py, run as its own process (as `nobody` for the
control socket). Driven by lines on stdin, answering one line each:

    python3 mgmt_flood.py unix PATH COUNT
    python3 mgmt_flood.py tcp HOST PORT SOURCE COUNT      (TCP control: never sends the token)
    python3 mgmt_flood.py http HOST PORT SOURCE COUNT     (metrics: half a request head each)

At start it opens COUNT connections as fast as it can and holds every one ("opened N"). Then:
`churn` starts replacing its oldest connection by a new one, as fast as it can, so that a slot
the server frees is taken again at once ("churning"); `count` answers "held N" (connections the
server has not closed, of those opened so far); `close` closes everything ("closed N opened in
all") and exits."""
import resource
import select
import socket
import sys
import threading
import time

HALF_REQUEST = b"GET /metrics HTTP/1.1\r\nHost: ferry\r\nUser-Agent: flood\r\n"


class Flood:
    def __init__(self, argv):
        self.kind = argv[0]
        if self.kind == "unix":
            self.path, self.count = argv[1], int(argv[2])
        else:
            self.host, self.port, self.source, self.count = argv[1], int(argv[2]), argv[3], int(argv[4])
        self.conns = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.opened = 0
        self.errors = 0

    def connect(self):
        if self.kind == "unix":
            # Blocking, as ferryctl's: past the server's small listen backlog the kernel makes
            # the connect wait its turn (a non-blocking one would fail with EAGAIN).
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(self.path)
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(5)
            s.bind((self.source, 0))
            s.connect((self.host, self.port))
            if self.kind == "http":
                s.sendall(HALF_REQUEST)
        self.opened += 1
        return s

    def open_burst(self):
        for _ in range(self.count):
            try:
                s = self.connect()
            except OSError:
                self.errors += 1
                continue
            with self.lock:
                self.conns.append(s)

    def churn(self):
        while not self.stopping.is_set():
            try:
                s = self.connect()
            except OSError:
                self.errors += 1
                time.sleep(0.001)  # out of ports or fds for a moment; the loop is the load
                continue
            with self.lock:
                self.conns.append(s)
                old = self.conns.pop(0) if len(self.conns) > self.count else None
            if old:
                old.close()

    def held(self):
        """Connections the server has not closed: no EOF (or reset) readable on them."""
        with self.lock:
            conns = list(self.conns)
        alive = 0
        for s in conns:
            poller = select.poll()
            poller.register(s, select.POLLIN)
            if not poller.poll(0):
                alive += 1
                continue
            try:
                alive += s.recv(1, socket.MSG_PEEK) != b""
            except OSError:
                pass
        return alive

    def close(self):
        with self.lock:
            for s in self.conns:
                s.close()
            n = len(self.conns)
            self.conns = []
        return n


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    flood = Flood(sys.argv[1:])
    flood.open_burst()
    print(f"opened {flood.opened} errors {flood.errors}", flush=True)
    churner = None
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "churn":
            churner = threading.Thread(target=flood.churn, daemon=True)
            churner.start()
            print("churning", flush=True)
        elif cmd == "count":
            print(f"held {flood.held()}", flush=True)
        elif cmd == "close":
            break
    flood.stopping.set()
    if churner:
        churner.join()
    n = flood.close()
    print(f"closed {n} opened {flood.opened} in all", flush=True)


if __name__ == "__main__":
    main()
