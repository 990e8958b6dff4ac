"""Issue 25, "nobody locks the operator out": the real ferryd with its default budgets, flooded at
once on the control socket by `nobody` (socket mode 0666), and on the TCP control listener and the
metrics endpoint from 127.0.0.2 by clients that never authenticate or send half a request, each
first holding what it can and then reconnecting as fast as it can. Meanwhile root's `ferryctl
status`, `reload` and `backend web ... drain`, an authenticated TCP control client and a
Prometheus-style scrape each succeed within a second, and the TCP echo service (directly and
through a proxy service) answers. Refusals are counted by reason and logged naming the uid or the
address. When the flooders go, every budget is whole again: a new flood up to each budget is
served in full, and one more is refused."""
import os
import pwd
import socket
import subprocess
import time

from harness import (Piped, TestFailure, as_nobody, check, check_eq, ferryctl_out, http_get, ok,
                     running, tcp_control_config, wait_until)

TOKEN = "budget-token"
FLOODER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mgmt_flood.py")
# The system's python: the test's own may live where `nobody` cannot run it (/root/.pyenv).
PYTHON = "/usr/bin/python3"
FLOOD_SOURCE = "127.0.0.2"
# The defaults under test (docs/control-protocol.md, "Connection budgets"; docs/config.md).
PER_UID = 32
UNAUTH_PER_SOURCE = 8
METRICS_PER_SOURCE = 8
# The floods: 5,000 control connections from one local user, 3,000 half requests.
FLOOD = {"unix": 5000, "tcp": 2000, "http": 3000}
# Seconds each of root's actions may take during the flood: the second, on the product
# build (its worst here is about 150 ms with another test running beside it). A sanitized ferryd
# (ASan+UBSan, `make test`'s second tree) pays several times more per refused connection, and
# root's connection waits behind the flood's listen backlog, so there the same run measured up
# to 1.3 s, once 3 s: the bound there is a lockout's, not the latency.
WITHIN = 1.0 if os.environ.get("FERRY_SANITIZE", "none") == "none" else 6.0
ROUNDS = 5  # times every action is repeated while the floods churn
CHURN_BEFORE_ACTING = 2000  # refusals each flood has had since it began to churn
PROMETHEUS_REQUEST = (
    "GET /metrics HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: Prometheus/2.42.0\r\n"
    "Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
    "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n"
    "Accept-Encoding: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n")


