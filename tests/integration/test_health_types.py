"""Health check types on the real daemon against real servers. dns: the DNS lab of test_dns.py
(three dnsmasq behind the fast path); one dnsmasq is stopped, is marked down within
fall x interval, and client queries stop reaching its address (a silent listener there counts
them) while the other two answer all. http: two virtual servers of one unprivileged nginx on
loopback, one answering /healthz with 503, which is marked down ("status 503") while proxied
requests all reach the other. udp: loopback responders, a wrong reply and an ICMP port
unreachable each marked down with their reason, and "port" checking another port than the one
served. And --check-config refusing a dns check on a TCP-only service at its line and column."""
import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import sys
import threading
import time

from harness import (FERRYD, TestFailure, base_config, check, check_eq, ferryctl, ok,
                     running, wait_until)
from test_dns import BACKENDS4, CLIENT4, GW_BACK4, PORT, VIP4, DnsLab, dig, dns_config

NGINX = "/usr/sbin/nginx"
INTERVAL_MS = 100
TIMEOUT_MS = 80
RISE = 2
FALL = 3
# Jitter (10 %), a check's own timeout, scheduling on a loaded 2-core machine, the poll period.
SLACK_S = 1.0
DOWN_WITHIN_S = INTERVAL_MS / 1000 * FALL * 1.1 + TIMEOUT_MS / 1000 + SLACK_S


def health(type_, **keys):
    return {"type": type_, "interval_ms": INTERVAL_MS, "timeout_ms": TIMEOUT_MS, "rise": RISE,
            "fall": FALL, **keys}


def backend_rows(d, service):
    svc = [s for s in ok(d.request("services"))["services"] if s["name"] == service]
    check_eq(len(svc), 1, f"service {service} listed")
    return {b["address"]: b for b in svc[0]["backends"]}


def wait_state(d, service, address, state, timeout):
    wait_until(lambda: backend_rows(d, service).get(address, {}).get("state") == state, timeout,
               f"{service} backend {address} {state}")
    return backend_rows(d, service)[address]


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# A UDP socket on the backend's address that answers nothing and writes each datagram's source
# address, a line each, to a file: what still reaches the address of a stopped dnsmasq.
SILENT_LISTENER = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
out = open(sys.argv[3], "a", buffering=1)
print("ready", flush=True)
while True:
    _, peer = s.recvfrom(4096)
    out.write(peer[0] + "\n")
