#!/usr/bin/env python3
"""The demo's client: UDP requests to the service VIP from many source ports (so Maglev spreads
them) and TCP request/response connections to the proxied VIP, for SECONDS; then a JSON summary of
what came back from which backend.

    demo_client.py --vip 10.77.0.10 --seconds 30 --out summary.json
"""
import argparse
import json
import selectors
import socket
import threading
import time


def udp_traffic(vip, port, seconds, rate_pps, result):
    sel = selectors.DefaultSelector()
    socks = []
    for _ in range(64):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        socks.append(s)
    sent = received = 0
    per_backend = {}
    interval = 1.0 / rate_pps
    end = time.monotonic() + seconds
    next_send = time.monotonic()
    while True:
        now = time.monotonic()
        if now < end and now >= next_send:
            s = socks[sent % len(socks)]
            try:
                s.sendto(b"ferry-demo-%08d" % sent, (vip, port))
                sent += 1
            except BlockingIOError:
                pass
            next_send += interval
        if now >= end + 0.5:
            break
        for key, _ in sel.select(timeout=max(0.0, min(next_send - now, 0.05))):
            while True:
                try:
                    data, _ = key.fileobj.recvfrom(2048)
                except BlockingIOError:
                    break
                received += 1
                name = data.split(b":", 1)[0].decode(errors="replace")
                per_backend[name] = per_backend.get(name, 0) + 1
    for s in socks:
        s.close()
    result["udp"] = {"sent": sent, "received": received, "per_backend": per_backend}


def tcp_worker(vip, port, seconds, response_bytes, lock, totals):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with socket.create_connection((vip, port), timeout=3) as conn:
                f = conn.makefile("rb")
                for _ in range(8):
                    conn.sendall(b"GET %d\n" % response_bytes)
                    name = f.readline().strip().decode(errors="replace")
                    left = response_bytes
                    while left > 0:
                        chunk = f.read(min(left, 65536))
                        if not chunk:
                            raise ConnectionError("short response")
                        left -= len(chunk)
                    with lock:
                        totals["responses"] += 1
                        totals["bytes"] += response_bytes
                        totals["per_backend"][name] = totals["per_backend"].get(name, 0) + 1
                with lock:
                    totals["connections"] += 1
        except OSError as error:
            with lock:
                totals["errors"] += 1
                totals["last_error"] = str(error)
            time.sleep(0.2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--vip", required=True)
    parser.add_argument("--udp-port", type=int, default=5353)
    parser.add_argument("--tcp-port", type=int, default=8080)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--udp-pps", type=float, default=2000)
    parser.add_argument("--tcp-connections", type=int, default=4)
    parser.add_argument("--response-bytes", type=int, default=262144)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    result = {}
    lock = threading.Lock()
    totals = {"connections": 0, "responses": 0, "bytes": 0, "errors": 0, "per_backend": {}}
    threads = [threading.Thread(target=udp_traffic,
                                args=(args.vip, args.udp_port, args.seconds, args.udp_pps, result))]
    threads += [threading.Thread(target=tcp_worker,
                                 args=(args.vip, args.tcp_port, args.seconds, args.response_bytes,
                                       lock, totals))
                for _ in range(args.tcp_connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result["tcp"] = totals
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
