"""Faults with the real daemon serving UDP (the fast-path lab, XDP + AF_XDP) and TCP (a proxy
service on the gateway namespace's loopback) at once: SIGKILL under load and a restart, a lab
interface deleted and re-created (served again without a reload, and with one), a reload every
100 ms under load, and every UDP backend down. After each: no XDP program left behind or frames
conserved, fds and connections accounted for."""
import contextlib
import json
import os
import signal
import sys
import threading
import time

from fastpath_lab import (BACKENDS, CLIENT, GATEWAY_BACKEND_SIDE, PORT, SINK, VIP, Lab,
                          fastpath_config, frames_by_queue, inside, quiescent, samples, total)
from harness import Daemon, check, check_eq, ok, running, wait_until
from netns import veth, xdp_attached
from proxy_peers import Backend, BlockingClient, proxy_service

TCP_PORT = 7400
OTHER_TCP_PORT = 7401

# Datagrams the echo servers only count ("blast" prefix), at a fixed rate, until killed.
UDP_LOAD = r"""
import socket, sys, time
vip, port, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sent, start = 0, time.monotonic()
while True:
    for _ in range(50):
        s.sendto(b"blast" + bytes(60), (vip, port)); sent += 1
    ahead = sent / rate - (time.monotonic() - start)
    if ahead > 0: time.sleep(ahead)
"""

# Short TCP connections through the proxy (hello, echo op, close) until SIGTERM; prints counts.
TCP_LOAD = r"""
import json, os, signal, socket, struct, sys
port, stop = int(sys.argv[1]), []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
res = {"ok": 0, "failed": 0}
payload = bytes(range(256)) * 8
while not stop:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"H" + os.urandom(8).hex().encode() + struct.pack("!cQ", b"E", len(payload)) + payload)
            got = b""
            while len(got) < len(payload):
                chunk = s.recv(65536)
                if not chunk: raise ConnectionError("eof")
                got += chunk
            res["ok" if got == payload else "failed"] += 1
    except OSError:
        res["failed"] += 1
print(json.dumps(res), flush=True)
"""

# Until a reply arrives: one datagram every 20 ms; prints the wall time of the first reply.
UDP_PROBE = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[3], 0)); s.settimeout(0.02)
deadline = time.time() + float(sys.argv[4])
while time.time() < deadline:
    s.sendto(b"probe-0-0 hello", (sys.argv[1], int(sys.argv[2])))
    try:
        if s.recv(2048).startswith(b"probe"):
            print(time.time()); break
    except socket.timeout:
        pass
"""


class Rig:
    """The lab, its UDP echo backends, and TCP backend processes inside the gateway namespace."""

    def __init__(self, w, tcp_backends=1):
        self.w = w
        self.lab = Lab()
        self.loads = []
        self.tcp = []
        try:
            self.lab.start_echo(w)
            with inside(self.lab.gw):
                for _ in range(tcp_backends):
                    self.tcp.append(Backend())
        except Exception:
            self.close()
            raise

    def config(self, health=None, other_backends=None):
        cfg = fastpath_config(self.w)
        if health:
            cfg["services"][0]["health"] = health
        cfg["services"].append(proxy_service(TCP_PORT, [self.tcp[0].endpoint()]))
        if other_backends is not None:
            cfg["services"].append(proxy_service(OTHER_TCP_PORT, other_backends, name="other"))
        return cfg

    def client(self, port=TCP_PORT):
        with inside(self.lab.gw):
            return BlockingClient("127.0.0.1", port)

    def start_loads(self, udp_pps=2000):
        self.loads.append(self.lab.spawn(self.lab.client, UDP_LOAD, VIP, str(PORT), str(udp_pps)))
        self.loads.append(self.lab.spawn(self.lab.gw, TCP_LOAD, str(TCP_PORT)))

    def stop_loads(self):
        """Stops the generators; returns the TCP generator's {"ok", "failed"}."""
        udp, tcp = self.loads[-2:]
        udp.kill()
        udp.wait()
        tcp.send_signal(signal.SIGTERM)  # ip netns exec passes it on to python
        out, _ = tcp.communicate(timeout=10)
        self.loads = self.loads[:-2]
        return json.loads(out.strip().splitlines()[-1])

    def close(self):
        for p in self.loads:
            with contextlib.suppress(Exception):
                p.kill()
        for b in self.tcp:
            with contextlib.suppress(Exception):
                b.stop()
        self.lab.close()


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def check_frames_conserved(d):
    quiescent(d)
    frames, slabs = frames_by_queue(d)
    check(frames, "frame gauges exported")
    for q, terms in frames.items():
        check_eq(sum(terms.values()), slabs[q], f"queue {q} conservation {terms}")
        check_eq((terms["rx"], terms["tx"], terms["hands"]), (0, 0, 0),
                 f"queue {q}: nothing in the worker's hands once quiet {terms}")
    check_eq(total(d, "ferry_xsk_rejected_frames_total"), 0, "no frame freed twice or foreign")


