"""The packaged ferryd under a real systemd as PID 1: a container booted with systemd-nspawn from
this machine's root (nspawn.py), the .deb (deb.py, the one test_package built) installed with apt,
ferryd serving a UDP reflect service on the AF_XDP fast path of the container's veth (host0) and a
TCP echo service on port 80 to this host through ve-NAME. systemctl start reaches active with
ferryd's STATUS= line and the unit's identity, capabilities and filters in force; ferryctl status
works for a member of group ferry and is refused to others; systemctl reload applies a changed
config and refuses a broken one while the old one keeps serving; a SIGSTOPped ferryd is killed by
the watchdog and restarted; systemctl stop leaves no XDP program, control socket or AF_XDP socket,
and the veth then carries traffic to a kernel socket on the same port; ferryctl upgrade (twice, then
SIGUSR2 through systemctl kill) hands over with the unit active throughout, systemd following the
new process (MainPID, its STATUS= and watchdog pings, no restart counted) and UDP answered; a
package upgrade hands over in postinst, and restarts ferryd only when the handover fails and the
new binary accepts the config; powering the container off leaves nothing on the host."""
import contextlib
import ipaddress
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

import deb as deb_cache
from harness import TestFailure, check, check_eq, wait_until
from nspawn import Container
from test_systemd_unit import unit_caps, unit_settings

UDP_PORT = 5300
UDP_PORT_ADDED = 5301  # the service a reload adds
TCP_PORT = 80  # below 1024: CAP_NET_BIND_SERVICE from the unit is what lets ferryd listen here
PROXY_PORT = 8080  # the upgrade tests' TCP proxy, to PROXY_BACKEND
PROXY_BACKEND = ("127.0.0.1", 7007)  # a TCP echo server in the container (not ferry's)
CONFIG = "/etc/ferry/ferryd.json"
ANNOUNCE_TABLE = 100
SOCKET = "/run/ferry/ferryd.sock"
MEMBER, OUTSIDER = "ferryop", "outsider"  # in group ferry, and not
BUILD_BUDGET_S = 700  # only when test_package has not built this tree's package already
WATCHDOG_BUDGET_S = 60  # WatchdogSec=10s + RestartSec=2s + the start


class Lab:
    """The container, its veth's addresses, and what the tests have set up in it so far."""

    def __init__(self):
        self.container = Container()
        self.installed = False
        self.deb = None  # the package installed, on this host
        self.install_error = None
        self.boot_error = None
        self.config = None
        self.host_addr = self.vip = None

    def boot(self):
        self.container.__enter__()
        net = unused_subnet()
        self.host_addr, self.vip = (str(a) for a in list(net.hosts())[:2])
        subprocess.run(["ip", "addr", "add", f"{self.host_addr}/{net.prefixlen}", "dev",
                        self.container.host_if], check=True)
        subprocess.run(["ip", "link", "set", self.container.host_if, "up"], check=True)
        self.container.run("ip", "addr", "add", f"{self.vip}/{net.prefixlen}", "dev", "host0")
        self.container.run("ip", "link", "set", "host0", "up")
        print(f"  veth {self.container.host_if} {self.host_addr} -- host0 {self.vip}", flush=True)
        # The root this boots is this machine's, whose packages include servers the other tests
        # run as private instances (nginx, haproxy, bird, and frr where installed): Debian enables
        # their system services, which the container's systemd starts; nginx's default site holds
        # port 80, the privileged port the echo service proves CAP_NET_BIND_SERVICE with, and a
        # routing daemon would learn the announce table. They have no part here.
        for service in ("nginx.service", "haproxy.service", "bird.service", "frr.service"):
            self.container.run("systemctl", "disable", "--now", service, check=False)


LAB = None


def lab(w):
    """The booted container; the first test to ask boots it, and if that fails the others fail
    at once with its message."""
    global LAB
    if LAB is None:
        LAB = Lab()
        try:
            LAB.boot()
        except Exception as e:
            LAB.boot_error = str(e)[-3000:]
            raise
    check(LAB.boot_error is None, f"the container did not boot: {LAB.boot_error}")
    return LAB


def unused_subnet():
    """A /30 of 10.213.0.0/16 that no address or route of this host's namespace touches."""
    seen = subprocess.run(["sh", "-c", "ip -4 -o addr show; ip -4 route show table all"],
                          capture_output=True, text=True, check=True).stdout
    for i in range(256):
        n = (os.getpid() + i) % 254 + 1
        if f"10.213.{n}." not in seen:
            return ipaddress.ip_network(f"10.213.{n}.0/30")
    raise TestFailure("no free /30 in 10.213.0.0/16")


def unit(c, *props):
    """systemctl show -P of ferryd.service: one value, or a dict of several."""
    out = c.run("systemctl", "show", "ferryd", *(f"--property={p}" for p in props)).stdout
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return values[props[0]] if len(props) == 1 else values


def ctl(c, *args, user=None, check=True):
    """ferryctl --json in the container; the answer's result (check=True) or the CompletedProcess."""
    r = c.run("ferryctl", "--json", *args, user=user, check=False, timeout=20)
    if not check:
        return r
    check_eq(r.returncode, 0, f"ferryctl {' '.join(args)}: {r.stdout} {r.stderr}")
    return json.loads(r.stdout)["result"]


def xsk_tx_packets(c):
    fams = ctl(c, "stats", "ferry_xsk_tx_packets_total")["metrics"]
    return sum(s["value"] for f in fams for s in f["samples"])


def ferry_config(l, added_service=False, announce=False, proxy=False):
    """The container's config: the AF_XDP fast path on host0 with a UMEM of 1024 x 2048 bytes (the
    container's memlock hard limit is 8 MiB, which LimitMEMLOCK=infinity cannot raise), a UDP
    reflect service and a TCP echo service on the container's address (and with proxy, a TCP
    proxy service to PROXY_BACKEND)."""
    services = [{"name": "reflect", "vip": l.vip, "port": UDP_PORT, "protocols": ["udp"],
                 "mode": "reflect"},
                {"name": "echo", "vip": l.vip, "port": TCP_PORT, "protocols": ["tcp"], "mode": "echo"}]
    if added_service:
        services.append({"name": "reflect-added", "vip": l.vip, "port": UDP_PORT_ADDED,
                         "protocols": ["udp"], "mode": "reflect"})
    if proxy:
        services.append({"name": "proxy", "vip": l.vip, "port": PROXY_PORT, "protocols": ["tcp"],
                         "mode": "proxy", "backends": ["%s:%d" % PROXY_BACKEND]})
    extra = {"announce": {"table": ANNOUNCE_TABLE, "withdraw_grace_ms": 200}} if announce else {}
    return json.dumps({
        **extra,
        "control": {"socket": SOCKET, "mode": "0660", "group": "ferry"},
        "log": {"level": "info"},
        "xdp": {"interfaces": [{"name": "host0"}],
                "umem": {"frames": 1024, "frame_bytes": 2048},
                "rings": {"fill": 256, "completion": 256, "rx": 256, "tx": 256}},
        "tcp": {"workers": 1},
        "services": services,
    }, indent=2) + "\n"


