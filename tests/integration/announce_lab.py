"""The announce tests' lab (test_announce.py): a network namespace per ferryd with its VIPs on lo,
TCP echo backends in it, readers of its routes of protocol ferry, and the config and report
helpers."""
import json
import subprocess
import sys

from harness import FERRYD, base_config, check, ok, wait_until
from netns import Netns

TABLE = 100
# Health checks quick enough that a failure shows within a second (interval x fall + slack).
FAST_HEALTH = {"interval_ms": 100, "timeout_ms": 80, "rise": 1, "fall": 1}
# How long an announced or withdrawn state may take to reach the table: a refresh after a health
# transition, a first pass, or a settling of the health view (twice the check interval).
SETTLE_S = 5.0
GRACE_MS = 200  # the stops of tests not about the grace stay quick

# A TCP echo server on 127.0.0.1:PORT inside the namespace it is started in; "ready" once it listens.
ECHO_SERVER = r"""
import socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
print("ready", flush=True)
def serve(c):
    with c:
        try:
            while True:
                data = c.recv(65536)
                if not data:
                    return
                c.sendall(data)
        except OSError:  # a health check's connect-and-close, reset
            return
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""

# Connects to argv[1]:argv[2], sends argv[3], prints what comes back.
ECHO_CLIENT = r"""
import socket, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5) as c:
    c.sendall(sys.argv[3].encode())
    c.shutdown(socket.SHUT_WR)
    data = b""
    while True:
        chunk = c.recv(65536)
        if not chunk:
            break
        data += chunk
print(data.decode(), end="")
"""


class Lab:
    """A namespace with its VIPs on lo (the TCP services listen on them); removed on exit."""

    def __init__(self, tag, vips=()):
        self.ns = Netns(tag, ipv6=True)
        self.backends = []
        try:
            for vip in vips:
                self.ns.ip("addr", "add", vip + ("/128" if ":" in vip else "/32"), "dev", "lo")
        except Exception:
            self.ns.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for b in self.backends:
            b.stop()
        self.ns.close()

    def backend(self, port, start=True):
        b = NsBackend(self.ns, port)
        self.backends.append(b)
        if start:
            b.start()
        return b

    def echo(self, host, port, payload):
        r = self.ns.run(sys.executable, "-c", ECHO_CLIENT, host, str(port), payload, check=False)
        check(r.returncode == 0, f"echo through {host}:{port} failed: {r.stderr}")
        return r.stdout

    def add_route(self, dst, table, proto="70"):
        args = ["-6"] if ":" in dst else []
        self.ns.ip(*args, "route", "add", dst, "dev", "lo", "table", str(table), "proto", proto)

    def del_route(self, dst, table):
        args = ["-6"] if ":" in dst else []
        self.ns.ip(*args, "route", "del", dst, "dev", "lo", "table", str(table), "proto", "70")

    def routes(self, proto=("70", "ferry")):
        """{table: {dst, ...}} of the routes of protocol ferry in every table."""
        out = {}
        for family in ("-4", "-6"):
            for r in json.loads(self.ns.ip(family, "-j", "route", "show", "table", "all").stdout or "[]"):
                if str(r.get("protocol")) in proto:
                    out.setdefault(str(r.get("table", "main")), set()).add(r["dst"])
        return out

    def table(self, table=TABLE):
        return self.routes().get(str(table), set())

    def wait_table(self, expected, table=TABLE, timeout=SETTLE_S, what=None):
        expected = set(expected)
        try:
            return wait_until(lambda: self.table(table) == expected, timeout,
                              what or f"table {table} to hold exactly {sorted(expected)}")
        except Exception:
            print(f"routes of protocol ferry now: {self.routes()}", flush=True)
            raise

    def metrics(self, daemon):
        listen = ok(daemon.request("status"), "status")["metrics"]["listen"]
        r = self.ns.run(sys.executable, "-c", "import sys, urllib.request; sys.stdout.write("
                        "urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())",
                        f"http://{listen}/metrics")
        return r.stdout

    def ferryd_withdraw(self, config_path):
        return self.ns.run(FERRYD, "--withdraw", "--config", config_path, check=False)


class NsBackend:
    """An echo server on 127.0.0.1:port in the namespace, stopped and started again on that port."""

    def __init__(self, ns, port):
        self.ns = ns
        self.port = port
        self.proc = None

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.port}"

    def start(self):
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns.name, sys.executable, "-c",
                                      ECHO_SERVER, str(self.port)], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        check(line.strip() == "ready", f"backend on port {self.port} did not start: {line!r}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def echo_service(name, vip, port=7):
    return {"name": name, "vip": vip, "port": port, "protocols": ["tcp"], "mode": "echo"}


def proxy_service(name, vip, port, backends, health=None):
    s = {"name": name, "vip": vip, "port": port, "protocols": ["tcp"], "backends": backends}
    if health:
        s["health"] = health
    return s


def announce_config(w, services, **announce):
    cfg = base_config(w, services=services)
    cfg["announce"] = {"table": TABLE, "withdraw_grace_ms": GRACE_MS, **announce}
    return cfg


def vips_of(report):
    return {v["vip"]: v for v in report["vips"]}


def announce_report(d):
    return ok(d.request("announce"), "announce")


def metric(text, name, **labels):
    """The value of the sample `name{labels}` in a Prometheus exposition, or None."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        key, value = line.rsplit(" ", 1)
        sample, _, rest = key.partition("{")
        got = ",".join(sorted(rest.rstrip("}").split(","))) if rest else ""
        if sample == name and got == want:
            return float(value)
    return None


def failed_checks(text, service):
    """Health checks of `service`'s backends that did not end "ok"."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith("ferry_health_checks_total{") and f'service="{service}"' in line \
                and 'result="ok"' not in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def wait_log(d, text, timeout=SETTLE_S):
    return wait_until(lambda: text in d.log(), timeout, f"{text!r} in the log")
