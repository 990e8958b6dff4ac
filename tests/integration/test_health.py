"""Backend health checks on the real daemon. Loopback: a TCP backend that stops listening is
shown down in metrics, `services` and `status` within interval*fall (+ slack) and up again within
interval*rise after it listens again; a reload adds, keeps and drops checked backends. Netns (the
fast path lab of test_fastpath.py): a UDP backend whose TCP port dies leaves the Maglev table, so
only its flows move; when it recovers the moved flows stay where they went (flow affinity, the UDP
default) and new flows reach it again."""
import re
import socket
import threading
import time

from harness import (base_config, check, check_eq, http_get, metrics_endpoint, ok,
                     ferryctl, running, wait_until)
from test_fastpath import BACKENDS, PORT, Lab, fastpath_config

INTERVAL_MS = 100
TIMEOUT_MS = 80
RISE = 2
FALL = 3
# Jitter (10 %), a check's own timeout, scheduling on a loaded 2-core machine, the poll period.
SLACK_S = 1.0


class TcpBackend:
    """A loopback TCP listener that accepts and closes, on a port that survives stop/start."""

    def __init__(self):
        self.port = None
        self.sock = None
        self.thread = None
        self.start()

    def start(self):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port or 0))
        s.listen(64)
        self.port = s.getsockname()[1]
        self.sock = s
        self.thread = threading.Thread(target=self._accept, args=(s,), daemon=True)
        self.thread.start()

    def _accept(self, s):
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            c.close()

    def stop(self):
        if self.sock is None:
            return
        # shutdown() wakes the accept() of the thread; close() releases the port.
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.sock = None
        self.thread.join(timeout=5)

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.port}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def web_service(backends, health=True, port=None):
    svc = {"name": "web", "vip": "127.0.0.1", "port": port or free_port(), "protocols": ["tcp"],
           "backends": [b if isinstance(b, str) else b.endpoint for b in backends]}
    if health:
        svc["health"] = {"interval_ms": INTERVAL_MS, "timeout_ms": TIMEOUT_MS, "rise": RISE,
                         "fall": FALL}
    return svc


SAMPLE = re.compile(r'^(\w+)\{([^}]*)\} (\S+)$')


def scrape(d):
    """{(family, frozenset(labels)): value} from /metrics."""
    host, port = metrics_endpoint(d)
    code, _, body = http_get(host, port)
    check_eq(code, 200, "/metrics status")
    out = {}
    for line in body.decode().splitlines():
        m = SAMPLE.match(line)
        if m:
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def metric(values, family, **labels):
    return values.get((family, frozenset(labels.items())))


def backend_rows(d, service):
    svc = [s for s in ok(d.request("services"))["services"] if s["name"] == service]
    check_eq(len(svc), 1, f"service {service} listed")
    return {b["address"]: b for b in svc[0]["backends"]}


def wait_state(d, service, address, state, timeout):
    return wait_until(lambda: backend_rows(d, service).get(address, {}).get("state") == state,
                      timeout, f"{service} backend {address} {state}")