def status_text(services, udp):
    return (f"{services} services ({udp} udp, {services - udp} tcp), 0 routes, XDP on 1 interfaces, "
            f"1 AF_XDP workers; control {SOCKET}; metrics 127.0.0.1:9469")


def udp_round_trips(l, port, count=20, tag="t"):
    """`count` datagrams from this host through the veth to VIP:port, one at a time; a datagram is
    answered when the same bytes come back from VIP:port (ferry's reflect: nothing in the
    container's kernel listens there). Returns {"ok", "lost", "retries"}."""
    res = {"ok": 0, "lost": 0, "retries": 0}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((l.host_addr, 0))
        s.settimeout(0.3)
        for i in range(count):
            payload = f"{tag}-{port}-{i} ".encode() + os.urandom(16).hex().encode()
            for _ in range(5):
                s.sendto(payload, (l.vip, port))
                try:
                    while True:
                        data, src = s.recvfrom(2048)
                        if data == payload and src == (l.vip, port):
                            break
                    res["ok"] += 1
                    break
                except socket.timeout:
                    res["retries"] += 1
            else:
                res["lost"] += 1
    return res


def check_udp_served(l, port, what, count=20):
    res = udp_round_trips(l, port, count, tag=what.replace(" ", "-"))
    check_eq((res["ok"], res["lost"]), (count, 0), f"UDP to {l.vip}:{port} {what}: {res}")
    return res


def check_tcp_echo(l, what, port=TCP_PORT):
    payload = f"ferry-boot {what}".encode()
    with socket.create_connection((l.vip, port), timeout=10, source_address=(l.host_addr, 0)) as s:
        s.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    check_eq(got, payload, f"TCP echo on {l.vip}:{port} {what}")


def check_serves(l, what, ports=(UDP_PORT,)):
    """Every UDP service answers through the fast path (ferry's AF_XDP transmit counter moves), and
    the TCP echo service answers."""
    c = l.container
    before = xsk_tx_packets(c)
    for port in ports:
        check_udp_served(l, port, what)
    sent = xsk_tx_packets(c) - before
    check(sent >= 20 * len(ports), f"{what}: the replies left through AF_XDP ({sent} sent)")
    check_tcp_echo(l, what)


def install(l):
    """The .deb, installed with apt in the container (once; a failure fails the later tests at
    once, with its message, instead of building again)."""
    if l.installed:
        return
    check(l.install_error is None, f"the package could not be installed: {l.install_error}")
    try:
        install_package(l)
    except Exception as e:
        l.install_error = str(e)[-3000:]
        raise
    l.installed = True


def install_package(l):
    c = l.container
    path, seconds = deb_cache.package(BUILD_BUDGET_S)
    l.deb = path
    print(f"  {os.path.basename(path)}: " + (f"built in {seconds:.0f} s" if seconds is not None
                                             else f"already built for this tree ({os.path.dirname(path)})"),
          flush=True)
    inside = f"/root/{os.path.basename(path)}"
    # This machine's root is a container image whose policy-rc.d forbids maintainer scripts to
    # start services; a Debian machine booted with systemd has none (the overlay keeps it on the
    # host).
    c.run("rm", "-f", "/usr/sbin/policy-rc.d")
    c.copy_in(path, inside)
    started = time.monotonic()
    c.run("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q",
          inside, timeout=300)
    print(f"  apt-get install: {time.monotonic() - started:.1f} s", flush=True)
    for user, groups in ((MEMBER, ["-G", "ferry"]), (OUTSIDER, [])):
        c.run("useradd", "--no-create-home", *groups, user)


def serving(l, added_service=False, announce=False, proxy=False):
    """ferryd running the lab config (of the given shape), started if need be."""
    c = l.container
    install(l)
    text = ferry_config(l, added_service, announce, proxy)
    if l.config != text or unit(c, "ActiveState") != "active":
        c.write(CONFIG, text)
        c.run("systemctl", "restart", "ferryd", timeout=90)
        l.config = text
    return c


def test_apt_installs_the_package_enabled_and_started(workdir):
    l = lab(workdir)
    install(l)
    c = l.container
    check_eq(c.run("dpkg-query", "-W", "-f=${Status}", "ferry").stdout, "install ok installed",
             "dpkg status of ferry")
    check_eq(unit(c, "FragmentPath"), "/lib/systemd/system/ferryd.service", "the packaged unit")
    check_eq(c.run("systemctl", "is-enabled", "ferryd", check=False).stdout.strip(), "enabled",
             "postinst enabled the unit")
    # The shipped config: no interfaces, no services; postinst started it (dh_installsystemd).
    props = unit(c, "ActiveState", "SubState", "StatusText")
    check_eq((props["ActiveState"], props["SubState"]), ("active", "running"),
             f"ferryd started by the package's postinst: {props}")
    check_eq(props["StatusText"], "0 services (0 udp, 0 tcp), 0 routes, XDP on 0 interfaces, "
             f"0 AF_XDP workers; control {SOCKET}; metrics 127.0.0.1:9469", "STATUS= of the shipped config")
    sock = c.run("stat", "-c", "%U %G %a %F", SOCKET).stdout.strip()
    check_eq(sock, "ferry ferry 660 socket", f"{SOCKET}: owner, group, mode")
    check_eq(c.run("stat", "-c", "%U %G %a", "/run/ferry").stdout.strip(), "ferry ferry 750",
             "/run/ferry (RuntimeDirectory=)")