def check_serving(rig, tag):
    res = rig.lab.converse(tag, flows=6, rounds=1, base=21000)
    check_eq((res["ok"], res["bad"], res["lost"]), (6, 0, 0), f"UDP {tag}: {res}")
    # Every datagram forwarded so far, the loads' included, had a checksum its receiver accepted.
    check_eq(rig.lab.udp_csum_errors(), {"client": 0, "backends": 0}, f"UDP InCsumErrors {tag}")
    c = rig.client()
    c.echo(b"tcp " + tag.encode())
    c.finish()


def test_sigkill_under_load_then_restart_serves_within_2s(workdir):
    rig = Rig(workdir)
    try:
        cfg_path = workdir.write_config(rig.config())
        first = Daemon(workdir, cfg_path, netns=rig.lab.gw.name, name="first")
        try:
            first.wait_ready()
            check_serving(rig, "warm")
            rig.start_loads()
            time.sleep(1.5)
            held = rig.client()
            held.echo(b"open when the daemon dies")
            first.kill()
            check_eq(first.returncode, -signal.SIGKILL, "killed")
            load = rig.stop_loads()
            check(load["ok"] > 0, f"TCP load was served before the kill {load}")
            held.close()
        finally:
            first.cleanup()
        check(os.path.exists(first.socket_path), "the killed daemon left its socket file")
        for ifname in ("g0", "g1"):
            wait_until(lambda: not xdp_attached(rig.lab.gw, ifname), 2, f"no XDP program on {ifname}")

        udp_probe = rig.lab.spawn(rig.lab.client, UDP_PROBE, VIP, str(PORT), CLIENT, "10")
        tcp_served = {}

        def tcp_probe():
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "at" not in tcp_served:
                try:
                    c = rig.client()
                    c.echo(b"after restart")
                    c.finish()
                    tcp_served["at"] = time.time()
                except (OSError, AssertionError):
                    time.sleep(0.02)
        started = time.time()
        second = Daemon(workdir, cfg_path, netns=rig.lab.gw.name, name="second")
        try:
            prober = threading.Thread(target=tcp_probe)
            prober.start()
            second.wait_ready()
            prober.join()
            udp_out, _ = udp_probe.communicate(timeout=15)
            check(udp_out.strip(), "UDP served after the restart")
            udp_s, tcp_s = float(udp_out.strip()) - started, tcp_served.get("at", 1e18) - started
            print(f"  restart: UDP served after {udp_s:.2f}s, TCP after {tcp_s:.2f}s", flush=True)
            check(udp_s < 2.0, f"UDP within 2 s of start ({udp_s:.2f}s)")
            check(tcp_s < 2.0, f"TCP within 2 s of start ({tcp_s:.2f}s)")
            check_eq(ok(second.request("status"))["pid"], second.proc.pid,
                     "the control socket is the new daemon's")
            check("replaced a stale socket file" in second.log(), "the stale socket replaced")
            for ifname in ("g0", "g1"):
                check(xdp_attached(rig.lab.gw, ifname), f"new program on {ifname}")
        finally:
            second.cleanup()
    finally:
        rig.close()


def recreate_g1(lab):
    veth(lab.gw, "g1", lab.back, "b0", queues=2)
    lab.gw.ip("addr", "add", f"{GATEWAY_BACKEND_SIDE}/24", "dev", "g1")
    for a in BACKENDS:
        lab.back.ip("addr", "add", f"{a}/24", "dev", "b0")
    lab.back.ip("addr", "add", f"{SINK}/32", "dev", "b0")
    lab.back.ip("route", "add", "default", "via", GATEWAY_BACKEND_SIDE, "src", BACKENDS[0])
    lab.set_sender_offload(lab.back, "b0")  # as the lab set up the first b0 (veth's offloads)


DELETED_LINE = "g1: interface deleted (ifindex"
BACK_LINE = "g1: interface is back (ifindex"


def log_lines(d, text):
    return sum(text in line for line in d.log().splitlines())


def interface_report(d):
    status = ok(d.request("status"))["xdp"]["interfaces"]
    gauge = {l["iface"]: v for l, v in samples(d, "ferry_xdp_attached")}
    return {i["name"]: i["attached"] for i in status}, gauge