def test_tcp_backend_down_and_up_shows_in_metrics_status_and_services(workdir):
    a, b = TcpBackend(), TcpBackend()
    try:
        cfg = base_config(workdir, services=[web_service([a, b])])
        with running(workdir, cfg) as d:
            for x in (a, b):
                wait_state(d, "web", x.endpoint, "up", INTERVAL_MS / 1000 * 2 + SLACK_S)
            values = scrape(d)
            check_eq(metric(values, "ferry_backend_up", service="web", backend=a.endpoint), 1.0,
                     "ferry_backend_up while listening")
            a.stop()
            killed = time.monotonic()
            wait_state(d, "web", a.endpoint, "down", INTERVAL_MS / 1000 * FALL * 1.1 + SLACK_S)
            took = time.monotonic() - killed
            check(took <= INTERVAL_MS / 1000 * FALL * 1.1 + SLACK_S, f"down after {took:.2f}s")
            print(f"  down {took * 1000:.0f} ms after the listener closed "
                  f"(interval {INTERVAL_MS} ms, fall {FALL})", flush=True)
            row = backend_rows(d, "web")[a.endpoint]
            check_eq((row["up"], row["checked"]), (False, True), f"row {row}")
            check(row["consecutive_failures"] >= FALL, f"consecutive failures {row}")
            check_eq(row["last_error"], "connection refused", "last_error")
            check_eq(backend_rows(d, "web")[b.endpoint]["state"], "up", "the other backend")
            values = scrape(d)
            check_eq(metric(values, "ferry_backend_up", service="web", backend=a.endpoint), 0.0,
                     "ferry_backend_up when down")
            check_eq(metric(values, "ferry_backend_up", service="web", backend=b.endpoint), 1.0,
                     "the other backend's gauge")
            check_eq(metric(values, "ferry_health_transitions_total", service="web",
                            backend=a.endpoint, to="down"), 1.0, "one transition to down")
            check(metric(values, "ferry_health_checks_total", service="web", backend=a.endpoint,
                         result="refused") >= FALL, "refused checks counted")
            status = ok(d.request("status"))["health"]
            check_eq((status["checked"], status["down"]), (2, 1), f"status.health {status}")
            r = ferryctl(d, "services")
            check(f"{a.endpoint}(down,connection refused)" in r.stdout and
                  f"{b.endpoint}(up)" in r.stdout and " tcp " in r.stdout,
                  f"ferryctl services:\n{r.stdout}")

            a.start()
            restarted = time.monotonic()
            wait_state(d, "web", a.endpoint, "up", INTERVAL_MS / 1000 * RISE * 1.1 + SLACK_S)
            took = time.monotonic() - restarted
            check(took <= INTERVAL_MS / 1000 * RISE * 1.1 + SLACK_S, f"up after {took:.2f}s")
            print(f"  up {took * 1000:.0f} ms after it listened again (rise {RISE})", flush=True)
            values = scrape(d)
            check_eq(metric(values, "ferry_backend_up", service="web", backend=a.endpoint), 1.0,
                     "ferry_backend_up after recovery")
            check_eq(metric(values, "ferry_health_transitions_total", service="web",
                            backend=a.endpoint, to="up"), 1.0, "one transition to up")
            log = d.log()
            check_eq(log.count(f"service web backend {a.endpoint} down:"), 1, "down logged once")
            check_eq(log.count(f"service web backend {a.endpoint} up:"), 1, "up logged once")
            check(f"service web backend {a.endpoint} down: connection refused ({FALL} consecutive "
                  "failures)" in log, "the down line says why")
            workers = ok(d.request("workers"))["workers"]
            check(any(x["name"] == "health" and x["alive"] for x in workers), f"checker {workers}")
    finally:
        a.stop()
        b.stop()


def test_reload_adds_keeps_and_drops_checked_backends(workdir):
    a = TcpBackend()
    dead = free_port()  # nothing listens there
    try:
        svc = web_service([a])
        cfg = base_config(workdir, services=[svc])
        with running(workdir, cfg) as d:
            wait_state(d, "web", a.endpoint, "up", 2 + SLACK_S)
            checks_before = metric(scrape(d), "ferry_health_checks_total", service="web",
                                   backend=a.endpoint, result="ok")
            dead_ep = f"127.0.0.1:{dead}"
            svc["backends"] = [a.endpoint, dead_ep]
            workdir.write_config(cfg)
            ok(d.request("reload"), "reload adding a dead backend")
            wait_state(d, "web", dead_ep, "down", INTERVAL_MS / 1000 * FALL * 1.1 + SLACK_S)
            checks_after = metric(scrape(d), "ferry_health_checks_total", service="web",
                                  backend=a.endpoint, result="ok")
            check(checks_after >= checks_before, "the kept backend keeps its counters")
            check_eq(backend_rows(d, "web")[a.endpoint]["state"], "up", "kept backend")

            svc["backends"] = [a.endpoint]
            workdir.write_config(cfg)
            ok(d.request("reload"), "reload dropping it")
            values = scrape(d)
            check_eq(metric(values, "ferry_backend_up", service="web", backend=dead_ep), None,
                     "dropped backend's gauge is gone")
            check_eq(metric(values, "ferry_health_checks_total", service="web", backend=dead_ep,
                            result="refused"), None, "dropped backend's counters are gone")
            check_eq(ok(d.request("status"))["health"]["checked"], 1, "one backend checked")

            # Health off for a service whose backend is down: unchecked, and up again.
            svc["backends"] = [a.endpoint, dead_ep]
            workdir.write_config(cfg)
            ok(d.request("reload"))
            wait_state(d, "web", dead_ep, "down", INTERVAL_MS / 1000 * FALL * 1.1 + SLACK_S)
            del svc["health"]
            workdir.write_config(cfg)
            ok(d.request("reload"), "reload without health")
            rows = backend_rows(d, "web")
            check_eq((rows[dead_ep]["state"], rows[dead_ep]["up"], rows[dead_ep]["checked"]),
                     ("unknown", True, False), f"unchecked row {rows[dead_ep]}")
            check_eq(metric(scrape(d), "ferry_backend_up", service="web", backend=dead_ep), 1.0,
                     "unchecked backend is up")
            check_eq(ok(d.request("status"))["health"]["checked"], 0, "nothing checked")
    finally:
        a.stop()