def test_start_reaches_active_with_status_and_serves_through_the_veth(workdir):
    l = lab(workdir)
    install(l)
    c = l.container
    c.run("systemctl", "stop", "ferryd", timeout=60)
    c.write(CONFIG, ferry_config(l))
    l.config = ferry_config(l)
    started = time.monotonic()
    c.run("systemctl", "start", "ferryd", timeout=90)  # Type=notify: returns after READY=1
    print(f"  systemctl start: {time.monotonic() - started:.2f} s", flush=True)
    props = unit(c, "ActiveState", "SubState", "StatusText", "MainPID", "Result")
    check_eq((props["ActiveState"], props["SubState"], props["Result"]), ("active", "running", "success"),
             f"after systemctl start: {props}")
    check_eq(props["StatusText"], status_text(2, 1), "STATUS= line")

    # What systemd applied, read from the running process.
    pid = props["MainPID"]
    st = dict(line.split(":\t", 1) for line in c.run("cat", f"/proc/{pid}/status").stdout.splitlines()
              if ":\t" in line)
    uid = c.run("id", "-u", "ferry").stdout.strip()
    check_eq(st["Uid"].split(), [uid] * 4, "ferryd runs as user ferry")
    _, ambient = unit_caps(unit_settings())
    for field in ("CapEff", "CapAmb", "CapBnd"):
        decoded = subprocess.run(["capsh", f"--decode={st[field]}"], capture_output=True, text=True,
                                 check=True).stdout.strip().split("=", 1)[1]
        check_eq(sorted(decoded.split(",")), sorted(cap.lower() for cap in ambient),
                 f"{field} of ferryd (the unit's capabilities)")
    check_eq((st["NoNewPrivs"].strip(), st["Seccomp"].strip()), ("1", "2"),
             "NoNewPrivileges= and SystemCallFilter= in force")
    limits = c.run("cat", f"/proc/{pid}/limits").stdout
    memlock = re.search(r"Max locked memory\s+(\S+)\s+(\S+)", limits).groups()
    print(f"  LimitMEMLOCK=infinity became {memlock[0]} / {memlock[1]} (soft / hard) in the container",
          flush=True)
    root = [line for line in c.run("cat", f"/proc/{pid}/mountinfo").stdout.splitlines()
            if line.split()[4] == "/"]
    check(root and " ro," in f" {root[-1].split()[5]},",
          f"/ read-only for ferryd (ProtectSystem=strict): {root}")

    link = json.loads(c.run("ip", "-j", "-d", "link", "show", "host0").stdout)[0]
    check("xdp" in link and link["xdp"].get("prog", {}).get("id"), f"XDP program on host0: {link.get('xdp')}")
    print(f"  host0: XDP program {link['xdp']['prog']['id']} attached (mode {link['xdp']['mode']})")
    check_serves(l, "after start")


def test_ferryctl_status_for_group_ferry_only(workdir):
    l = lab(workdir)
    c = serving(l)
    status = ctl(c, "status", user=MEMBER)
    check_eq(str(status["pid"]), unit(c, "MainPID"), f"ferryctl status as {MEMBER} (group ferry)")
    r = ctl(c, "reload", user=MEMBER, check=False)
    check_eq(r.returncode, 4, f"reload is an admin command, refused to {MEMBER}: {r.stdout} {r.stderr}")
    r = c.run("ferryctl", "status", user=OUTSIDER, check=False)
    check_eq(r.returncode, 4, f"ferryctl status as {OUTSIDER} (not in group ferry): {r.stdout} {r.stderr}")
    check("permission denied" in r.stderr and "(ferry)" in r.stderr, f"the refusal says why: {r.stderr}")


def test_reload_applies_a_changed_config_and_refuses_a_broken_one(workdir):
    l = lab(workdir)
    c = serving(l)
    pid = unit(c, "MainPID")
    reloads = ctl(c, "status")["reloads"]
    c.write(CONFIG, ferry_config(l, added_service=True))
    c.run("systemctl", "reload", "ferryd", timeout=60)
    # systemd 252 returns once ExecReload= has signalled; ferryd then sends RELOADING=1 ... READY=1.
    wait_until(lambda: ctl(c, "status")["reloads"] == reloads + 1, 10, "ferryd to apply the reload")
    l.config = ferry_config(l, added_service=True)
    names = sorted(s["name"] for s in ctl(c, "services")["services"])
    check_eq(names, ["echo", "reflect", "reflect-added"], "services after systemctl reload")
    wait_until(lambda: unit(c, "StatusText") == status_text(3, 2), 10, "STATUS= of the new config")
    check_eq(unit(c, "MainPID"), pid, "reloaded in place, not restarted")
    check_serves(l, "after reload", ports=(UDP_PORT, UDP_PORT_ADDED))

    # A broken file: the unit's ExecReload= check refuses it, so systemctl reload fails and
    # ferryd is not signalled; then a SIGHUP straight to ferryd, which refuses it itself.
    broken = ferry_config(l, added_service=True).replace(f'"port": {UDP_PORT_ADDED}', '"port": 70000')
    c.write(CONFIG, broken)
    failures = ctl(c, "status")["reload_failures"]
    r = c.run("systemctl", "reload", "ferryd", check=False, timeout=60)
    check(r.returncode != 0, f"systemctl reload of a broken config fails: {r.stdout} {r.stderr}")
    journal = c.run("journalctl", "-u", "ferryd", "--no-pager", "-o", "cat", "-n", "30").stdout
    check("services[2].port: 70000 is out of range" in journal,
          f"the reason is in the journal (systemctl status):\n{journal}")
    check_eq(ctl(c, "status")["reload_failures"], failures, "ferryd was not signalled")
    c.run("systemctl", "kill", "--kill-who=main", "--signal=SIGHUP", "ferryd")

    def rejected():
        status = ctl(c, "status")
        return status if status["reload_failures"] == failures + 1 else None
    status = wait_until(rejected, 10, "ferryd to reject the SIGHUP reload")
    check("services[2].port: 70000 is out of range (1..65535)" in (status["last_reload_error"] or ""),
          f"last_reload_error: {status['last_reload_error']}")
    props = unit(c, "ActiveState", "SubState", "MainPID", "StatusText")
    check_eq((props["ActiveState"], props["SubState"], props["MainPID"]), ("active", "running", pid),
             f"still running after both rejections: {props}")
    check_eq(props["StatusText"], status_text(3, 2), "STATUS= still the running config's")
    check_serves(l, "with the broken file rejected", ports=(UDP_PORT, UDP_PORT_ADDED))
    c.write(CONFIG, ferry_config(l, added_service=True))