class Flooder(Piped):
    """mgmt_flood.py as its own process (as `user` when given), driven by lines on stdin."""

    def __init__(self, w, name, args, user=None):  # pylint: disable=super-init-not-called
        self.err_path = w.file(f"{name}.err")
        self.name = name
        creds = {}
        if user:
            creds = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        self.proc = subprocess.Popen([PYTHON, "-u", FLOODER, *map(str, args)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(self.err_path, "w"), **creds)
        self.buf = b""

    def held(self):
        return int(self.cmd("count").split()[1])

    def stop(self):
        if self.proc.poll() is None:
            print(f"{self.name}: {self.cmd('close', timeout=30)}", flush=True)
        self.close()


def ferryd_cpu_seconds(d):
    with open(f"/proc/{d.proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def samples(host, port):
    """The scrape as {'name{labels}': value}."""
    code, _, body = http_get(host, port)
    check_eq(code, 200, "a scrape's status")
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def control_rejected(s, reason):
    return s.get(f'ferry_control_rejected_connections_total{{reason="{reason}"}}', 0)


def metrics_rejected(s, reason):
    return s.get(f'ferry_metrics_http_rejected_connections_total{{reason="{reason}"}}', 0)


def refusals(s):
    """What each flood has been refused: nobody's, TCP control's and the metrics flood's."""
    return (control_rejected(s, "per_uid"), control_rejected(s, "per_source"),
            metrics_rejected(s, "per_source"))


def timed(what, fn, took):
    started = time.monotonic()
    result = fn()
    seconds = time.monotonic() - started
    took.setdefault(what, []).append(seconds)
    check(seconds < WITHIN, f"{what} took {seconds:.3f}s during the flood (at most {WITHIN}s)")
    return result


def read_http_response(sock):
    """One HTTP/1.1 response with a Content-Length: (status, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise TestFailure(f"closed before a response head: {data[:200]!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    length = next(int(l.split(":", 1)[1]) for l in lines if l.lower().startswith("content-length:"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise TestFailure("closed inside a response body")
        body += chunk
    return int(lines[0].split()[1]), body


def prometheus_scrape(host, port, source="127.0.0.1"):
    with socket.create_connection((host, port), timeout=5, source_address=(source, 0)) as s:
        s.sendall(PROMETHEUS_REQUEST.format(host=host, port=port).encode())
        code, body = read_http_response(s)
    check_eq(code, 200, "the Prometheus scrape's status")
    check(b"ferry_control_rejected_connections_total" in body, "the scrape has the counters")


def tcp_connect(host, port, source):
    return socket.create_connection((host, port), timeout=5, source_address=(source, 0))


def tcp_admin_status(host, port):
    with tcp_connect(host, port, "127.0.0.1") as s:
        s.sendall(f'{{"auth":"{TOKEN}"}}\n{{"id":1,"cmd":"status"}}\n'.encode())
        lines = read_lines(s, 2)
    check('"authenticated":true' in lines[0], f"TCP auth: {lines[0]}")
    check('"state":"running"' in lines[1], f"TCP status: {lines[1][:200]}")


def read_lines(sock, n):
    data = b""
    while data.count(b"\n") < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise TestFailure(f"closed after {data!r}")
        data += chunk
    return data.decode().splitlines()


def echo_roundtrip(port):
    payload = os.urandom(4096)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = s.recv(65536)
            if not chunk:
                raise TestFailure(f"echo on port {port}: EOF after {len(got)} bytes")
            got += chunk
    check_eq(got, payload, f"echo on port {port}")


def refused(sock):
    """True when the server closed `sock` at accept, without a byte."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def nobody_fills_its_budget_again(socket_path):
    """As nobody: PER_UID connections held at once, each answering status; one more refused."""
    held = []
    try:
        for _ in range(PER_UID):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(socket_path)
            held.append(s)
        for i, s in enumerate(held):
            s.sendall(b'{"id":%d,"cmd":"status"}\n' % i)
            check('"ok":true' in read_lines(s, 1)[0], f"nobody's connection {i} answers")
        extra = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        extra.settimeout(5)
        extra.connect(socket_path)
        check(refused(extra), f"connection {PER_UID + 1} of nobody is refused")
        extra.close()
    finally:
        for s in held:
            s.close()


def tcp_control_fills_its_budget_again(host, port):
    """From FLOOD_SOURCE: UNAUTH_PER_SOURCE connections waiting for their token at once, one more
    refused, then each authenticates."""
    held = [tcp_connect(host, port, FLOOD_SOURCE) for _ in range(UNAUTH_PER_SOURCE)]
    try:
        with tcp_connect(host, port, FLOOD_SOURCE) as extra:
            check(refused(extra), "the address's connection over its budget is refused")
        for s in held:
            s.sendall(f'{{"auth":"{TOKEN}"}}\n'.encode())
            check('"authenticated":true' in read_lines(s, 1)[0], "a held connection authenticates")
    finally:
        for s in held:
            s.close()


def metrics_fills_its_budget_again(host, port):
    """From FLOOD_SOURCE: METRICS_PER_SOURCE kept-alive scrapes open at once, each answered; one
    more refused."""
    held = [tcp_connect(host, port, FLOOD_SOURCE) for _ in range(METRICS_PER_SOURCE)]
    try:
        for s in held:
            s.sendall(PROMETHEUS_REQUEST.format(host=host, port=port).encode())
            check_eq(read_http_response(s)[0], 200, "a held scrape's status")
        with tcp_connect(host, port, FLOOD_SOURCE) as extra:
            check(refused(extra), "the address's metrics connection over its budget is refused")
    finally:
        for s in held:
            s.close()


def test_floods_leave_the_operator_in_control(workdir):
    echo_port, web_port = free_port(), free_port()
    dead_backend = f"127.0.0.1:{free_port()}"
    cfg = tcp_control_config(workdir, TOKEN)
    cfg["control"]["mode"] = "0666"  # anyone may connect; nobody's uid grants read access only
    cfg["log"]["level"] = "info"
    cfg["services"] = [
        {"name": "echo", "vip": "127.0.0.1", "port": echo_port, "protocols": ["tcp"],
         "mode": "echo"},
        {"name": "web", "vip": "127.0.0.1", "port": web_port, "protocols": ["tcp"],
         "backends": [f"127.0.0.1:{echo_port}", dead_backend]},
    ]
    nobody = pwd.getpwnam("nobody")
    with running(workdir, cfg) as d:
        os.chmod(os.path.dirname(d.socket_path), 0o755)
        status = ok(d.request("status"))
        mhost, mport = status["metrics"]["listen"].rsplit(":", 1)
        mport = int(mport)
        chost, cport = status["control"]["tcp"].rsplit(":", 1)
        cport = int(cport)
        echo_roundtrip(echo_port)

        floods = []
        try:
            started = time.monotonic()
            floods = [Flooder(workdir, "unix", ["unix", d.socket_path, FLOOD["unix"]], user=nobody),
                      Flooder(workdir, "tcp", ["tcp", chost, cport, FLOOD_SOURCE, FLOOD["tcp"]]),
                      Flooder(workdir, "http", ["http", mhost, mport, FLOOD_SOURCE, FLOOD["http"]])]
            for f in floods:
                line = f.read_line(120)
                print(f"{f.name}: {line} ({time.monotonic() - started:.2f}s)", flush=True)
                check(line.startswith(f"opened {FLOOD[f.name]} "), f"{f.name} flood: {line}")

            # Every connection of the bursts was either admitted within its budget or refused.
            def burst_accounted():
                s = samples(mhost, mport)
                unix_ok = control_rejected(s, "per_uid") == FLOOD["unix"] - PER_UID
                tcp_ok = (control_rejected(s, "per_source") +
                          s.get('ferry_control_connections_total{transport="tcp"}', 0) ==
                          FLOOD["tcp"])
                http_ok = (metrics_rejected(s, "per_source") + metrics_rejected(s, "request_timeout")
                           >= FLOOD["http"] - METRICS_PER_SOURCE)
                return s if unix_ok and tcp_ok and http_ok else None
            s = wait_until(burst_accounted, 60, "every flood connection admitted or refused")
            check_eq(floods[0].held(), PER_UID, "connections nobody holds")
            check(floods[1].held() <= UNAUTH_PER_SOURCE, "unauthenticated connections held")
            check(floods[2].held() <= METRICS_PER_SOURCE, "metrics connections held")
            print(f"after the bursts: control per_uid {control_rejected(s, 'per_uid'):.0f}, "
                  f"per_source {control_rejected(s, 'per_source'):.0f}; metrics per_source "
                  f"{metrics_rejected(s, 'per_source'):.0f}", flush=True)

            # Held silent or half connections are closed at their deadline, and counted: every
            # one admitted, including those admitted when an earlier one's deadline freed its slot
            # while the burst was still in the listen backlog.
            def deadlines_passed():
                s = samples(mhost, mport)
                tcp_admitted = s.get('ferry_control_connections_total{transport="tcp"}', 0)
                http_refused = metrics_rejected(s, "per_source")
                return s if (control_rejected(s, "auth_timeout") >= tcp_admitted and
                             metrics_rejected(s, "request_timeout") + http_refused >=
                             FLOOD["http"]) else None
            timeouts = wait_until(deadlines_passed, 30,
                                  "the held unauthenticated and half-request connections closed")
            check_eq(floods[1].held(), 0, "unauthenticated connections held after the deadline")
            check_eq(floods[2].held(), 0, "metrics connections held after the deadline")
            check_eq(floods[0].held(), PER_UID, "connections nobody holds (5 minutes idle)")

            cpu_before = ferryd_cpu_seconds(d)
            churn_started = time.monotonic()
            for f in floods:
                check_eq(f.cmd("churn"), "churning", f"{f.name} churns")
            # Root acts once every flood is in full swing: each refused many times more.
            wait_until(lambda: all(now - then >= CHURN_BEFORE_ACTING for now, then in zip(
                refusals(samples(mhost, mport)), refusals(timeouts))), 60, "the floods churning")
            took = {}
            for _ in range(ROUNDS):
                timed("ferryctl status", lambda: ferryctl_out(d, "status", timeout=10), took)
                timed("ferryctl reload", lambda: ferryctl_out(d, "reload", timeout=10), took)
                timed("ferryctl backend drain",
                      lambda: ferryctl_out(d, "backend", "web", dead_backend, "drain", timeout=10), took)
                timed("Prometheus scrape", lambda: prometheus_scrape(mhost, mport), took)
                timed("TCP control auth + status", lambda: tcp_admin_status(chost, cport), took)
                timed("echo service", lambda: echo_roundtrip(echo_port), took)
                timed("proxy service", lambda: echo_roundtrip(web_port), took)
            for what, seconds in took.items():
                print(f"during the flood: {what}: max {max(seconds) * 1000:.0f} ms over "
                      f"{len(seconds)}", flush=True)
            during = samples(mhost, mport)
            churned = time.monotonic() - churn_started
            refused_now = sum(refusals(during)) - sum(refusals(timeouts))
            print(f"churn: {refused_now:.0f} connections refused in {churned:.1f}s "
                  f"({refused_now / churned:.0f}/s), ferryd used {ferryd_cpu_seconds(d) - cpu_before:.2f}"
                  f" CPU seconds", flush=True)
            check(control_rejected(during, "per_uid") > control_rejected(s, "per_uid"),
                  "nobody's churn is still being refused")
            check(metrics_rejected(during, "per_source") > metrics_rejected(s, "per_source"),
                  "the metrics churn is still being refused")
            # (The flooders' own count would include connections still in the listen backlog.)
            check(during.get("ferry_control_connections_open", 0) <= PER_UID + UNAUTH_PER_SOURCE,
                  f"open while churning: nobody's and 127.0.0.2's budgets at most: "
                  f"{during.get('ferry_control_connections_open')}")
        finally:
            for f in floods:
                f.stop()

        # Each flood said who it was in the log, rate-limited.
        log = d.log()
        for needle in (f"uid {nobody.pw_uid}: refusing a control connection: this uid holds "
                       f"{PER_UID}, its budget",
                       f"tcp {FLOOD_SOURCE}: refusing a TCP control connection: this address "
                       f"holds {UNAUTH_PER_SOURCE}",
                       f"metrics: {FLOOD_SOURCE}: refusing a connection: this address holds "
                       f"{METRICS_PER_SOURCE}",
                       f"metrics: {FLOOD_SOURCE}: no complete request head within 3000 ms"):
            check(needle in log, f"the log names the flood: {needle!r}")
        refusal_lines = [l for l in log.splitlines() if "refusing a" in l]
        check(len(refusal_lines) < 100, f"refusals are logged rate-limited: {len(refusal_lines)} lines")

        # The flooders are gone: every connection they held is closed, and each budget is whole.
        wait_until(lambda: samples(mhost, mport).get("ferry_control_connections_open") == 0, 20,
                   "the flooders' control connections closed")
        as_nobody(nobody_fills_its_budget_again, d.socket_path)
        tcp_control_fills_its_budget_again(chost, cport)
        metrics_fills_its_budget_again(mhost, mport)
        web = next(x for x in ok(d.request("services"))["services"] if x["name"] == "web")
        backend = next(b for b in web["backends"] if b["address"] == dead_backend)
        check_eq(backend.get("admin"), "drain", f"the drained backend: {backend}")
        check_eq(d.stop(), 0, "ferryd's exit status after SIGTERM")