# TCP listeners on every backend address at the service's port, one process per backend so that
# one can be killed: the health checks of the UDP service connect to them.
TCP_LISTENER = r"""
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(64)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.close()
"""


def test_udp_balance_skips_a_down_backend_and_resumes(workdir):
    lab = Lab()
    try:
        lab.start_echo(workdir)
        listeners = {}

        def listen(addr):
            p = lab.spawn(lab.back, TCP_LISTENER, addr, str(PORT))
            check_eq(p.stdout.readline().strip(), "ready", f"tcp listener on {addr}")
            listeners[addr] = p

        for addr in BACKENDS:
            listen(addr)
        cfg = fastpath_config(workdir)
        cfg["services"][0]["health"] = {"interval_ms": 200, "timeout_ms": 150, "rise": 2,
                                        "fall": 2}
        with running(workdir, cfg, netns=lab.gw.name) as d:
            for addr in BACKENDS:
                wait_state(d, "echo", f"{addr}:{PORT}", "up", 0.4 + SLACK_S)
            res = lab.converse("before", flows=60, rounds=1, base=30000)
            check_eq(res["ok"], 60, f"before {res}")
            before = {p: next(iter(b)) for p, b in lab.echoed("before").items()}
            on_victim = [p for p, b in before.items() if b == BACKENDS[2]]
            check(on_victim, f"some flows on {BACKENDS[2]}: {before}")
            generation = ok(d.request("status"))["xdp"]["fastpath"]["table_generation"]

            victim = f"{BACKENDS[2]}:{PORT}"
            listeners[BACKENDS[2]].kill()
            listeners[BACKENDS[2]].wait()
            wait_state(d, "echo", victim, "down", 0.2 * 2 * 1.1 + 0.15 + SLACK_S)
            wait_until(lambda: ok(d.request("status"))["xdp"]["fastpath"]["table_generation"]
                       > generation, 5, "tables rebuilt without the down backend")
            res = lab.converse("during", flows=60, rounds=1, base=30000)
            check_eq(res["ok"], 60, f"while down {res}")
            during = {p: next(iter(b)) for p, b in lab.echoed("during").items()}
            moved = sorted(p for p in before if before[p] != during[p])
            check_eq(moved, sorted(on_victim), "only the down backend's flows moved")
            check(BACKENDS[2] not in during.values(), "nothing goes to the down backend")
            # /metrics listens inside the gateway's namespace: read the same registry via stats.
            up = ok(d.request("stats", {"prefix": "ferry_backend_up"}))["metrics"][0]["samples"]
            check_eq({s["labels"]["backend"]: s["value"] for s in up},
                     {f"{a}:{PORT}": (0 if a == BACKENDS[2] else 1) for a in BACKENDS},
                     "ferry_backend_up of the UDP backends")

            generation = ok(d.request("status"))["xdp"]["fastpath"]["table_generation"]
            listen(BACKENDS[2])
            wait_state(d, "echo", victim, "up", 0.2 * 2 * 1.1 + SLACK_S)
            wait_until(lambda: ok(d.request("status"))["xdp"]["fastpath"]["table_generation"]
                       > generation, 5, "tables rebuilt with the backend back")
            res = lab.converse("after", flows=60, rounds=1, base=30000)
            check_eq(res["ok"], 60, f"after recovery {res}")
            after = {p: next(iter(b)) for p, b in lab.echoed("after").items()}
            # The flow tables keep every flow on the backend it has: the moved ones do not move
            # again. New flows (other source ports) are Maglev's, which has the backend back.
            check_eq(after, during, "no flow moves when the backend comes back")
            res = lab.converse("fresh", flows=60, rounds=1, base=31000)
            check_eq(res["ok"], 60, f"new flows after recovery {res}")
            fresh = {b for bs in lab.echoed("fresh").values() for b in bs}
            check(BACKENDS[2] in fresh, f"new flows reach the recovered backend: {fresh}")
            log = d.log()
            check_eq(log.count(f"service echo backend {victim} down:"), 1, "down logged once")
            check_eq(log.count(f"service echo backend {victim} up:"), 1, "up logged once")
            rebuilds = [l.split("notice ")[-1].split("info ")[-1].strip() for l in log.splitlines()
                        if "tables rebuilt in" in l]
            check(len(rebuilds) >= 2, f"rebuilds logged: {rebuilds}")
            for line in rebuilds:
                print(f"  {line}", flush=True)
    finally:
        lab.close()