def test_watchdog_kills_a_stopped_ferryd_and_systemd_restarts_it(workdir):
    l = lab(workdir)
    c = serving(l, added_service=True)
    props = unit(c, "MainPID", "NRestarts")
    old, restarts = props["MainPID"], int(props["NRestarts"])
    c.run("kill", "-STOP", old)
    started = time.monotonic()

    def restarted():
        p = unit(c, "MainPID", "NRestarts", "ActiveState")
        return p if (int(p["NRestarts"]) == restarts + 1 and p["MainPID"] not in ("0", old)
                     and p["ActiveState"] == "active") else None
    props = wait_until(restarted, WATCHDOG_BUDGET_S, "systemd to kill and restart the stopped ferryd",
                       interval=0.5)
    print(f"  restarted {time.monotonic() - started:.1f} s after SIGSTOP: pid {old} -> {props['MainPID']}",
          flush=True)
    journal = c.run("journalctl", "-u", "ferryd", "--no-pager", "-o", "cat", "-n", "40").stdout
    check("ferryd.service: Watchdog timeout" in journal, f"killed by the watchdog:\n{journal}")
    check(f"Killing process {old} (ferryd) with signal SIGABRT" in journal, f"the old process:\n{journal}")
    check(c.run("test", "-e", f"/proc/{old}", check=False).returncode != 0, f"pid {old} is gone")
    check_eq(unit(c, "StatusText"), status_text(3, 2), "STATUS= after the restart")
    check_serves(l, "after the watchdog restart", ports=(UDP_PORT, UDP_PORT_ADDED))


def announced_routes(c):
    """The VIP routes in the announce table, by the protocol name the package gives iproute2."""
    out = c.run("ip", "-j", "route", "show", "table", str(ANNOUNCE_TABLE), "proto", "ferry").stdout
    return sorted(r["dst"] for r in json.loads(out or "[]"))


def test_sigkill_is_followed_by_the_units_withdraw_and_a_restart_announces_again(workdir):
    l = lab(workdir)
    c = serving(l, added_service=True, announce=True)
    wait_until(lambda: announced_routes(c) == [l.vip], 20, "the VIP in the announce table")
    check_eq(ctl(c, "announce")["vips"][0]["announced"], True, "ferryctl announce")
    props = unit(c, "MainPID", "NRestarts")
    old, restarts = props["MainPID"], int(props["NRestarts"])
    # SIGKILL: ferryd cannot withdraw anything itself; ExecStopPost= must.
    c.run("systemctl", "kill", "--signal=SIGKILL", "ferryd")

    def restarted():
        p = unit(c, "MainPID", "NRestarts", "ActiveState")
        return p if (int(p["NRestarts"]) == restarts + 1 and p["MainPID"] not in ("0", old)
                     and p["ActiveState"] == "active") else None
    wait_until(restarted, 30, "systemd to restart the killed ferryd", interval=0.3)
    journal = c.run("journalctl", "-u", "ferryd", "--no-pager", "-o", "cat", "-n", "60").stdout
    withdrew = "ferryd: withdrew 1 route(s) of protocol ferry"
    check(withdrew in journal, f"ExecStopPost= withdrew the killed ferryd's route:\n{journal}")
    check(journal.rfind(withdrew) < journal.rfind("ferryd 0.1.0 ready"),
          f"withdrawn before the new ferryd started:\n{journal}")
    wait_until(lambda: announced_routes(c) == [l.vip], 20, "the restarted ferryd to announce again")
    check_serves(l, "after the SIGKILL restart", ports=(UDP_PORT, UDP_PORT_ADDED))
    # A stop withdraws first (ferryd itself, then ExecStopPost= finds nothing left).
    c.run("systemctl", "stop", "ferryd", timeout=60)
    check_eq(announced_routes(c), [], "routes after systemctl stop")
    journal = c.run("journalctl", "-u", "ferryd", "--no-pager", "-o", "cat", "-n", "20").stdout
    check(f"announce: {l.vip} withdrawn from table {ANNOUNCE_TABLE}: ferryd is stopping" in journal,
          f"the stop withdrew first:\n{journal}")
    check("ferryd: withdrew 0 route(s) of protocol ferry" in journal,
          f"ExecStopPost= found nothing left:\n{journal}")


# AF_XDP sockets of every process in the container, found by asking each socket descriptor its
# family (SO_DOMAIN through pidfd_getfd): this kernel has no XDP sock_diag, so `ss --xdp` and
# /proc/net list none.
AF_XDP_SOCKETS = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
found = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
        pidfd = os.pidfd_open(int(pid))
    except OSError:
        continue
    for fd in fds:
        try:
            if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                continue
        except OSError:
            continue
        dup = libc.syscall(438, pidfd, int(fd), 0)  # pidfd_getfd
        if dup < 0:
            raise SystemExit(f"pidfd_getfd {pid}/{fd}: {os.strerror(ctypes.get_errno())}")
        family, size = ctypes.c_int(0), ctypes.c_uint(4)
        libc.getsockopt(dup, 1, 39, ctypes.byref(family), ctypes.byref(size))  # SO_DOMAIN
        os.close(dup)
        if family.value == 44:
            found.append(f"{pid}/{fd}")
    os.close(pidfd)
print(" ".join(found))
"""

KERNEL_UDP_ECHO = r"""
import os, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2]))); s.settimeout(30)
print("ready", os.getpid(), flush=True)
while True:
    data, peer = s.recvfrom(2048)
    s.sendto(b"kernel " + data, peer)