def delete_g1_and_check_reported(rig, d):
    """Deletes g1 (its peer b0 goes with it): the daemon stays up, logs the deletion once however
    often it is asked, and status and metrics show g1 down."""
    rig.lab.gw.ip("link", "del", "g1")
    wait_until(lambda: log_lines(d, DELETED_LINE) >= 1, 5, "the deletion logged")
    check(d.proc.poll() is None, f"ferryd still running:\n{d.log()}")
    for _ in range(10):  # scrapes and status calls under load do not log it again
        check_eq(interface_report(d), ({"g0": True, "g1": False}, {"g0": 1, "g1": 0}),
                 "status and ferry_xdp_attached show g1 gone")
        time.sleep(0.1)
    check_eq(total(d, "ferry_xdp_link_losses_total", iface="g1"), 1, "one loss of g1 counted")
    check_eq(total(d, "ferry_xdp_link_losses_total", iface="g0"), 0, "g0 not lost")
    check_eq(log_lines(d, DELETED_LINE), 1, "exactly one deletion line")
    c = rig.client()
    c.echo(b"tcp while g1 is gone")
    c.finish()


def recreate_g1_and_restart_echo(rig, w, echo_procs):
    recreate_g1(rig.lab)
    for p in echo_procs:  # the echo servers' sockets are bound to vanished addresses
        p.kill()
        p.wait()
    rig.lab.start_echo(w)


def test_interface_deleted_under_load_is_served_again_when_it_returns(workdir):
    """No reload: the link watch logs the deletion once, and re-attaches XDP and re-binds the
    AF_XDP sockets by itself when an interface named g1 is up again."""
    rig = Rig(workdir)
    try:
        with running(workdir, rig.config(), netns=rig.lab.gw.name) as d:
            check_serving(rig, "before")
            echo_procs = list(rig.lab.procs)
            rig.start_loads()
            time.sleep(0.5)
            delete_g1_and_check_reported(rig, d)
            check_eq(log_lines(d, BACK_LINE), 0, "not back yet")
            frames, slabs = frames_by_queue(d)  # the dead port's frames stay in its rings
            for q, terms in frames.items():
                check_eq(sum(terms.values()), slabs[q], f"queue {q} conserved while g1 is gone")
            started = time.monotonic()
            recreate_g1_and_restart_echo(rig, workdir, echo_procs)
            restored = time.monotonic()
            r = rig.lab.client.run(sys.executable, "-c", UDP_PROBE, VIP, str(PORT), CLIENT, "5")
            check(r.stdout.strip(), f"UDP answered within 5 s of g1's return:\n{d.log()}")
            answered = time.monotonic()
            print(f"  g1, its addresses and the echo servers back in {restored - started:.2f} s; "
                  f"UDP answered {answered - restored:.2f} s later", flush=True)
            wait_until(lambda: xdp_attached(rig.lab.gw, "g1"), 5, "program back on g1")
            check_eq(interface_report(d), ({"g0": True, "g1": True}, {"g0": 1, "g1": 1}),
                     "status and ferry_xdp_attached after g1 returned")
            check_eq(log_lines(d, BACK_LINE), 1, "exactly one line saying g1 is back")
            check_eq(log_lines(d, DELETED_LINE), 1, "still one deletion line")
            check("fast path: serving again after an interface returned" in d.log(),
                  "the re-bind logged")
            load = rig.stop_loads()
            check_eq(load["failed"], 0, f"no TCP connection failed {load}")
            check_serving(rig, "after")
            check_frames_conserved(d)
            status = ok(d.request("status"))
            check_eq((status["reloads"], status["reload_failures"]), (0, 0), "no reload involved")
            check_eq(total(d, "ferry_xdp_link_losses_total", iface="g1"), 1, "still one loss")
            check(d.proc.poll() is None, "still running")
    finally:
        rig.close()


