"""`ferryctl top` against the real ferryd in the fast-path lab: while a client sends UDP to a
balanced service (echoed by three backends), TCP to an echo service and connections to a proxy
service whose only backend is down, `top --once --json` shows each (service, protocol) with the
figures that traffic makes (requests in and replies out, bytes echoed each way, connections failed
for want of a backend) and none where there is none; the table (`--backends --reasons`) shows the
same rows; `watch`'s header carries the fast path's rates whatever families it shows; and a
stopped ferryd is exit status 3."""
import json
import socket
import threading
import time

from harness import check, check_eq, ferryctl, ok, running, wait_until
from fastpath_lab import (BACKENDS, CLIENT, GATEWAY_BACKEND_SIDE, PORT, VIP, Lab,
                          fastpath_config, inside)

ECHO_TCP_PORT = 7107
WEB_PORT = 8080
DOWN_BACKEND = f"{GATEWAY_BACKEND_SIDE}:9"  # the gateway's own address, where nothing listens

# Sends a request every 4 ms for `seconds` from 40 flows, each answered by an echo backend.
UDP_CLIENT = r"""
import socket, sys, time
vip, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
socks = []
for i in range(40):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((sys.argv[4], 0)); s.setblocking(False); socks.append(s)
end = time.monotonic() + seconds
n = 0
while time.monotonic() < end:
    s = socks[n % len(socks)]
    s.sendto(b"top-%d " % n + b"x" * 200, (vip, port))
    n += 1
    for t in socks:
        try:
            while True: t.recv(2048)
        except BlockingIOError:
            pass
    time.sleep(0.004)
print(n)
"""


def top_config(w):
    cfg = fastpath_config(w)
    cfg["services"] += [
        {"name": "tcp-echo", "vip": "127.0.0.1", "port": ECHO_TCP_PORT, "protocols": ["tcp"],
         "mode": "echo"},
        {"name": "web", "vip": "127.0.0.1", "port": WEB_PORT, "protocols": ["tcp"],
         "backends": [DOWN_BACKEND],
         "health": {"interval_ms": 100, "timeout_ms": 50, "rise": 1, "fall": 1}},
    ]
    return cfg


class TcpLoad:
    """In the gateway's namespace: one connection to the echo service that keeps sending and
    reading back, and a connection every 20 ms to the proxy service (reset: no backend up)."""

    def __init__(self, lab):
        self.lab, self.stop, self.echoed, self.refused = lab, threading.Event(), 0, 0
        self.threads = [threading.Thread(target=self.echo, daemon=True),
                        threading.Thread(target=self.web, daemon=True)]
        for t in self.threads:
            t.start()

    def echo(self):
        with inside(self.lab.gw):
            s = socket.create_connection(("127.0.0.1", ECHO_TCP_PORT), timeout=5)
        with s:
            try:
                while not self.stop.is_set():
                    s.sendall(b"y" * 4096)
                    got = 0
                    while got < 4096:
                        chunk = s.recv(4096 - got)
                        if not chunk:
                            return  # ferryd closed the connection (it is stopping)
                        got += len(chunk)
                    self.echoed += got
                    time.sleep(0.002)
            except OSError:
                return  # reset by a stopping ferryd

    def web(self):
        while not self.stop.is_set():
            try:
                with inside(self.lab.gw):
                    s = socket.create_connection(("127.0.0.1", WEB_PORT), timeout=5)
                with s:
                    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
                    s.recv(100)
            except OSError:
                self.refused += 1
            time.sleep(0.02)

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(10)
            check(not t.is_alive(), f"{t.name} ended")


def row(doc, service, protocol):
    rows = [r for r in doc["services"] if (r["service"], r["protocol"]) == (service, protocol)]
    check_eq(len(rows), 1, f"one {service}/{protocol} row in {doc['services']}")
    return rows[0]