"""


def af_xdp_sockets(c):
    return c.run("python3", "-c", AF_XDP_SOCKETS).stdout.split()


def test_stop_leaves_no_xdp_program_no_socket_and_the_veth_to_the_kernel(workdir):
    l = lab(workdir)
    c = serving(l, added_service=True)
    pid = unit(c, "MainPID")
    sockets = af_xdp_sockets(c)
    check(sockets and all(s.startswith(f"{pid}/") for s in sockets),
          f"AF_XDP sockets while ferryd runs are ferryd's ({pid}): {sockets}")
    prog = json.loads(c.run("ip", "-j", "-d", "link", "show", "host0").stdout)[0]["xdp"]["prog"]["id"]
    maps = json.loads(c.run("bpftool", "-j", "prog", "show", "id", str(prog)).stdout)["map_ids"]
    c.run("systemctl", "stop", "ferryd", timeout=60)
    props = unit(c, "ActiveState", "Result", "ExecMainStatus")
    check_eq((props["ActiveState"], props["Result"], props["ExecMainStatus"]), ("inactive", "success", "0"),
             f"after systemctl stop: {props}")
    link = json.loads(c.run("ip", "-j", "-d", "link", "show", "host0").stdout)[0]
    check("xdp" not in link, f"no XDP program on host0: {link.get('xdp')}")
    # The kernel frees a program and its maps after their last reference goes, from a work
    # queue after an RCU grace period: soon after the exit, not at it.
    def bpf_left():
        left = [f"map {m}" for m in maps
                if c.run("bpftool", "map", "show", "id", str(m), check=False).returncode == 0]
        if c.run("bpftool", "prog", "show", "id", str(prog), check=False).returncode == 0:
            left.append(f"prog {prog}")
        return left
    gone = time.monotonic()
    with contextlib.suppress(TestFailure):
        wait_until(lambda: not bpf_left(), 10, "ferry's XDP program and maps to be freed", interval=0.1)
    check_eq(bpf_left(), [], f"ferry's XDP program {prog} and maps {maps} freed after the stop")
    print(f"  XDP program {prog} and its {len(maps)} maps freed "
          f"{time.monotonic() - gone:.2f} s after the stop", flush=True)
    check(c.run("test", "-e", "/run/ferry", check=False).returncode != 0, "/run/ferry and its socket gone")
    check_eq(af_xdp_sockets(c), [], "AF_XDP sockets in the container after stop")
    r = c.run("ferryctl", "status", check=False)
    check_eq(r.returncode, 3, f"ferryctl status after stop: not running: {r.stderr}")

    # The veth is the kernel's again: a socket on the reflect service's port gets the datagrams.
    ready = []
    echo = subprocess.Popen(["nsenter", "-t", str(c.pid), "-a", "python3", "-u", "-c",
                             KERNEL_UDP_ECHO, l.vip, str(UDP_PORT)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        ready = echo.stdout.readline().split()
        check_eq(ready[:1], ["ready"], "kernel UDP echo in the container")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((l.host_addr, 0))
            s.settimeout(2)
            for i in range(5):
                s.sendto(b"after-stop %d" % i, (l.vip, UDP_PORT))
                check_eq(s.recvfrom(2048), (b"kernel after-stop %d" % i, (l.vip, UDP_PORT)),
                         "the container's kernel answers on the port ferry served")
    finally:
        if len(ready) == 2:  # nsenter forked it into the container's pid namespace: kill it there
            c.run("kill", ready[1], check=False)
        echo.kill()
        echo.wait()


# Samples ferryd.service from inside the container until the file $1 exists, as fast as systemctl
# answers: is-active's exit status and answer, MainPID, SubState.
WATCH_UNIT = r"""
while [ ! -e "$1" ]; do
    state=$(systemctl is-active ferryd.service); rc=$?
    echo "$rc $state $(systemctl show -P MainPID ferryd.service) $(systemctl show -P SubState ferryd.service)"