def test_interface_deleted_keeps_daemon_up_and_reload_serves_again(workdir):
    """The reload route: a reload while g1 is gone is rejected before it touches the running fast
    path; one right after g1 is re-created serves again (whether it or the link watch re-binds
    first, the other finds the sockets bound and keeps them)."""
    rig = Rig(workdir)
    try:
        with running(workdir, rig.config(), netns=rig.lab.gw.name) as d:
            check_serving(rig, "before")
            delete_g1_and_check_reported(rig, d)
            r = d.request("reload")
            check(not r.get("ok") and "g1: no such interface" in r["error"]["message"],
                  f"a reload while g1 is gone is rejected: {r}")
            check("fastpath" in ok(d.request("status"))["xdp"], "the running fast path kept")
            check_eq(interface_report(d), ({"g0": True, "g1": False}, {"g0": 1, "g1": 0}),
                     "g0 still attached after the rejected reload")
            recreate_g1_and_restart_echo(rig, workdir, list(rig.lab.procs))
            ok(d.request("reload"), "reload after re-creating g1")
            wait_until(lambda: xdp_attached(rig.lab.gw, "g1"), 5, "program back on g1")
            check_eq(interface_report(d), ({"g0": True, "g1": True}, {"g0": 1, "g1": 1}),
                     "status and ferry_xdp_attached after the reload")
            check("g1: interface ifindex" in d.log(), "the re-attach logged")
            check_serving(rig, "after")
            ok(d.request("reload"), "a further reload keeps the sockets")
            check_serving(rig, "after a second reload")
            check_frames_conserved(d)
            check_eq(log_lines(d, DELETED_LINE), 1, "one deletion line")
            check(log_lines(d, BACK_LINE) <= 1, "at most one line saying g1 is back")
            check(d.proc.poll() is None, "still running")
    finally:
        rig.close()


def test_reload_every_100ms_under_load_drops_nothing_and_leaks_nothing(workdir, seconds=12.0):
    rig = Rig(workdir, tcp_backends=2)
    try:
        other = [rig.tcp[1].endpoint()]
        both = other + [rig.tcp[0].endpoint()]
        cfg = rig.config(other_backends=other)
        with running(workdir, cfg, netns=rig.lab.gw.name) as d:
            check_serving(rig, "warm")
            time.sleep(0.3)
            fds_before = fd_count(d.proc.pid)
            held = [rig.client() for _ in range(4)]
            for c in held:
                c.echo(b"held across the reloads")
            rig.start_loads()
            reloads = 0
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                # Only service "other" changes: "web" and "echo" must not notice.
                other_cfg = rig.config(other_backends=other if reloads % 2 else both)
                workdir.write_config(other_cfg)
                r = d.request("reload")
                check(r.get("ok"), f"reload {reloads}: {r}")
                reloads += 1
                if reloads % 10 == 0:
                    held[reloads // 10 % len(held)].echo(b"x" * 3000)
                time.sleep(0.1)
            load = rig.stop_loads()
            print(f"  {reloads} reloads in {seconds:.0f}s; TCP load {load}", flush=True)
            check(d.proc.poll() is None, "no crash")
            check_eq(load["failed"], 0, f"no short TCP connection failed {load}")
            check(load["ok"] > 50, f"TCP load ran {load}")
            for c in held:
                c.echo(b"still here after the reloads")
                c.finish()
                c.tally.check_against(rig.tcp[0].wait_closed(c.id))
            check_serving(rig, "after")
            check_eq(ok(d.request("status"))["reloads"], reloads, "every reload applied")
            check_frames_conserved(d)
            wait_until(lambda: fd_count(d.proc.pid) == fds_before, 10,
                       f"fd count back to {fds_before} (now {fd_count(d.proc.pid)})", interval=0.2)
    finally:
        rig.close()


def test_all_udp_backends_down_drops_counted_as_no_backend(workdir):
    """No TCP listener on any backend: the health checks mark all three down, and every datagram
    to the service is dropped and counted as no_backend (the TCP side of "all backends down" is
    test_proxy_faults.py's all_backends_down_resets_client_and_counts_failed)."""
    rig = Rig(workdir)
    try:
        health = {"interval_ms": 200, "timeout_ms": 150, "rise": 2, "fall": 2}
        with running(workdir, rig.config(health=health), netns=rig.lab.gw.name) as d:
            def all_down():
                up = ok(d.request("stats", {"prefix": "ferry_backend_up"}))["metrics"][0]["samples"]
                echo = [s["value"] for s in up if s["labels"]["service"] == "echo"]
                return len(echo) == 3 and not any(echo)
            wait_until(all_down, 5, "every UDP backend marked down")
            before = total(d, "ferry_xsk_drops_total", reason="no_backend")
            count = 300
            rig.lab.client.run(sys.executable, "-c",
                               "import socket,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                               f"for i in range({count}):\n s.sendto(b'blast'+bytes(40),('{VIP}',{PORT}))\n"
                               " time.sleep(0.001)\n")
            quiescent(d, timeout=10)
            dropped = total(d, "ferry_xsk_drops_total", reason="no_backend") - before
            check_eq(dropped, count, "every datagram dropped as no_backend")
            check_frames_conserved(d)
            c = rig.client()
            c.echo(b"the TCP service is unaffected")
            c.finish()
    finally:
        rig.close()