def test_top_shows_what_the_traffic_makes(workdir):
    lab = Lab()
    load = None
    try:
        lab.start_echo(workdir)
        with running(workdir, top_config(workdir), netns=lab.gw.name) as d:
            wait_until(lambda: [b["state"] for s in ok(d.request("services"))["services"]
                                if s["name"] == "web" for b in s["backends"]] == ["down"],
                       20, "the web backend seen down")
            client = lab.spawn(lab.client, UDP_CLIENT, VIP, str(PORT), "12", CLIENT)
            load = TcpLoad(lab)
            # Traffic first (the echo log shows replies), then two frames over 2 s each.
            wait_until(lambda: len(open(lab.echo_log).read().splitlines()) > 300, 20,
                       "echo backends answering")
            r = ferryctl(d, "top", "--json", "--count", "2", "--interval-ms", "2000", timeout=30)
            check_eq(r.returncode, 0, f"top --json ({r.stderr})")
            frames = [json.loads(line) for line in r.stdout.splitlines()]
            check_eq(len(frames), 2, "--count 2 gives two JSON frames")
            doc = frames[-1]
            check_eq(doc["pid"], d.proc.pid, "pid")
            check_eq(doc["interval_seconds"], 2.0, "interval")

            udp = row(doc, "echo", "udp")
            check_eq((udp["path"], udp["endpoint"], udp["backends_up"], udp["backends_total"]),
                     ("fastpath", f"{VIP}:{PORT}", 3, 3), "udp row")
            # ~250 requests/s from the client, each answered: in and out agree within the
            # frames in flight at the interval's edges.
            check(udp["in_packets_per_second"] > 100, f"requests in: {udp}")
            check(0.8 < udp["out_packets_per_second"] / udp["in_packets_per_second"] < 1.25,
                  f"replies out match requests in: {udp}")
            check(udp["in_bits_per_second"] > udp["in_packets_per_second"] * 8 * 200,
                  f"bits count whole frames: {udp}")
            check_eq(udp["active"], None, "no connection count for the stateless UDP path")
            check_eq([(b["address"], b["state"]) for b in udp["backends"]],
                     [(f"{b}:{PORT}", "unchecked") for b in BACKENDS],
                     "udp backends: no health checks, so up and unchecked")
            # The workers' per-backend counts: each backend takes some of the 40 flows, answers
            # each request, and together they take what the service's row shows coming in.
            for b in udp["backends"]:
                check(b["in_packets_per_second"] > 0 and b["in_bits_per_second"] > 0,
                      f"requests to each backend: {b}")
                check(0.8 < b["out_packets_per_second"] / b["in_packets_per_second"] < 1.25,
                      f"each backend's replies match its requests: {b}")
            to_backends = sum(b["in_packets_per_second"] for b in udp["backends"])
            check(0.9 < to_backends / udp["in_packets_per_second"] < 1.1,
                  f"the backends' requests add up to the service's: {to_backends} of {udp}")

            echo = row(doc, "tcp-echo", "tcp")
            check_eq((echo["path"], echo["backends_total"], echo["active"]), ("echo", None, 1),
                     "tcp echo row")
            check(echo["in_bits_per_second"] > 0 and
                  echo["in_bits_per_second"] == echo["out_bits_per_second"],
                  f"echoed bytes both ways: {echo}")
            check_eq(echo["in_packets_per_second"], None, "TCP has no packet counts")

            web = row(doc, "web", "tcp")
            check_eq((web["path"], web["backends_up"], web["backends_total"]), ("proxy", 0, 1),
                     "web row")
            check(web["errors_by_reason"].get("no_backend", 0) > 0,
                  f"connections reset for want of a backend: {web}")
            check_eq(web["errors_per_second"], sum(web["errors_by_reason"].values()),
                     "errors are the sum of their reasons")
            check_eq(web["backends"][0]["state"], "down", "web backend state")
            check("fastpath" in doc["traffic"] and "proxy" in doc["traffic"], f"{doc['traffic']}")
            check(doc["traffic"]["fastpath"]["rx_packets_per_second"] >=
                  udp["in_packets_per_second"], f"fast path rx covers the service: {doc['traffic']}")

            r = ferryctl(d, "top", "--once", "--backends", "--reasons", "--sort", "name", timeout=30)
            check_eq(r.returncode, 0, f"top --once ({r.stderr})")
            print(r.stdout, flush=True)
            lines = r.stdout.splitlines()
            check(lines[0].split()[1:3] == ["ferryd", "pid"] and "fast path rx" in lines[0],
                  f"header: {lines[0]}")
            check_eq(lines[2].split()[:5], ["SERVICE", "PROTO", "VIP:PORT", "PATH", "BACKENDS"],
                     "table header")
            names = [l.split()[0] for l in lines[3:] if l and not l.startswith(" ")]
            check_eq(names[:3], ["echo", "tcp-echo", "web"], f"rows sorted by name:\n{r.stdout}")
            backend_rows = [l.split() for l in lines if l.strip().startswith(f"{BACKENDS[0]}:")]
            check(len(backend_rows) == 1 and backend_rows[0][1] == "unchecked",
                  f"a row per backend:\n{r.stdout}")
            check("-" not in backend_rows[0][2:6],
                  f"a UDP backend's row has its packets and bits each way:\n{r.stdout}")
            check(any("errors: no_backend" in l for l in lines), f"reasons:\n{r.stdout}")
            check(any(l.startswith("fast path drops:") for l in lines), f"fast path:\n{r.stdout}")
            check("{" not in r.stdout, f"no JSON in the table:\n{r.stdout}")

            # watch shows only what it is asked for; its header still has the traffic rates.
            r = ferryctl(d, "watch", "ferry_control_", "--count", "2", "--interval-ms", "500", timeout=30)
            check_eq(r.returncode, 0, f"watch ({r.stderr})")
            last = r.stdout.strip().split("\n\n")[-2:]
            check("fast path rx" in last[0] and "- pps" not in last[0], f"watch header:\n{last[0]}")
            check("ferry_xsk" not in last[1], f"watch shows what was asked:\n{last[1]}")
            client.wait(30)
            load.close()  # before ferryd stops, so the connections end on the client's side
            load = None
        r = ferryctl(d, "top", "--once", timeout=10)
        check_eq(r.returncode, 3, f"top with ferryd stopped: {r.stderr}")
    finally:
        if load:
            load.close()
        lab.close()