done
"""


class UnitWatch:
    """`with UnitWatch(c) as watch:` samples the unit while the block runs; then watch.samples is
    [(is-active's exit status, its answer, MainPID, SubState)] and watch.pids the MainPIDs in the
    order they came (each once)."""

    def __init__(self, c):
        self.c = c
        self.stop_file = f"/run/ferry-unit-watch-{os.getpid()}-{time.monotonic_ns()}"
        self.proc = None
        self.samples = []

    def __enter__(self):
        self.proc = subprocess.Popen(["nsenter", "-t", str(self.c.pid), "-a", "sh", "-c", WATCH_UNIT,
                                      "sh", self.stop_file],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.first = self.proc.stdout.readline()  # sampling has begun
        return self

    def __exit__(self, *exc):
        self.c.run("touch", self.stop_file)
        try:
            out, _ = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        self.c.run("rm", "-f", self.stop_file)
        for line in (self.first + out).splitlines():
            parts = line.split()
            self.samples.append((int(parts[0]), *parts[1:4]) if len(parts) == 4 else (None, line, "", ""))

    @property
    def pids(self):
        seen = []
        for s in self.samples:
            if not seen or seen[-1] != s[2]:
                seen.append(s[2])
        return seen

    def check_active_throughout(self, pids, what):
        bad = [s for s in self.samples if s[:2] != (0, "active") or s[3] != "running"]
        check(not bad, f"{what}: systemctl is-active and SubState in {len(self.samples)} samples: "
              f"{bad[:10]}")
        check_eq(self.pids, list(pids), f"{what}: MainPID over {len(self.samples)} samples")


class UdpDuring:
    """Round trips to the reflect service, one at a time from a thread, while the block runs;
    then .res is udp_round_trips' count over all of them."""

    def __init__(self, l):
        self.l = l
        self.res = {"ok": 0, "lost": 0, "retries": 0}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.is_set():
            for k, v in udp_round_trips(self.l, UDP_PORT, count=10, tag="during").items():
                self.res[k] += v

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=30)


def journal_cursor(c):
    out = c.run("journalctl", "-n", "1", "--show-cursor", "--no-pager", "-o", "cat").stdout
    m = re.search(r"^-- cursor: (\S+)", out, re.M)
    check(m, f"journalctl --show-cursor: {out}")
    return m.group(1)


def journal_after(c, cursor):
    """ferryd.service's journal (ferryd's lines and systemd's about the unit) after `cursor`."""
    return c.run("journalctl", "-u", "ferryd", f"--after-cursor={cursor}", "--no-pager",
                 "-o", "cat").stdout


def echo_on(conn, payload):
    conn.sendall(payload)
    got = b""
    while len(got) < len(payload):
        chunk = conn.recv(4096)
        if not chunk:
            break
        got += chunk
    return got


def watchdog_sec():
    return int(re.fullmatch(r"(\d+)s", unit_settings()["WatchdogSec"][0]).group(1))


UPGRADE_STATUS = status_text(4, 2)  # the upgrade tests' config: two UDP services, echo and proxy
UPGRADE_PORTS = (UDP_PORT, UDP_PORT_ADDED)


# The proxy's backend, a unit of its own in the container: a proxied connection a handover leaves
# with the old ferryd must have its other end outside ferryd (which closes its echo connections at
# once when it stops).
PROXY_BACKEND_SERVER = r"""
import socket, sys, threading
listener = socket.create_server((sys.argv[1], int(sys.argv[2])))
def echo(conn):
    with conn:
        while data := conn.recv(65536):
            conn.sendall(data)
while True:
    threading.Thread(target=echo, args=(listener.accept()[0],), daemon=True).start()
"""


def upgrade_lab(l):
    """ferryd serving the upgrade tests' config, with the proxy's backend running."""
    c = l.container
    if c.run("systemctl", "is-active", "--quiet", "ferry-proxy-backend", check=False).returncode != 0:
        c.run("systemd-run", "--unit=ferry-proxy-backend", "python3", "-c", PROXY_BACKEND_SERVER,
              *map(str, PROXY_BACKEND))
        wait_until(lambda: c.run("python3", "-c", "import socket, sys; socket.create_connection("
                                 "(sys.argv[1], int(sys.argv[2])), timeout=1)",
                                 *map(str, PROXY_BACKEND), check=False).returncode == 0,
                   10, "the proxy's backend to listen")
    return serving(l, added_service=True, proxy=True)


def check_upgrade_lab_serves(l, what):
    check_serves(l, what, ports=UPGRADE_PORTS)
    check_tcp_echo(l, f"{what}, through the proxy", port=PROXY_PORT)


def check_handed_over(l, old, new, restarts, cursor, what, binary="/usr/sbin/ferryd"):
    """After a handover from pid `old` to `new` under systemd: the unit follows the new process
    (MainPID, active/running, no restart counted, its STATUS= line), the old one exits, and the
    journal tells the handover and nothing of a stop or start. Returns the journal."""
    c = l.container
    wait_until(lambda: c.run("test", "-e", f"/proc/{old}", check=False).returncode != 0, 20,
               f"{what}: the old ferryd (pid {old}) to exit", interval=0.1)
    props = unit(c, "MainPID", "ActiveState", "SubState", "NRestarts", "Result")
    check_eq((props["MainPID"], props["ActiveState"], props["SubState"], props["NRestarts"],
              props["Result"]), (new, "active", "running", str(restarts), "success"),
             f"{what}: the unit after the handover {props}")
    # Only a READY=1 of the new process (the main one now, for NotifyAccess=main) sets this: the
    # old one's last word was "handed over to pid N; draining".
    wait_until(lambda: unit(c, "StatusText") == UPGRADE_STATUS, 10,
               f"{what}: STATUS= from the new ferryd")
    status = ctl(c, "status")
    check_eq((status["pid"], (status.get("handover") or {}).get("from_pid")), (int(new), int(old)),
             f"{what}: ferryctl status answered by the new ferryd")
    check_eq(c.run("readlink", f"/proc/{new}/exe").stdout.strip(), binary,
             f"{what}: the new process runs the binary on disk")

    def journal_done():
        text = journal_after(c, cursor)
        return text if "ferryd stopped after handing over" in text else None
    journal = wait_until(journal_done, 10, f"{what}: the old ferryd's last line in the journal")
    for line in (f"upgrade: handed over to ferryd pid {new}", f"takeover: serving in place of pid {old}",
                 "ferryd stopped after handing over"):
        check(line in journal, f"{what}: '{line}' in the journal:\n{journal}")
    # Nothing of a stop or a start, no notification refused, no main process lost.
    for line in ("Stopping ferry", "Stopped ferry", "Starting ferry", "Watchdog timeout",
                 "reception only permitted for main PID", "Main process exited"):
        check(line not in journal, f"{what}: no '{line}' in the journal:\n{journal}")
    return journal


def test_ferryctl_upgrade_hands_over_and_the_unit_follows_the_new_process(workdir):
    l = lab(workdir)
    c = upgrade_lab(l)
    props = unit(c, "MainPID", "NRestarts")
    old, restarts = props["MainPID"], int(props["NRestarts"])
    cursor = journal_cursor(c)
    held = socket.create_connection((l.vip, PROXY_PORT), timeout=10, source_address=(l.host_addr, 0))
    with held:
        check_eq(echo_on(held, b"before the upgrade"), b"before the upgrade",
                 "a TCP connection through the proxy, held open")
        with UnitWatch(c) as watch, UdpDuring(l) as udp:
            r = c.run("ferryctl", "upgrade", check=False, timeout=90)
            time.sleep(0.5)  # samples after it too, of the unit as it stays
        check_eq(r.returncode, 0, f"ferryctl upgrade: {r.stdout} {r.stderr}")
        m = re.fullmatch(rf"upgrade: ferryd {old} handed over to (\d+) in ([\d.]+) ms "
                         rf"\(fast path paused (\d+) us\)\n", r.stdout)
        check(m, f"ferryctl upgrade's line: {r.stdout!r}")
        new = m.group(1)
        print(f"  ferryctl upgrade: pid {old} -> {new} in {m.group(2)} ms, fast path paused "
              f"{m.group(3)} us; {len(watch.samples)} samples of the unit, UDP during it: {udp.res}",
              flush=True)
        watch.check_active_throughout([old, new], "during ferryctl upgrade")
        check_eq(udp.res["lost"], 0, f"UDP round trips during the upgrade: {udp.res}")
        # The connection stays with the old process, which drains it (a second process in the
        # unit's cgroup, no longer its main one); closing it lets the old one exit.
        check(c.run("test", "-e", f"/proc/{old}", check=False).returncode == 0,
              f"the old ferryd (pid {old}) drains the held connection")
        check_eq(echo_on(held, b"after the upgrade"), b"after the upgrade",
                 "the held TCP connection, served by the draining ferryd")
    check_handed_over(l, old, new, restarts, cursor, "ferryctl upgrade")
    check_upgrade_lab_serves(l, "after ferryctl upgrade")

    # The watchdog: systemd takes WATCHDOG=1 from the new process (WatchdogTimestamp moves) and,
    # past WatchdogSec=, has not killed it.
    handed = int(unit(c, "WatchdogTimestampMonotonic"))
    deadline = time.monotonic() + watchdog_sec() + 3
    while time.monotonic() < deadline:
        props = unit(c, "MainPID", "NRestarts", "ActiveState")
        check_eq((props["MainPID"], props["NRestarts"], props["ActiveState"]),
                 (new, str(restarts), "active"), "the new ferryd under the watchdog")
        time.sleep(0.5)
    fed = int(unit(c, "WatchdogTimestampMonotonic"))
    check(fed > handed, f"WATCHDOG=1 from the new ferryd accepted ({handed} -> {fed})")
    print(f"  {watchdog_sec() + 3} s later: pid {new} still the unit's, watchdog pings accepted "
          f"({(fed - handed) / 1e6:.1f} s of them since the handover)", flush=True)

    # A second handover, from the process that took over, and a third by SIGUSR2 through systemd.
    old, cursor = new, journal_cursor(c)
    with UnitWatch(c) as watch, UdpDuring(l) as udp:
        answer = json.loads(c.run("ferryctl", "upgrade", "--json", timeout=90).stdout)
        time.sleep(0.5)
    check_eq(answer["old_pid"], int(old), f"ferryctl upgrade --json: {answer}")
    new = str(answer["new_pid"])
    print(f"  second upgrade: pid {old} -> {new} in {answer['took_ms']:.1f} ms, paused "
          f"{answer['pause_us']:.0f} us; UDP during it: {udp.res}", flush=True)
    watch.check_active_throughout([old, new], "during the second ferryctl upgrade")
    check_eq(udp.res["lost"], 0, f"UDP round trips during the second upgrade: {udp.res}")
    check_handed_over(l, old, new, restarts, cursor, "the second ferryctl upgrade")
    check_upgrade_lab_serves(l, "after the second ferryctl upgrade")

    old, cursor = new, journal_cursor(c)
    with UnitWatch(c) as watch:
        c.run("systemctl", "kill", "--kill-who=main", "--signal=SIGUSR2", "ferryd")

        def took_over():
            pid = unit(c, "MainPID")
            return pid if pid not in (old, "0") else None
        new = wait_until(took_over, 60, "systemd to follow the SIGUSR2 handover", interval=0.1)
        time.sleep(0.5)
    watch.check_active_throughout([old, new], "during the SIGUSR2 handover")
    journal = check_handed_over(l, old, new, restarts, cursor, "SIGUSR2")
    check("upgrade (SIGUSR2): started /usr/sbin/ferryd" in journal, f"SIGUSR2 in the journal:\n{journal}")
    check_upgrade_lab_serves(l, "after three handovers")

    # systemd says it is "Supervising process N which is not our child" (the old ferryd started
    # it); with the old one gone it is PID 1's child, and its death is seen: a SIGKILL restarts it.
    c.run("kill", "-KILL", new)

    def restarted():
        p = unit(c, "MainPID", "NRestarts", "ActiveState")
        return p if (int(p["NRestarts"]) == restarts + 1 and p["MainPID"] not in ("0", new)
                     and p["ActiveState"] == "active") else None
    props = wait_until(restarted, 30, "systemd to restart the killed successor", interval=0.3)
    print(f"  SIGKILL of pid {new} (started by a handover): restarted as {props['MainPID']}",
          flush=True)
    check_upgrade_lab_serves(l, "after the SIGKILL restart")


# Builds of the test's package that refuse what the old ferryd asks of them: /usr/sbin/ferryd is
# one of these scripts (the real binary beside it, /usr/sbin/ferryd.real).
FERRYD_REFUSING_TAKEOVER = """#!/bin/sh
case " $* " in *" --takeover "*) echo "ferryd (test build): no takeover" >&2; exit 70 ;; esac
exec /usr/sbin/ferryd.real "$@"
"""
FERRYD_REJECTING_CONFIG = """#!/bin/sh
echo "/etc/ferry/ferryd.json:1:1: (test build) this ferryd rejects every config" >&2
exit 78
"""


def repacked(l, w, version, ferryd_script=None):
    """The installed package as version `version`: to dpkg, a newer build (every file is unpacked
    again, /usr/sbin/ferryd becomes a new inode while the old ferryd runs the deleted one, and
    the maintainer scripts are this tree's), without the minutes a second dpkg-buildpackage
    takes. With ferryd_script, /usr/sbin/ferryd is that script and the binary
    /usr/sbin/ferryd.real. Returns its path in the container."""
    tree = os.path.join(w.path, f"deb-{version}")
    subprocess.run(["dpkg-deb", "-R", l.deb, tree], check=True)
    control = os.path.join(tree, "DEBIAN", "control")
    with open(control) as f:
        text = f.read()
    with open(control, "w") as f:
        f.write(re.sub(r"^Version: .*$", f"Version: {version}", text, flags=re.M))
    if ferryd_script:
        sbin = os.path.join(tree, "usr", "sbin")
        os.rename(os.path.join(sbin, "ferryd"), os.path.join(sbin, "ferryd.real"))
        with open(os.path.join(sbin, "ferryd"), "w") as f:
            f.write(ferryd_script)
        os.chmod(os.path.join(sbin, "ferryd"), 0o755)
        sums = subprocess.run(["find", "usr", "-type", "f", "-exec", "md5sum", "{}", "+"], cwd=tree,
                              capture_output=True, text=True, check=True).stdout
        with open(os.path.join(tree, "DEBIAN", "md5sums"), "w") as f:
            f.write("".join(sorted(sums.splitlines(keepends=True), key=lambda s: s.split()[1])))
    out = os.path.join(w.path, f"ferry_{version}_amd64.deb")
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", tree, out], check=True,
                   capture_output=True)
    inside = f"/root/{os.path.basename(out)}"
    l.container.copy_in(out, inside)
    return inside