"""


def client_queries(lab):
    """{backend name: client queries for who.example.test its dnsmasq logged}."""
    out = {}
    for name, _, _, _, log in lab.dnsmasq:
        with open(log) as f:
            out[name] = sum(f"query[TXT] who.example.test from {CLIENT4}" in line for line in f)
    return out


def ask_vip(lab, count, what):
    for i in range(count):
        res = dig(lab.client, VIP4, CLIENT4, "who.example.test", "TXT")
        check_eq(res["status"], "NOERROR", f"{what}: query {i} through the VIP: {res['output']}")


def test_dns_check_marks_a_stopped_dnsmasq_down_and_udp_stops_reaching_it(workdir):
    lab = DnsLab(workdir)
    silent = None
    try:
        lab.start_dnsmasq()
        cfg = dns_config(workdir)
        cfg["services"][0]["health"] = health("dns", name="www.example.test", qtype="A")
        cfg["services"][1]["health"] = health("dns", name="www.example.test", qtype="AAAA")
        with running(workdir, cfg, netns=lab.gw.name) as d:
            for a in BACKENDS4:
                # Up from the start; await a passing check (the first may meet ARP on its way).
                address = f"{a}:{PORT}"
                wait_until(lambda: backend_rows(d, "dns4")[address]["consecutive_successes"] >= 1,
                           2 + SLACK_S, f"a dns check of {address} passes")
                row = backend_rows(d, "dns4")[address]
                check_eq((row["check"], row["state"], row["last_reason"]),
                         ("dns", "up", "rcode NOERROR"), f"row {row}")
            before = client_queries(lab)
            ask_vip(lab, 30, "all up")
            reached = {n: c - before[n] for n, c in client_queries(lab).items()}
            check(all(c > 0 for c in reached.values()), f"every dnsmasq answers some: {reached}")

            name, a4, a6, p, _ = lab.dnsmasq[2]
            p.kill()
            p.wait()
            stopped = time.monotonic()
            victim = f"{a4}:{PORT}"
            row = wait_state(d, "dns4", victim, "down", DOWN_WITHIN_S)
            took = time.monotonic() - stopped
            print(f"  {name} down {took * 1000:.0f} ms after it stopped (interval {INTERVAL_MS} ms,"
                  f" fall {FALL}): {row['last_error']}", flush=True)
            # The backend's kernel rate-limits its ICMP errors (not on loopback): after the
            # first few, checks time out instead.
            check(row["last_error"] in ("port unreachable (ICMP)", f"no reply within {TIMEOUT_MS}"
                                        " ms"), f"why it is down: {row}")
            wait_state(d, "dns6", f"[{a6}]:{PORT}", "down", DOWN_WITHIN_S)

            # From now on only the checker's queries (from the gateway) may reach the address.
            sources = workdir.file("silent.sources")
            silent = subprocess.Popen(["ip", "netns", "exec", lab.back.name, sys.executable, "-c",
                                       SILENT_LISTENER, a4, str(PORT), sources],
                                      stdout=subprocess.PIPE, text=True)
            check_eq(silent.stdout.readline().strip(), "ready", "silent listener")
            before = client_queries(lab)
            ask_vip(lab, 30, "one down")
            after = client_queries(lab)
            check_eq(sum(after[n] - before[n] for n in after), 30, f"answered by the others {after}")
            check_eq(after[name] - before[name], 0, "the stopped dnsmasq")
            wait_until(lambda: os.path.exists(sources) and open(sources).read(), 2,
                       "the checker's queries reach the silent listener")
            seen = set(open(sources).read().split())
            check_eq(seen, {GW_BACK4}, "sources of UDP to the stopped backend's address")
            row = backend_rows(d, "dns4")[victim]
            check_eq((row["state"], row["last_result"]), ("down", "timeout"), f"silent: {row}")
            r = ferryctl(d, "services")
            check(f"{victim}(down,no reply within {TIMEOUT_MS} ms)" in r.stdout and " dns " in
                  r.stdout, f"ferryctl services:\n{r.stdout}")
            check_eq(d.log().count(f"service dns4 backend {victim} down: "), 1, "down logged once")
    finally:
        if silent is not None and silent.poll() is None:
            silent.kill()
            silent.wait()
        lab.close()


NGINX_CONF = """
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log {dir}/access.log;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  log_format health '$server_port $request "$http_host" "$http_user_agent" $status';
  server {{
    listen 127.0.0.1:{port_a};
    access_log {dir}/access.log health;
    location = /healthz {{ return 200 "ok\\n"; }}
    location / {{ return 200 "backend-a\\n"; }}
  }}
  server {{
    listen 127.0.0.1:{port_b};
    access_log {dir}/access.log health;
    location = /healthz {{ return 503 "sick\\n"; }}
    location / {{ return 200 "backend-b\\n"; }}
  }}
}}
"""


@contextlib.contextmanager
def nginx(w, port_a, port_b):
    """One nginx as nobody with its config, pid, logs and temp files in a private directory;
    yields that directory; always stopped."""
    check(os.path.exists(NGINX), f"{NGINX} missing (apt-get install nginx-light)")
    home = w.file("nginx")
    os.mkdir(home)
    nobody = pwd.getpwnam("nobody")
    os.chown(home, nobody.pw_uid, nobody.pw_gid)
    conf = os.path.join(home, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(dir=home, port_a=port_a, port_b=port_b))
    out = open(w.file("nginx.out"), "w")
    p = subprocess.Popen(["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                          "--clear-groups", NGINX, "-p", home, "-c", conf, "-e",
                          os.path.join(home, "error.log"), "-g", "daemon off;"],
                         stdout=out, stderr=subprocess.STDOUT)
    out.close()
    try:
        def listening():
            if p.poll() is not None:
                raise TestFailure(f"nginx exited with {p.returncode}: "
                                  f"{open(w.file('nginx.out')).read()}")
            for port in (port_a, port_b):
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) != 0:
                        return False
            return True
        wait_until(listening, 15, "nginx listening on both ports")
        yield home
    finally:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(home, ignore_errors=True)


def get(port, path="/"):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: web\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode().strip()


def test_http_check_marks_the_nginx_answering_503_down(workdir):
    port_a, port_b, vip_port = free_port(), free_port(), free_port()
    with nginx(workdir, port_a, port_b) as home:
        a, b = f"127.0.0.1:{port_a}", f"127.0.0.1:{port_b}"
        cfg = base_config(workdir, services=[
            {"name": "web", "vip": "127.0.0.1", "port": vip_port, "protocols": ["tcp"],
             "backends": [a, b], "health": health("http", path="/healthz")}])
        with running(workdir, cfg) as d:
            row = wait_state(d, "web", b, "down", DOWN_WITHIN_S)
            check_eq((row["check"], row["last_error"]), ("http", "status 503"), f"row {row}")
            row = wait_state(d, "web", a, "up", SLACK_S)
            check_eq(row["last_reason"], "status 200", f"row {row}")
            bodies = [get(vip_port) for _ in range(20)]
            check_eq(set(bodies), {(200, "backend-a")}, "proxied requests")
            log = open(os.path.join(home, "access.log")).read().splitlines()
            check(f'{port_b} GET /healthz HTTP/1.1 "{b}" "ferry-health" 503' in log,
                  f"nginx logged the check with its Host and user agent: {log[-5:]}")
            stats = ok(d.request("stats", {"prefix": "ferry_health_check_duration"}))
            family = stats["metrics"][0]
            check_eq(family["name"], "ferry_health_check_duration_seconds", "family")
            counts = {s["labels"]["backend"]: s["count"] for s in family["samples"]}
            check(counts.get(a, 0) >= 1 and counts.get(b, 0) >= FALL, f"durations {counts}")


class UdpResponder:
    """A loopback UDP socket answering every datagram with `reply` (None: silence)."""

    def __init__(self, reply):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.reply = reply
        self.heard = []
        self.stopped = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopped:
            try:
                data, peer = self.sock.recvfrom(2048)
            except socket.timeout:
                continue
            self.heard.append(data)
            if self.reply is not None:
                self.sock.sendto(self.reply, peer)

    def close(self):
        self.stopped = True
        self.thread.join(timeout=5)
        self.sock.close()


def test_udp_check_and_port_override(workdir):
    good = UdpResponder(b"pong: fine")
    wrong = UdpResponder(b"nope")
    closed = free_port(socket.SOCK_DGRAM)
    unused = free_port(socket.SOCK_DGRAM)
    try:
        ep = lambda port: f"127.0.0.1:{port}"
        cfg = base_config(workdir, services=[
            {"name": "udp", "vip": "10.0.0.10", "port": 7000, "protocols": ["udp"],
             "backends": [ep(good.port), ep(wrong.port), ep(closed)],
             "health": health("udp", send_hex="0070696e67", expect="pong")},
            # Served on `unused`, where nothing listens, but checked on the good responder's port.
            {"name": "other-port", "vip": "10.0.0.11", "port": 7000, "protocols": ["udp"],
             "backends": [ep(unused)], "health": health("udp", send="ping", port=good.port)}])
        with running(workdir, cfg) as d:
            row = wait_state(d, "udp", ep(good.port), "up", 2 * INTERVAL_MS / 1000 + SLACK_S)
            check_eq((row["check"], row["last_reason"]), ("udp", "reply of 10 bytes"), f"{row}")
            row = wait_state(d, "udp", ep(wrong.port), "down", DOWN_WITHIN_S)
            check_eq(row["last_error"], "reply did not start with expect", f"{row}")
            row = wait_state(d, "udp", ep(closed), "down", DOWN_WITHIN_S)
            check_eq(row["last_error"], "port unreachable (ICMP)", f"{row}")
            check(b"\x00ping" in good.heard, f"send_hex bytes arrive: {good.heard[:3]}")
            row = wait_state(d, "other-port", ep(unused), "up", 2 * INTERVAL_MS / 1000 + SLACK_S)
            check(row["checks"]["ok"] >= 1 and b"ping" in good.heard, f"port override {row}")
            cfg_json = ok(d.request("config"))["config"]
            check_eq(cfg_json["services"][1]["health"]["port"], good.port, "effective health.port")
            check_eq(cfg_json["services"][0]["health"]["send_hex"], "0070696e67", "send_hex")
    finally:
        good.close()
        wrong.close()


def test_check_config_refuses_a_dns_check_on_a_tcp_only_service(workdir):
    path = workdir.write_config("\n".join([
        "{",
        '  "services": [ { "name": "web", "vip": "10.0.0.10", "port": 80, "protocols": ["tcp"],',
        '    "backends": ["10.0.1.2:80"],',
        '    "health": { "type": "dns" } } ]',
        "}"]))
    r = subprocess.run([FERRYD, "--check-config", "--config", path], capture_output=True,
                       text=True, timeout=20)
    check_eq(r.returncode, 78, f"exit status ({r.stderr})")
    check_eq(r.stderr.strip(), f"{path}:4:25: services[0].health.type: a dns check needs a "
             "service that serves UDP, but this one serves TCP only; use type \"tcp\"", "message")