def apt_upgrade(c, inside):
    r = c.run("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q", inside,
              timeout=300, check=False)
    check_eq(r.returncode, 0, f"apt-get install {inside}: {r.stdout[-3000:]} {r.stderr[-3000:]}")
    return r.stdout + r.stderr


def installed_version(c):
    return c.run("dpkg-query", "-W", "-f=${Version}", "ferry").stdout


def next_version(c):
    """A version above the installed one: its upstream part, +upgradeN."""
    m = re.fullmatch(r"(.*?)(?:\+upgrade(\d+))?", installed_version(c))
    return f"{m.group(1)}+upgrade{int(m.group(2) or 0) + 1}"


def postinst_lines(out):
    return [line for line in out.splitlines() if line.startswith(("ferry:", "ferryctl:"))]


def prepared_package_upgrade(l, w, ferryd=None):
    """A newer build of the installed package (its ferryd replaced by `ferryd` when given) and
    the unit's state before it goes in: (version, deb, old MainPID, NRestarts, journal cursor)."""
    c = l.container
    version = next_version(c)
    deb = repacked(l, w, version, ferryd)
    props = unit(c, "MainPID", "NRestarts")
    return version, deb, props["MainPID"], int(props["NRestarts"]), journal_cursor(c)


def package_upgrade_hands_over(l, w, what):
    """Installs a newer build of the package with ferryd running; checks the postinst handed
    over (apt's output, the unit, the journal) with the fast path answering throughout."""
    c = l.container
    version, deb, old, restarts, cursor = prepared_package_upgrade(l, w)
    with UnitWatch(c) as watch, UdpDuring(l) as udp:
        started = time.monotonic()
        out = apt_upgrade(c, deb)
        seconds = time.monotonic() - started
    check_eq(installed_version(c), version, f"{what}: dpkg status after the upgrade")
    m = re.search(rf"^ferry: upgrade: ferryd {old} handed over to (\d+) in ([\d.]+) ms "
                  rf"\(fast path paused (\d+) us\)$", out, re.M)
    check(m, f"{what}: the postinst handed over (ferryctl upgrade's line in apt's output):\n{out}")
    new = m.group(1)
    print(f"  {what}: apt-get install {os.path.basename(deb)} {seconds:.1f} s; postinst: pid {old} "
          f"-> {new} in {m.group(2)} ms, paused {m.group(3)} us; {len(watch.samples)} samples of "
          f"the unit, UDP during it {udp.res}", flush=True)
    watch.check_active_throughout([old, new], f"{what}: during apt-get install")
    check_eq(udp.res["lost"], 0, f"{what}: UDP round trips during the package upgrade: {udp.res}")
    check("restarting ferryd.service" not in out, f"{what}: no restart:\n{out}")
    check_handed_over(l, old, new, restarts, cursor, what)
    check_upgrade_lab_serves(l, f"after {what}")


def test_a_package_upgrade_hands_over_to_the_new_binary(workdir):
    l = lab(workdir)
    upgrade_lab(l)
    package_upgrade_hands_over(l, workdir, "the package upgrade")


def test_a_package_upgrade_whose_new_binary_rejects_the_config_leaves_the_old_serving(workdir):
    l = lab(workdir)
    c = upgrade_lab(l)
    version, deb, old, restarts, cursor = prepared_package_upgrade(l, workdir, FERRYD_REJECTING_CONFIG)
    try:
        with UnitWatch(c) as watch:
            out = apt_upgrade(c, deb)
        check_eq(installed_version(c), version, "dpkg status after the upgrade")
        print(f"  postinst: {postinst_lines(out)}", flush=True)
        for line in ("ferryctl: upgrade failed: the new ferryd", "it exited with status 78",
                     "ferry: the running ferryd did not hand over to the new version",
                     "this ferryd rejects every config", "ferry: not restarting ferryd.service"):
            check(line in out, f"'{line}' in apt's output:\n{out}")
        watch.check_active_throughout([old], "the refused upgrade")
        props = unit(c, "MainPID", "ActiveState", "NRestarts")
        check_eq((props["MainPID"], props["ActiveState"], props["NRestarts"]),
                 (old, "active", str(restarts)), f"the unit after the refused upgrade: {props}")
        upgrade = ctl(c, "status")["upgrade"]
        check_eq(upgrade["state"], "failed", f"status.upgrade of the old ferryd: {upgrade}")
        journal = journal_after(c, cursor)
        check("this ferryd serves on" in journal, f"the old ferryd's journal:\n{journal}")
        check("Stopping ferry" not in journal, f"not stopped:\n{journal}")
        check_upgrade_lab_serves(l, "with the refused upgrade")
    finally:
        # A fixed build next: the ferryd that served on hands over to it.
        package_upgrade_hands_over(l, workdir, "the fixed package")


def test_a_package_upgrade_whose_handover_fails_restarts_ferryd(workdir):
    l = lab(workdir)
    c = upgrade_lab(l)
    version, deb, old, restarts, cursor = prepared_package_upgrade(l, workdir, FERRYD_REFUSING_TAKEOVER)
    out = apt_upgrade(c, deb)
    check_eq(installed_version(c), version, "dpkg status after the upgrade")
    print(f"  postinst: {postinst_lines(out)}", flush=True)
    for line in ("ferryctl: upgrade failed: the new ferryd", "it exited with status 70",
                 "ferry: the running ferryd did not hand over to the new version",
                 "ferry: restarting ferryd.service instead"):
        check(line in out, f"'{line}' in apt's output:\n{out}")
    props = unit(c, "MainPID", "ActiveState", "SubState", "NRestarts")
    check(props["MainPID"] not in ("0", old), f"restarted: a new main process {props}")
    # systemctl restart, not a crash: systemd counts no automatic restart and, for a restart
    # asked for, starts the count again.
    check_eq((props["ActiveState"], props["SubState"], props["NRestarts"]),
             ("active", "running", "0"), f"the unit after the restart (NRestarts {restarts} before): {props}")
    check(c.run("test", "-e", f"/proc/{old}", check=False).returncode != 0, f"pid {old} is gone")
    check_eq(c.run("readlink", f"/proc/{props['MainPID']}/exe").stdout.strip(), "/usr/sbin/ferryd.real",
             "the restarted ferryd is the new package's")
    journal = journal_after(c, cursor)
    for line in ("this ferryd serves on", "Stopping ferry", "Started ferry"):
        check(line in journal, f"'{line}' in the journal:\n{journal}")
    check(journal.find("this ferryd serves on") < journal.find("Stopping ferry"),
          f"the restart came after the failed handover:\n{journal}")
    print(f"  pid {old} -> {props['MainPID']} by the restart", flush=True)
    check_upgrade_lab_serves(l, "after the fallback restart")


def test_powering_off_leaves_nothing_on_the_host(workdir):
    check(LAB is not None, "no container was started")
    LAB.container.close()
    check_eq(LAB.container.leftovers(), [], "left on the host after the container powered off")


def _terminated(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")  # unwinds through every finally: the container goes


@pytest.fixture(scope="module", autouse=True)
def container_powered_off_at_the_end():
    """The booted container (LAB, which the tests share in order: installed, started, reloaded,
    upgraded, powered off) goes when the file ends, also when meson's timeout SIGTERMs it."""
    before = signal.signal(signal.SIGTERM, _terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
        if LAB is not None:
            LAB.container.close()
