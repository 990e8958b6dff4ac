"""Steering backends (issue 13) on the real daemon. The fast-path lab (default veth offloads):
200 long-lived UDP flows, each a socket sending every 20 ms, every reply tagged by the backend
that answered (judged in request order), while a fourth backend is added by reload (no
established flow moves, new flows reach it), one is drained with ferryctl (its flows stay, no new
flow lands on it), then disabled (exactly its flows move), a weight changes (nothing moves), one
goes down by health (exactly its flows move), the disabled one is enabled and the failed one
recovers (nothing moves, new flows reach them); Maglev weights 1:2:3 over 60,000 one-shot UDP
flows (flow table on and off) and over 60,000 TCP connections; the TCP proxy's drained backend
finishing its open connections byte-exact while new connections avoid it, disable and enable,
smooth weighted round robin over 600 connections and weighted least_connections; run-time state
kept across a reload, forgotten for a backend removed and re-added and on restart; the flow
table's idle expiry and bound; every backend drained; every bad `backend` request answered with
its error and changing nothing."""
import contextlib
import json
import os
import pwd
import random
import socket
import sys
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor

import pytest

from fastpath_lab import (BACKENDS, CLIENT, PORT, VIP, Lab, by_label, fastpath_config, samples,
                          total)
from harness import (ControlClient, Piped, TestFailure, Workdir, base_config, check, check_eq,
                     ferryctl, ok, running, wait_until)
from proxy_peers import (BlockingClient, Metrics, backends, free_port, hello, new_id, op,
                         proxy_service, refused_end, wait_idle)

FOURTH = "10.10.2.5"
ALL = BACKENDS + [FOURTH]
SVC = "echo"
HEALTH = {"interval_ms": 200, "timeout_ms": 150, "rise": 2, "fall": 2}
PERIOD_S = 0.020
ROUNDS_AFTER_CHANGE = 25  # replies every flow must get after a change before it is judged
SETTLED_REPLIES = 5       # of those, the last ones must all show the new state


def ep(addr):
    return f"{addr}:{PORT}"


# One UDP echo per backend address: the reply is the backend's own address, a space, then the
# datagram, so the client knows who answered. Datagrams starting with "oneshot" are only logged
# ("client_ip client_port", one line each) and not answered: the weights test counts flows at
# the backends and needs no replies.
TAGGED_ECHO = r"""
import socket, sys
port, addr, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.bind((addr, port))
s.settimeout(0.1)
out = open(log, "a", buffering=1 << 16)
tag = addr.encode() + b" "
print("ready", flush=True)
while True:
    try:
        data, peer = s.recvfrom(65535)
    except socket.timeout:
        out.flush()
        continue
    if data.startswith(b"oneshot"):
        out.write(f"{peer[0]} {peer[1]}\n")
        continue
    s.sendto(tag + data, peer)
"""

# The flow client: every flow is a socket bound to CLIENT:port that sends "port seq" to the VIP
# every period; it records per flow the backend of every reply by the sequence number of its
# request (replies from different backends may overtake each other; the order the gateway chose
# in is the requests' order): flow -> [backend or null (no reply), ...] from the flow's first seq.
# Commands on stdin, one answer line each on stdout:
#   add N BASE          opens flows on ports BASE..BASE+N-1              -> "added N"
#   await K TIMEOUT     every flow open now gets K more replies          -> "reached" | "timeout {...}"
#   dump PATH           writes the state as JSON                         -> "dumped"
#   stop PATH           writes {flow: [backend, ...]} (every reply), exits -> "stopped"
# SIGTERM does what "stop" does, to argv[5].
FLOW_CLIENT = r"""
import json, os, select, signal, socket, sys, time
vip, port, client_ip = sys.argv[1], int(sys.argv[2]), sys.argv[3]
period, final_path = float(sys.argv[4]), sys.argv[5]
flows = {}
by_fd = {}
ep = select.epoll()
ep.register(0, select.EPOLLIN)
stats = {"bad": 0, "send_errors": 0, "late_ticks": 0}
seq = 0
waiters = []
inbuf = b""
stop_to = [None]

def add(n, base):
    for p in range(base, base + n):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        s.bind((client_ip, p))
        s.setblocking(False)
        f = {"sock": s, "by_seq": [], "first": seq + 1, "replies": 0, "sent": 0, "port": p}
        flows[p] = f
        by_fd[s.fileno()] = f
        ep.register(s.fileno(), select.EPOLLIN)

def answer(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()

def write_json(path, obj):
    with open(path + ".tmp", "w") as fh:
        json.dump(obj, fh)
    os.rename(path + ".tmp", path)

def state():
    return {"by_seq": {str(p): f["by_seq"] for p, f in flows.items()},
            "replies": {str(p): f["replies"] for p, f in flows.items()},
            "sent": {str(p): f["sent"] for p, f in flows.items()}, **stats}

def final(path):
    write_json(path, {str(p): f["by_seq"] for p, f in flows.items()})

def command(line):
    words = line.split()
    if not words:
        return
    if words[0] == "add":
        add(int(words[1]), int(words[2])); answer(f"added {words[1]}")
    elif words[0] == "await":
        want = {p: f["replies"] + int(words[1]) for p, f in flows.items()}
        waiters.append((want, time.monotonic() + float(words[2])))
    elif words[0] == "dump":
        write_json(words[1], state()); answer("dumped")
    elif words[0] == "stop":
        stop_to[0] = words[1]
    else:
        answer(f"error unknown command {line!r}")

signal.signal(signal.SIGTERM, lambda *a: stop_to.__setitem__(0, final_path))
next_tick = time.monotonic()
while stop_to[0] is None:
    now = time.monotonic()
    if now >= next_tick:
        seq += 1
        for f in flows.values():
            f["sent"] += 1  # attempts: the i-th request of a flow has seq first + i
            try:
                f["sock"].sendto(b"%d %d" % (f["port"], seq), (vip, port))
            except OSError:
                stats["send_errors"] += 1
        next_tick += period
        if next_tick < now:
            stats["late_ticks"] += 1
            next_tick = now + period
    try:
        events = ep.poll(max(0.0, next_tick - time.monotonic()))
    except InterruptedError:
        events = []
    for fd, _ in events:
        if fd == 0:
            data = os.read(0, 65536)
            if not data:
                stop_to[0] = final_path
                break
            inbuf += data
            while b"\n" in inbuf:
                line, inbuf = inbuf.split(b"\n", 1)
                command(line.decode())
            continue
        f = by_fd[fd]
        while True:
            try:
                data, src = f["sock"].recvfrom(2048)
            except BlockingIOError:
                break
            words = data.split(b" ")
            if src != (vip, port) or len(words) != 3 or int(words[1]) != f["port"]:
                stats["bad"] += 1
                continue
            i = int(words[2]) - f["first"]
            got = f["by_seq"]
            if i < 0 or i >= f["sent"] or (i < len(got) and got[i] is not None):
                stats["bad"] += 1
                continue
            got.extend([None] * (i + 1 - len(got)))
            got[i] = words[0].decode()
            f["replies"] += 1
    if waiters:
        now = time.monotonic()
        for w in list(waiters):
            want, deadline = w
            lagging = {p: n - flows[p]["replies"] for p, n in want.items() if flows[p]["replies"] < n}
            if not lagging:
                waiters.remove(w); answer("reached")
            elif now > deadline:
                waiters.remove(w)
                answer("timeout " + json.dumps({"lagging_flows": len(lagging),
                                                "sample": dict(list(lagging.items())[:10])}))
final(stop_to[0])
answer("stopped")
"""


class FlowClient(Piped):
    """The flow client process in the client namespace, driven over its stdin/stdout."""

    def __init__(self, lab, w, name="flows"):
        self.w = w
        self.final_path = w.file(f"{name}-final.json")
        super().__init__(lab.client, FLOW_CLIENT, [VIP, PORT, CLIENT, PERIOD_S, self.final_path],
                         w.file(f"{name}.err"), name)
        lab.procs.append(self.proc)
        self.dumps = 0

    def add(self, n, base):
        check_eq(self.cmd(f"add {n} {base}"), f"added {n}", "flow client add")

    def await_replies(self, k, timeout=20, what=""):
        answer = self.cmd(f"await {k} {timeout}", timeout=timeout + 10)
        check_eq(answer, "reached", f"every flow got {k} more replies {what}")

    def dump(self):
        """The client's state, with "flows": {flow: run-length [[backend, n], ...] of its replies
        in request order} beside the raw "by_seq"."""
        self.dumps += 1
        path = self.w.file(f"{self.name}-{self.dumps}.json")
        check_eq(self.cmd(f"dump {path}"), "dumped", "flow client dump")
        with open(path) as f:
            state = json.load(f)
        state["flows"] = {flow: run_length(got) for flow, got in state["by_seq"].items()}
        return state

    def stop(self):
        if self.proc.poll() is None:
            check_eq(self.cmd(f"stop {self.final_path}", timeout=60), "stopped", "flow client stop")
        with open(self.final_path) as f:
            return json.load(f)


def run_length(backends):
    """[[backend, n], ...] of a flow's answered requests in order (unanswered ones skipped)."""
    segs = []
    for b in backends:
        if b is None:
            continue
        if segs and segs[-1][0] == b:
            segs[-1][1] += 1
        else:
            segs.append([b, 1])
    return segs


def last_backend(segs):
    return segs[-1][0] if segs else None


def judge(mark, end, what):
    """For every flow open at `mark`: its backend at the mark (of its last answered request),
    and the run-length segments of the answers to the requests it sent after the mark.
    Returns {flow: (backend_before, segments_after)}."""
    out = {}
    for flow, segs in mark["flows"].items():
        check(segs, f"{what}: flow {flow} had replies before the change")
        out[flow] = (last_backend(segs), run_length(end["by_seq"][flow][mark["sent"][flow]:]))
    return out


def check_nothing_moved(judged, what):
    moved = {f: (b, s) for f, (b, s) in judged.items() if any(x != b for x, _ in s)}
    print(f"  {what}: {len(judged)} established flows, {len(moved)} changed backend", flush=True)
    check_eq(dict(list(moved.items())[:10]), {}, f"{what}: established flows that changed backend "
             f"({len(moved)} of {len(judged)}; flow: (backend before, replies after as [backend, n]))")


def check_exactly_moved(judged, victim, what):
    """Exactly the flows on `victim` move, each once, to another backend, and settle there; every
    other flow keeps its backend through every reply."""
    theirs = {f for f, (b, _) in judged.items() if b == victim}
    check(theirs, f"{what}: some flows were on {victim}")
    moved = {f for f, (b, s) in judged.items() if s and s[-1][0] != b}
    others_disturbed = {f: (b, s) for f, (b, s) in judged.items()
                        if f not in theirs and any(x != b for x, _ in s)}
    back_to_victim = {f: s for f, (b, s) in judged.items()
                      if f in theirs and (s[-1][0] == victim or s[-1][1] < SETTLED_REPLIES
                                          or len(s) > 2 or (len(s) == 2 and s[0][0] != victim))}
    dests = {}
    for f in theirs & moved:
        dests[judged[f][1][-1][0]] = dests.get(judged[f][1][-1][0], 0) + 1
    # How many requests sent after the mark still reached the victim: the time from the mark
    # to the change taking effect, in 20 ms rounds (ferryctl's start-up included).
    late = sorted(s[0][1] if s and s[0][0] == victim else 0 for f, (b, s) in judged.items() if f in theirs)
    print(f"  {what}: {len(theirs)} flows on {victim}, {len(moved)} moved (to {dests}), "
          f"{len(others_disturbed)} of the other {len(judged) - len(theirs)} disturbed; requests "
          f"after the mark still on {victim}: median {late[len(late) // 2] if late else '-'}, "
          f"max {late[-1] if late else '-'}", flush=True)
    check_eq(dict(list(others_disturbed.items())[:10]), {},
             f"{what}: flows not on {victim} that changed backend ({len(others_disturbed)})")
    check_eq(sorted(moved), sorted(theirs), f"{what}: the flows that moved are exactly those on {victim}")
    check_eq(dict(list(back_to_victim.items())[:10]), {},
             f"{what}: moved flows that did not move once and settle off {victim} "
             f"(each shown as its replies since the change, [backend, n])")
    return len(moved)


def check_new_batch(end, ports, what, avoid=None, reach=None):
    """The flows on `ports` each stay on one backend; none on `avoid`; some on `reach`."""
    placed = {}
    split = {}
    for p in ports:
        segs = end["flows"][str(p)]
        check(segs, f"{what}: new flow {p} got replies")
        if len({b for b, _ in segs}) != 1:
            split[p] = segs
        placed[p] = segs[-1][0]
    share = {b: sum(1 for x in placed.values() if x == b) for b in sorted(set(placed.values()))}
    print(f"  {what}: {len(ports)} new flows by backend {share}", flush=True)
    check_eq(dict(list(split.items())[:10]), {}, f"{what}: new flows that changed backend")
    if avoid:
        check_eq(share.get(avoid, 0), 0, f"{what}: new flows on {avoid} ({share})")
    if reach:
        check(share.get(reach, 0) > 0, f"{what}: new flows reach {reach} ({share})")
    return share


def steer(d, service, backend, *action):
    """`ferryctl --json backend SERVICE BACKEND ACTION...`: exit 0 and ferryd's result."""
    r = ferryctl(d, "--json", "backend", service, backend, *action)
    check_eq(r.returncode, 0, f"ferryctl backend {service} {backend} {' '.join(action)}: "
             f"{r.stdout} {r.stderr}")
    resp = json.loads(r.stdout)
    return ok(resp, f"backend {service} {backend} {' '.join(action)}")


def backend_rows(d, service):
    svc = [s for s in ok(d.request("services"))["services"] if s["name"] == service]
    check_eq(len(svc), 1, f"service {service} listed")
    return {b["address"]: b for b in svc[0]["backends"]}


def wait_health(d, service, address, state, timeout):
    return wait_until(lambda: backend_rows(d, service).get(address, {}).get("state") == state,
                      timeout, f"{service} backend {address} health {state}", interval=0.05)


def generation(d):
    return ok(d.request("status"))["xdp"]["fastpath"]["table_generation"]


def admin_metrics(d, service, backend):
    """(ferry_backend_weight, the state whose ferry_backend_admin_state is 1, all its states)."""
    weight = [v for labels, v in samples(d, "ferry_backend_weight")
              if labels.get("service") == service and labels.get("backend") == backend]
    states = {labels.get("state"): v for labels, v in samples(d, "ferry_backend_admin_state")
              if labels.get("service") == service and labels.get("backend") == backend}
    current = [s for s, v in states.items() if v == 1]
    return (weight[0] if len(weight) == 1 else weight), (current[0] if len(current) == 1 else current), states


class UdpLab:
    """The lab with the tagged echo on every backend address (and the fourth address added to
    the backends' namespace), TCP listeners for the health checks when asked."""

    def __init__(self, w):
        self.w = w
        self.lab = Lab()
        self.echoes = {}
        self.listeners = {}
        try:
            self.lab.back.ip("addr", "add", f"{FOURTH}/24", "dev", "b0")
        except Exception:
            self.lab.close()
            raise

    def echo(self, addr):
        log = self.w.file(f"echo-{addr}.log")
        p = self.lab.spawn(self.lab.back, TAGGED_ECHO, str(PORT), addr, log)
        check_eq(p.stdout.readline().strip(), "ready", f"echo on {addr}")
        self.echoes[addr] = (p, log)

    def listen(self, addr):
        from test_health import TCP_LISTENER
        p = self.lab.spawn(self.lab.back, TCP_LISTENER, addr, str(PORT))
        check_eq(p.stdout.readline().strip(), "ready", f"tcp listener on {addr}")
        self.listeners[addr] = p

    def unlisten(self, addr):
        p = self.listeners.pop(addr)
        p.kill()
        p.wait()

    def close(self):
        self.lab.close()


def udp_config(w, backends, health=None, **service_keys):
    cfg = fastpath_config(w)
    svc = cfg["services"][0]
    svc["backends"] = backends
    if health:
        svc["health"] = health
    svc.update(service_keys)
    return cfg


class Parts:
    """Named groups of checks that report and carry on: a test whose phases build on each other
    still judges every phase when one fails, and fails at the end with every failure."""

    def __init__(self):
        self.failures = []
        self.passed = []

    @contextlib.contextmanager
    def part(self, name):
        try:
            yield
        except (AssertionError, KeyError, TypeError, ValueError) as e:
            self.failures.append(f"{name}: {type(e).__name__}: {e}")
            print(f"  CHECK FAILED {name}: {e}", flush=True)
        else:
            self.passed.append(name)
            print(f"  check ok: {name}", flush=True)

    def done(self):
        print(f"  checks: {len(self.passed)} ok, {len(self.failures)} failed", flush=True)
        if self.failures:
            raise TestFailure(f"{len(self.failures)} check group(s) failed:\n  " +
                              "\n  ".join(self.failures))


def moved_count(judged):
    return sum(1 for b, s in judged.values() if any(x != b for x, _ in s))


def test_udp_flows_stay_through_reload_drain_disable_weight_and_health(workdir):
    """200 long-lived flows (a socket each, a datagram every 20 ms) through the AF_XDP path, the
    replies tagged by backend, through five changes, each judged from the replies after it."""
    u = UdpLab(workdir)
    started = time.monotonic()
    figures = {}
    parts = Parts()
    try:
        for addr in ALL:
            u.echo(addr)
        for addr in BACKENDS:
            u.listen(addr)
        cfg = udp_config(workdir, [ep(a) for a in BACKENDS], health=HEALTH)
        with running(workdir, cfg, netns=u.lab.gw.name) as d:
            for a in BACKENDS:
                wait_health(d, SVC, ep(a), "up", 5)
            fc = FlowClient(u.lab, workdir)
            fc.add(200, 40000)
            fc.await_replies(ROUNDS_AFTER_CHANGE, what="(the first 200 flows)")
            first = fc.dump()
            with parts.part("200 flows, each on one backend, every backend used"):
                share = {}
                for p, segs in first["flows"].items():
                    check_eq(len(segs), 1, f"flow {p} stays on one backend from its first reply: {segs}")
                    share[segs[0][0]] = share.get(segs[0][0], 0) + 1
                print(f"  200 flows by backend {share}", flush=True)
                check_eq(sorted(share), sorted(BACKENDS), "the 200 flows use every backend")
                check_eq(first["bad"], 0, "every reply came from the VIP")

            # (a) A fourth backend by reload: nobody moves, new flows reach it.
            mark = fc.dump()
            gen = generation(d)
            u.listen(FOURTH)
            workdir.write_config(udp_config(workdir, [ep(a) for a in ALL], health=HEALTH))
            ok(d.request("reload"), "reload adding the fourth backend")
            check(generation(d) > gen, "new tables after the reload")
            wait_health(d, SVC, ep(FOURTH), "up", 5)
            fc.add(100, 40200)
            fc.await_replies(ROUNDS_AFTER_CHANGE, what="after the reload")
            end = fc.dump()
            j = judge(mark, end, "(a) reload")
            figures["a_moved"] = moved_count(j)
            with parts.part("(a) reload adding a fourth backend: no established flow moves"):
                check_nothing_moved(j, "(a) reload adding a fourth backend")
            with parts.part("(a) new flows after the reload reach the fourth backend"):
                check_new_batch(end, range(40200, 40300), "(a) after the reload", reach=FOURTH)

            # Pick the victims from where the flows are: drain/disable the busiest original
            # backend, re-weight another, fail the third by health.
            on = {}
            for flow, segs in end["flows"].items():
                on.setdefault(last_backend(segs), []).append(flow)
            ranked = sorted(BACKENDS, key=lambda b: -len(on.get(b, [])))
            drained, reweighted, failing = ranked[0], ranked[1], ranked[2]
            print(f"  flows by backend now {({b: len(v) for b, v in on.items()})}; drain/disable "
                  f"{drained}, weight 3 on {reweighted}, health down {failing}", flush=True)

            # (b) Drain: its flows stay, no new flow lands on it.
            mark = fc.dump()
            res = steer(d, SVC, ep(drained), "drain")
            with parts.part("(b) the drain's answer, services row and metrics"):
                check_eq({k: res.get(k) for k in ("service", "backend", "admin", "weight",
                                                  "configured_weight", "health", "takes_new_traffic")},
                         {"service": SVC, "backend": ep(drained), "admin": "drain", "weight": 1,
                          "configured_weight": 1, "health": "up", "takes_new_traffic": False},
                         "the drain's answer")
                row = backend_rows(d, SVC)[ep(drained)]
                check_eq((row.get("admin"), row.get("weight")), ("drain", 1), f"services row {row}")
                weight, current, states = admin_metrics(d, SVC, ep(drained))
                check_eq((weight, current), (1, "drain"), f"ferry_backend_weight and "
                         f"ferry_backend_admin_state of the drained backend {states}")
                check_eq(states, {"enabled": 0, "drain": 1, "disabled": 0},
                         "ferry_backend_admin_state: a sample per state, 1 for the current one")
            fc.add(100, 40300)
            fc.await_replies(ROUNDS_AFTER_CHANGE, what="after the drain")
            end = fc.dump()
            j = judge(mark, end, "(b) drain")
            figures["b_moved"] = moved_count(j)
            figures["b_kept_on_drained"] = sum(1 for b, _ in j.values() if b == drained)
            with parts.part("(b) drain: established flows (also those on it) keep their backend"):
                check_nothing_moved(j, f"(b) drain of {drained}")
                check(figures["b_kept_on_drained"] > 0, f"some established flows on {drained}")
            with parts.part("(b) no new flow lands on the drained backend"):
                check_new_batch(end, range(40300, 40400), "(b) after the drain", avoid=drained)

            # (c) Disable: exactly its flows move, none to it.
            mark = fc.dump()
            res = steer(d, SVC, ep(drained), "disable")
            with parts.part("(c) the disable's answer"):
                check_eq((res.get("admin"), res.get("takes_new_traffic")), ("disabled", False),
                         f"the disable's answer {res}")
            fc.await_replies(ROUNDS_AFTER_CHANGE, what="after the disable")
            end = fc.dump()
            j = judge(mark, end, "(c) disable")
            figures["c_moved"] = moved_count(j)
            figures["c_on_disabled"] = sum(1 for b, _ in j.values() if b == drained)
            with parts.part("(c) disable: exactly its flows move, none to it"):
                check_exactly_moved(j, drained, f"(c) disable of {drained}")

            # (d) A weight: nothing moves.
            mark = fc.dump()
            res = steer(d, SVC, ep(reweighted), "weight", "3")
            with parts.part("(d) the weight's answer and ferry_backend_weight"):
                check_eq((res.get("admin"), res.get("weight"), res.get("configured_weight"),
                          res.get("takes_new_traffic")), ("enabled", 3, 1, True),
                         f"the weight's answer {res}")
                check_eq(admin_metrics(d, SVC, ep(reweighted))[:2], (3, "enabled"),
                         "ferry_backend_weight after weight 3")
            fc.await_replies(ROUNDS_AFTER_CHANGE, what="after the weight change")
            end = fc.dump()
            j = judge(mark, end, "(d) weight")
            figures["d_moved"] = moved_count(j)
            with parts.part("(d) weight 3: no established flow moves"):
                check_nothing_moved(j, f"(d) weight 3 on {reweighted}")

            # (e) Down by health: exactly its flows move.
            mark = fc.dump()
            gen = generation(d)
            u.unlisten(failing)
            wait_health(d, SVC, ep(failing), "down", 0.2 * 2 * 1.1 + 0.15 + 2)
            wait_until(lambda: generation(d) > gen, 5, "tables rebuilt without the down backend")
            fc.await_replies(ROUNDS_AFTER_CHANGE, what="after the health failure")
            end = fc.dump()
            j = judge(mark, end, "(e) health")
            figures["e_moved"] = moved_count(j)
            figures["e_on_down"] = sum(1 for b, _ in j.values() if b == failing)
            with parts.part("(e) down by health: exactly its flows move"):
                check_exactly_moved(j, failing, f"(e) {failing} down by health")
            with parts.part("(e) an enabled backend down by health takes no new traffic"):
                res = steer(d, SVC, ep(failing), "enable")
                check_eq((res.get("admin"), res.get("health"), res.get("takes_new_traffic")),
                         ("enabled", "down", False), f"the answer for a backend down by health {res}")

            # (f) Enabled again: the flows that left it stay where they are now (a backend coming
            # back is one more backend, not a reason to move), new flows reach it.
            mark = fc.dump()
            res = steer(d, SVC, ep(drained), "enable")
            with parts.part("(f) the enable's answer"):
                check_eq((res.get("admin"), res.get("takes_new_traffic")), ("enabled", True),
                         f"the enable's answer {res}")
            fc.add(100, 40400)
            fc.await_replies(ROUNDS_AFTER_CHANGE, what="after the enable")
            end = fc.dump()
            j = judge(mark, end, "(f) enable")
            figures["f_moved"] = moved_count(j)
            with parts.part("(f) enable: no established flow moves"):
                check_nothing_moved(j, f"(f) enable of {drained}")
            with parts.part("(f) new flows reach the enabled backend"):
                check_new_batch(end, range(40400, 40500), "(f) after the enable", reach=drained)

            # (g) Up again by health: nothing moves, new flows reach it.
            mark = fc.dump()
            gen = generation(d)
            u.listen(failing)
            wait_health(d, SVC, ep(failing), "up", 0.2 * 2 * 1.1 + 2)
            wait_until(lambda: generation(d) > gen, 5, "tables rebuilt with the backend back")
            fc.add(100, 40500)
            fc.await_replies(ROUNDS_AFTER_CHANGE, what="after the health recovery")
            end = fc.dump()
            j = judge(mark, end, "(g) health up")
            figures["g_moved"] = moved_count(j)
            with parts.part("(g) up again by health: no established flow moves"):
                check_nothing_moved(j, f"(g) {failing} up again")
            with parts.part("(g) new flows reach the recovered backend"):
                check_new_batch(end, range(40500, 40600), "(g) after the recovery", reach=failing)

            flows_gauge = total(d, "ferry_xsk_flows")
            fam = {f: total(d, f) for f in ("ferry_xsk_flow_hits_total", "ferry_xsk_flow_misses_total",
                                             "ferry_xsk_flow_evictions_total",
                                             "ferry_xsk_flow_expiries_total",
                                             "ferry_xsk_flow_reassigned_total")}
            lost = sum(end["sent"][f] - end["replies"][f] for f in end["sent"])
            sent = sum(end["sent"].values())
            print(f"  flow table: ferry_xsk_flows {flows_gauge}, {fam}", flush=True)
            print(f"  client: {sent} sent, {sent - lost} replies ({lost} not (yet) answered), "
                  f"late ticks {end['late_ticks']}, send errors {end['send_errors']}, bad {end['bad']}",
                  flush=True)
            with parts.part("flow table metrics"):
                check(flows_gauge >= 600, f"ferry_xsk_flows counts the 600 live flows: {flows_gauge}")
                check(fam["ferry_xsk_flow_misses_total"] >= 600, f"a miss per new flow at least: {fam}")
                check(fam["ferry_xsk_flow_hits_total"] > fam["ferry_xsk_flow_misses_total"],
                      f"established flows hit the table: {fam}")
                check_eq(fam["ferry_xsk_flow_evictions_total"], 0, "no eviction in a 65536-entry table")
            with parts.part("every reply from the VIP"):
                check_eq(end["bad"], 0, "replies not from the VIP")
            final = fc.stop()
            check_eq(len(final), 600, "the final dump has every flow")
            figures["seconds"] = round(time.monotonic() - started, 1)
            print(f"  flows moved per phase: {figures}", flush=True)
    finally:
        u.close()
    parts.done()


def test_maglev_weights_share_60000_flows(workdir):
    """Weights 1:2:3 from the config's backend objects: 60,000 one-shot datagrams, each from its
    own client port, tallied at the backends; within 2 points of 1/6, 2/6, 3/6, with the flow
    table on (the default) and off (affinity none)."""
    flows_n = 60000
    base = 2000
    u = UdpLab(workdir)
    parts = Parts()
    try:
        for addr in BACKENDS:
            u.echo(addr)
        weights = dict(zip(BACKENDS, (1, 2, 3)))
        for affinity in ("flow", "none"):
            for addr in BACKENDS:
                open(u.echoes[addr][1], "w").close()
            extra = {} if affinity == "flow" else {"affinity": "none"}
            cfg = udp_config(workdir, [{"address": ep(a), "weight": wt} for a, wt in weights.items()],
                             **extra)
            with running(workdir, cfg, netns=u.lab.gw.name, name=f"ferryd-{affinity}") as d:
                with parts.part(f"affinity {affinity}: services shows the configured weights"):
                    rows = backend_rows(d, SVC)
                    check_eq({a: rows[ep(a)].get("weight") for a in BACKENDS}, weights,
                             "services shows the configured weights")
                started = time.monotonic()
                sender = ("import socket, sys, time\n"
                          f"base, n = {base}, {flows_n}\n"
                          "t = time.monotonic()\n"
                          "for i in range(n):\n"
                          "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                          f"    s.bind(('{CLIENT}', base + i))\n"
                          f"    s.sendto(b'oneshot %d' % i, ('{VIP}', {PORT}))\n"
                          "    s.close()\n"
                          "    if i % 100 == 99:\n"
                          "        t += 0.01\n"
                          "        time.sleep(max(0, t - time.monotonic()))\n")
                r = u.lab.client.run("timeout", "60", sys.executable, "-c", sender, check=False)
                check_eq(r.returncode, 0, f"sender: {r.stderr}")

                def tally():
                    per = {}
                    for addr in BACKENDS:
                        with open(u.echoes[addr][1]) as f:
                            per[addr] = {int(l.split()[1]) for l in f if l.strip()}
                    return per
                wait_until(lambda: sum(len(v) for v in tally().values()) >= flows_n, 10,
                           f"the backends to log {flows_n} flows", interval=0.2)
                per = tally()
                elapsed = time.monotonic() - started
                seen = sum(len(v) for v in per.values())
                both = set()
                for i, a in enumerate(BACKENDS):
                    for b in BACKENDS[i + 1:]:
                        both |= per[a] & per[b]
                shares = {a: len(per[a]) / seen for a in BACKENDS}
                errors = {a: round(100 * (shares[a] - weights[a] / 6), 2) for a in BACKENDS}
                print(f"  affinity {affinity}: {seen} flows in {elapsed:.1f}s, "
                      f"{ {a: len(per[a]) for a in BACKENDS} }, share error (points) {errors}, "
                      f"flow entries by worker {by_label(d, 'ferry_xsk_flows', 'worker')}, "
                      f"misses {total(d, 'ferry_xsk_flow_misses_total')}, evictions by worker "
                      f"{by_label(d, 'ferry_xsk_flow_evictions_total', 'worker')}", flush=True)
                with parts.part(f"affinity {affinity}: every flow on one backend"):
                    check_eq(seen, flows_n, "every flow reached a backend")
                    check_eq(len(both), 0, "no flow on two backends")
                with parts.part(f"affinity {affinity}: 1:2:3 within 2 points"):
                    check(all(abs(e) <= 2.0 for e in errors.values()),
                          f"affinity {affinity}: share within 2 points of 1/6, 2/6, 3/6: {errors}")
    finally:
        u.close()
    parts.done()


class Streamer:
    """A long TCP connection streaming both ways (echo and source ops) until told to stop."""

    def __init__(self, port, rng_seed):
        self.client = BlockingClient("127.0.0.1", port, timeout_s=30)
        self.rng = random.Random(rng_seed)
        self.rounds = 0
        self.error = None
        self.stop = threading.Event()
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        try:
            while not self.stop.is_set():
                self.client.echo(self.rng.randbytes(self.rng.randint(1, 32768)))
                n = self.rng.randint(1, 65536)
                self.client.send(op("S", n))
                self.client.recv_count(n)
                with self.cond:
                    self.rounds += 1
                    self.cond.notify_all()
        except Exception as e:  # noqa: BLE001 (checked by the test)
            self.error = repr(e)
            with self.cond:
                self.cond.notify_all()

    def wait_rounds(self, n, timeout=20):
        with self.cond:
            target = self.rounds + n
            if not self.cond.wait_for(lambda: self.rounds >= target or self.error, timeout):
                raise AssertionError(f"connection {self.client.id} made no progress in {timeout}s")
        check(self.error is None, f"streaming connection {self.client.id}: {self.error}")

    def finish(self):
        self.stop.set()
        self.thread.join(timeout=30)
        check(not self.thread.is_alive(), "a streaming connection stopped")
        check(self.error is None, f"streaming connection {self.client.id}: {self.error}")
        self.client.finish()


def landings(b, port, count):
    """`count` connections one after another (echo, half-close, EOF); the backend port of each."""
    ports = []
    for _ in range(count):
        c = BlockingClient("127.0.0.1", port)
        c.echo(b"which backend?")
        c.finish()
        ports.append(c.id)
    return [b.wait_hello(i)["port"] for i in ports]


def test_tcp_drain_disable_enable_and_weighted_round_robin(workdir):
    """Round robin over three loopback backends: 20 long connections streaming both ways while
    one backend is drained, then disabled: they finish byte-exact; new connections avoid it;
    enabled again it takes its turn; weights 1:2:3 share 600 connections within 5 points."""
    port = free_port()
    with backends(["127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"]) as (b,):
        ends = [b.endpoint(i) for i in range(3)]
        cfg = base_config(workdir, services=[proxy_service(port, ends, balance="round_robin")])
        with running(workdir, cfg) as d:
            streams = []
            parts = Parts()
            try:
                tcp_drain_phases(workdir, d, b, port, ends, streams, parts)
            finally:
                for s in streams:  # a failed check leaves them streaming: stop before ferryd
                    s.stop.set()
                for s in streams:
                    s.thread.join(timeout=10)
    parts.done()


def tcp_drain_phases(w, d, b, port, ends, streams, parts):
    """The phases of the TCP test (streams: the long connections, for the caller to stop)."""
    streams += [Streamer(port, i) for i in range(20)]
    for s in streams:
        s.wait_rounds(1)
    on = [b.wait_hello(s.client.id)["port"] for s in streams]
    victim = b.ports[0]
    mine = [s for s, p in zip(streams, on) if p == victim]
    print(f"  20 streaming connections by backend port "
          f"{ {p: on.count(p) for p in b.ports} }", flush=True)
    check(mine, f"some streaming connections on {ends[0]}")

    res = steer(d, "web", ends[0], "drain")
    with parts.part("drain: the answer"):
        check_eq((res.get("admin"), res.get("takes_new_traffic"), res.get("health")),
                 ("drain", False, "up"), f"drain answer {res}")
    for s in streams:
        s.wait_rounds(2)  # every open connection still streams, those on the drained one too
    got = landings(b, port, 100)
    by = {p: got.count(p) for p in b.ports}
    print(f"  100 new connections while {ends[0]} drains: {by}", flush=True)
    with parts.part("drain: 100 new connections avoid the drained backend"):
        check_eq(by[victim], 0, f"new connections on the drained backend {by}")

    res = steer(d, "web", ends[0], "disable")
    with parts.part("disable: the answer"):
        check_eq((res.get("admin"), res.get("takes_new_traffic")), ("disabled", False),
                 f"disable answer {res}")
    for s in streams:
        s.wait_rounds(2)  # open connections are left to finish, still streaming
    got = landings(b, port, 30)
    by = {p: got.count(p) for p in b.ports}
    print(f"  30 new connections while {ends[0]} is disabled: {by}", flush=True)
    with parts.part("disable: 30 new connections avoid the disabled backend"):
        check_eq(by[victim], 0, f"new connections on the disabled backend {by}")

    both_ways = 0
    with parts.part("the 20 long connections finish byte-exact (sha256 both ways), clean EOF"):
        for s in streams:
            s.finish()
            rec = b.wait_closed(s.client.id)
            s.client.tally.check_against(rec)
            check_eq(rec["end"], "eof", f"connection {s.client.id} ended cleanly")
            both_ways += s.client.tally.in_bytes + s.client.tally.out_bytes
        print(f"  the 20 streams finished byte-exact ({len(mine)} on the drained, then disabled "
              f"backend; {both_ways} B both ways, {sum(s.rounds for s in streams)} rounds)", flush=True)

    res = steer(d, "web", ends[0], "enable")
    with parts.part("enable: the answer"):
        check_eq((res.get("admin"), res.get("takes_new_traffic")), ("enabled", True),
                 f"enable answer {res}")
    got = landings(b, port, 30)
    by = {p: got.count(p) for p in b.ports}
    print(f"  30 new connections after enable: {by}", flush=True)
    with parts.part("enable: round robin over the three again"):
        check(all(9 <= n <= 11 for n in by.values()), f"round robin over the three again: {by}")

    for end, weight in zip(ends, (1, 2, 3)):
        res = steer(d, "web", end, "weight", str(weight))
        check_eq(res.get("weight"), weight, f"weight answer {res}")
    started = time.monotonic()
    got = landings(b, port, 600)
    by = {p: got.count(p) for p in b.ports}
    errors = [round(100 * (by[p] / 600 - wt / 6), 2) for p, wt in zip(b.ports, (1, 2, 3))]
    print(f"  600 connections with weights 1:2:3 in {time.monotonic() - started:.1f}s: "
          f"{[by[p] for p in b.ports]}, share error (points) {errors}", flush=True)
    with parts.part("weights 1:2:3: 600 connections within 5 points"):
        check(all(abs(e) <= 5 for e in errors), f"within 5 points of 1/6, 2/6, 3/6: {errors}")

    # least_connections compares active connections divided by weight: 60 held connections
    # under the run-time weights 1:2:3 (kept across the reload) split 10/20/30.
    cfg = json.load(open(d.config_path))
    cfg["services"][0]["balance"] = "least_connections"
    w.write_config(cfg)
    ok(d.request("reload"), "reload to least_connections")
    held = []
    try:
        for _ in range(60):
            c = BlockingClient("127.0.0.1", port)
            c.echo(b"held")
            held.append(c)
        got = [b.wait_hello(c.id)["port"] for c in held]
        by = [got.count(p) for p in b.ports]
        print(f"  least_connections, weights 1:2:3, 60 held connections: {by}", flush=True)
        with parts.part("least_connections with weights 1:2:3: 60 held connections split 10/20/30"):
            check(all(abs(n - want) <= 1 for n, want in zip(by, (10, 20, 30))), f"split {by}")
    finally:
        for c in held:
            c.finish()

    m = wait_idle(d)
    with parts.part("no connection reset or failed"):
        check_eq(m.value("ferry_proxy_resets_total", service="web"), 0, "no connection reset")
        check_eq(m.value("ferry_proxy_connections_failed_total", service="web"), 0,
                 "no connection failed")


def test_tcp_maglev_weights_share_60000_connections(workdir):
    """TCP Maglev (the proxy's default policy, which hashes the client address) with weights
    1:2:3 from the config's backend objects: 60,000 connections, each from its own loopback
    client address (127.1.0.1 on), 8 at a time; within 2 points of 1/6, 2/6, 3/6."""
    n = 60000
    port = free_port()

    def one(i):
        conn_id = new_id()
        with socket.socket() as s:
            s.bind((f"127.{1 + i // 65536}.{(i // 256) % 256}.{i % 256 or 1}", 0))
            s.settimeout(20)
            s.connect(("127.0.0.1", port))
            s.sendall(hello(conn_id) + op("E", 4) + b"ping")
            got = b""
            while len(got) < 4:
                data = s.recv(4 - len(got))
                check(data, f"connection {i}: EOF before the echo")
                got += data
            s.shutdown(socket.SHUT_WR)
            while s.recv(64):
                pass
        return conn_id

    with backends(["127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"]) as (b,):
        ends = [{"address": b.endpoint(i), "weight": wt} for i, wt in enumerate((1, 2, 3))]
        with running(workdir, base_config(workdir, services=[proxy_service(port, ends)])) as d:
            rows = backend_rows(d, "web")
            check_eq([rows[b.endpoint(i)].get("weight") for i in range(3)], [1, 2, 3],
                     "services shows the configured weights")
            started = time.monotonic()
            with ThreadPoolExecutor(8) as pool:
                ids = list(pool.map(one, range(n)))
            got = [b.wait_hello(i)["port"] for i in ids]
            by = [got.count(p) for p in b.ports]
            errors = [round(100 * (k / n - wt / 6), 2) for k, wt in zip(by, (1, 2, 3))]
            print(f"  {n} connections in {time.monotonic() - started:.1f}s: {by}, share error "
                  f"(points) {errors}", flush=True)
            check(all(abs(e) <= 2 for e in errors), f"within 2 points of 1/6, 2/6, 3/6: {errors}")
            m = wait_idle(d, timeout_s=30)
            check_eq(m.value("ferry_proxy_connections_total", service="web"), n, "connections_total")
            check_eq(m.value("ferry_proxy_connections_failed_total", service="web"), 0, "failed")


def probe(u, w, name, base, n=60):
    """n new flows, 3 replies each; {flow: backend} (each flow checked to stay on one)."""
    fc = FlowClient(u.lab, w, name=name)
    try:
        fc.add(n, base)
        fc.await_replies(3, what=f"({name})")
        end = fc.dump()
    finally:
        fc.stop()
    out = {}
    for flow, segs in end["flows"].items():
        check_eq(len(segs), 1, f"{name}: flow {flow} on one backend: {segs}")
        out[flow] = segs[0][0]
    return out


def test_runtime_state_survives_a_reload_and_a_readded_backend_starts_enabled_udp(workdir):
    """UDP in the lab: drain one backend and re-weight another, reload with a config that still
    has both (and one more backend): `services` still says so, the metrics too, and new flows
    still avoid the drained one. Then a reload removing the drained backend and one adding it
    back: it starts enabled with its configured weight and takes new flows."""
    parts = Parts()
    u = UdpLab(workdir)
    try:
        for addr in ALL:
            u.echo(addr)
        cfg = udp_config(workdir, [ep(a) for a in BACKENDS])
        readd_list = [ep(a) for a in BACKENDS] + [{"address": ep(FOURTH), "weight": 0}]
        with running(workdir, cfg, netns=u.lab.gw.name) as d:
            drained, reweighted = BACKENDS[0], BACKENDS[1]
            # 100 long-lived flows established before the steering, judged through the reloads.
            fc = FlowClient(u.lab, workdir, name="established")
            fc.add(100, 43000)
            fc.await_replies(ROUNDS_AFTER_CHANGE, what="(100 established flows)")
            mark = fc.dump()
            steer(d, SVC, ep(drained), "drain")
            steer(d, SVC, ep(reweighted), "weight", "2")
            gen = generation(d)
            # The fourth comes with weight 0 in the config: drained by configuration.
            workdir.write_config(udp_config(workdir, readd_list))
            ok(d.request("reload"), "reload keeping the steered backends, adding a fourth")
            check(generation(d) > gen, "new tables after the reload")
            fc.await_replies(ROUNDS_AFTER_CHANGE, what="after the reload")
            j = judge(mark, fc.dump(), "drain, weight, reload")
            with parts.part("UDP: established flows (also on the drained backend) keep their backend "
                            "through drain, weight and reload"):
                check(any(b == drained for b, _ in j.values()), f"some established flows on {drained}")
                check_nothing_moved(j, "drain + weight 2 + reload adding a fourth")
            with parts.part("UDP: services and metrics keep drain and weight 2 across the reload"):
                rows = backend_rows(d, SVC)
                check_eq({a: (rows[ep(a)].get("admin"), rows[ep(a)].get("weight")) for a in ALL},
                         {drained: ("drain", 1), reweighted: ("enabled", 2), BACKENDS[2]: ("enabled", 1),
                          FOURTH: ("enabled", 0)}, "services after the reload (admin, weight)")
                check_eq(admin_metrics(d, SVC, ep(FOURTH))[:2], (0, "enabled"),
                         "metrics of the weight-0 backend")
                check_eq(admin_metrics(d, SVC, ep(drained))[:2], (1, "drain"),
                         "metrics of the drained backend after the reload")
                check_eq(admin_metrics(d, SVC, ep(reweighted))[:2], (2, "enabled"),
                         "metrics of the re-weighted backend after the reload")
            placed = probe(u, workdir, "after-reload", 41000)
            share = {a: list(placed.values()).count(a) for a in ALL}
            print(f"  60 new flows after the reload: {share}", flush=True)
            with parts.part("UDP: new flows still avoid the drained backend after the reload"):
                check_eq(share[drained], 0, f"new flows on the drained backend after the reload {share}")
            with parts.part("UDP: new flows avoid a backend of weight 0 in the config"):
                check_eq(share[FOURTH], 0, f"new flows on the weight-0 backend {share}")

            mark = fc.dump()
            workdir.write_config(udp_config(workdir, [x for x in readd_list if x != ep(drained)]))
            ok(d.request("reload"), "reload removing the drained backend")
            fc.await_replies(ROUNDS_AFTER_CHANGE, what="after the reload removing it")
            j = judge(mark, fc.dump(), "reload removing the drained backend")
            with parts.part("UDP: a reload removing the drained backend moves exactly its flows"):
                check_exactly_moved(j, drained, "reload removing the drained backend")
            with parts.part("UDP: a removed backend leaves services and the metrics"):
                check(ep(drained) not in backend_rows(d, SVC), "removed backend not listed")
                check_eq(admin_metrics(d, SVC, ep(drained))[:2], ([], []), "removed backend's gauges gone")
            mark = fc.dump()
            workdir.write_config(udp_config(workdir, readd_list))
            ok(d.request("reload"), "reload adding it back")
            fc.await_replies(ROUNDS_AFTER_CHANGE, what="after the reload adding it back")
            j = judge(mark, fc.dump(), "reload adding it back")
            with parts.part("UDP: adding it back moves no established flow"):
                check_nothing_moved(j, "reload adding the backend back")
            fc.stop()
            with parts.part("UDP: a removed and re-added backend starts enabled"):
                row = backend_rows(d, SVC)[ep(drained)]
                check_eq((row.get("admin"), row.get("weight")), ("enabled", 1),
                         f"a removed and re-added backend starts enabled: {row}")
                check_eq(admin_metrics(d, SVC, ep(drained))[:2], (1, "enabled"), "its metrics")
            placed = probe(u, workdir, "after-readd", 42000)
            share = {a: list(placed.values()).count(a) for a in ALL}
            print(f"  60 new flows after it came back: {share}", flush=True)
            with parts.part("UDP: the re-added backend takes new flows"):
                check(share[drained] > 0, f"the re-added backend takes new flows {share}")
                check_eq(share[FOURTH], 0, f"still none on the weight-0 backend {share}")
    finally:
        u.close()
    parts.done()


def test_runtime_state_survives_a_reload_and_a_readded_backend_starts_enabled_tcp(workdir):
    """The same on TCP (loopback backends, round robin), and a restart forgets the run-time
    state."""
    parts = Parts()
    port = free_port()
    with backends(["127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"]) as (b,):
        ends = [b.endpoint(i) for i in range(3)]
        cfg = base_config(workdir, services=[proxy_service(port, ends[:2], balance="round_robin")])
        with running(workdir, cfg, name="tcp") as d:
            steer(d, "web", ends[0], "drain")
            cfg["services"][0]["backends"] = ends
            workdir.write_config(cfg)
            ok(d.request("reload"), "TCP: reload keeping the drained backend, adding a third")
            with parts.part("TCP: still drained after the reload"):
                check_eq(backend_rows(d, "web")[ends[0]].get("admin"), "drain", "TCP: still drained")
            got = landings(b, port, 20)
            by = {p: got.count(p) for p in b.ports}
            print(f"  TCP: 20 connections after the reload: {by}", flush=True)
            with parts.part("TCP: new connections avoid the drained backend after the reload"):
                check_eq(by[b.ports[0]], 0, f"TCP: new connections on the drained backend {by}")
            cfg["services"][0]["backends"] = ends[1:]
            workdir.write_config(cfg)
            ok(d.request("reload"), "TCP: reload removing it")
            cfg["services"][0]["backends"] = ends
            workdir.write_config(cfg)
            ok(d.request("reload"), "TCP: reload adding it back")
            with parts.part("TCP: a removed and re-added backend starts enabled"):
                check_eq(backend_rows(d, "web")[ends[0]].get("admin"), "enabled",
                         "TCP: re-added backend starts enabled")
            got = landings(b, port, 30)
            by = {p: got.count(p) for p in b.ports}
            print(f"  TCP: 30 connections after it came back: {by}", flush=True)
            with parts.part("TCP: round robin over the three again"):
                check(all(9 <= n <= 11 for n in by.values()), f"TCP: round robin over the three again: {by}")
            steer(d, "web", ends[1], "disable")
            steer(d, "web", ends[2], "weight", "5")
        # Run-time state is not persisted (ferryctl --help: "until ferryd restarts").
        with running(workdir, cfg, name="tcp-restarted") as d:
            with parts.part("TCP: a restart starts every backend enabled at its configured weight"):
                rows = backend_rows(d, "web")
                check_eq({a: (rows[a].get("admin"), rows[a].get("weight")) for a in ends},
                         {a: ("enabled", 1) for a in ends}, "services after a restart")
    parts.done()


def test_flow_table_ages_out_idle_flows_and_stays_bounded(workdir):
    """xdp.flows {"entries": 64, "idle_timeout_ms": 1000}: flows that keep sending never expire;
    once they stop, their entries are freed (ferry_xsk_flow_expiries_total) no sooner than the
    idle timeout, even with no other traffic; 300 flows in 64 entries per worker evict, never
    holding more than the table."""
    parts = Parts()
    u = UdpLab(workdir)
    try:
        for addr in BACKENDS:
            u.echo(addr)
        cfg = udp_config(workdir, [ep(a) for a in BACKENDS])
        cfg["xdp"]["flows"] = {"entries": 64, "idle_timeout_ms": 1000}
        with running(workdir, cfg, netns=u.lab.gw.name) as d:
            fc = FlowClient(u.lab, workdir)
            fc.add(30, 44000)
            fc.await_replies(75, what="(30 flows for 1.5 s, longer than the idle timeout)")
            with parts.part("active flows do not expire"):
                check_eq(total(d, "ferry_xsk_flows"), 30, "entries for the 30 flows")
                check_eq(total(d, "ferry_xsk_flow_expiries_total"), 0, "expiries while they send")
                check_eq(total(d, "ferry_xsk_flow_misses_total"), 30, "one miss per flow")
            fc.stop()
            stopped = time.monotonic()
            with parts.part("idle flows expire after the idle timeout, with no other traffic"):
                wait_until(lambda: total(d, "ferry_xsk_flows") == 0, 10,
                           "the idle flows' entries to be freed", interval=0.05)
                after = time.monotonic() - stopped
                print(f"  30 idle flows freed {after:.2f} s after their last datagram "
                      f"(idle_timeout_ms 1000); expiries "
                      f"{total(d, 'ferry_xsk_flow_expiries_total')}", flush=True)
                check(after >= 0.9, f"freed {after:.2f} s after the last datagram, before the timeout")
                check_eq(total(d, "ferry_xsk_flow_expiries_total"), 30, "ferry_xsk_flow_expiries_total")
            sender = ("import socket\n"
                      "for i in range(300):\n"
                      "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                      f"    s.bind(('{CLIENT}', 45000 + i))\n"
                      f"    s.sendto(b'oneshot %d' % i, ('{VIP}', {PORT}))\n"
                      "    s.close()\n")
            u.lab.client.run(sys.executable, "-c", sender)
            wait_until(lambda: total(d, "ferry_xsk_flow_misses_total") >= 330, 10,
                       "300 more misses", interval=0.05)
            per_worker = by_label(d, "ferry_xsk_flows", "worker")
            evictions = total(d, "ferry_xsk_flow_evictions_total")
            print(f"  300 flows into 64 entries per worker: in use {per_worker}, evictions "
                  f"{evictions}", flush=True)
            with parts.part("a full table evicts and holds no more than its entries"):
                check(all(n <= 64 for n in per_worker.values()), f"entries per worker {per_worker}")
                check(evictions >= 300 - 128, f"evictions {evictions}")
                check_eq(total(d, "ferry_xsk_flow_misses_total"), 330, "misses")
    finally:
        u.close()
    parts.done()


def test_every_backend_drained_keeps_established_traffic_and_refuses_new(workdir):
    """Every backend of a service drained: established UDP flows and open TCP connections go on,
    new flows are dropped as no_backend and new connections turned away (counted); every one
    disabled: UDP stops; enabled again: everything is served, ferryd none the worse."""
    parts = Parts()
    u = UdpLab(workdir)
    try:
        for addr in BACKENDS:
            u.echo(addr)
        with running(workdir, udp_config(workdir, [ep(a) for a in BACKENDS]), netns=u.lab.gw.name) as d:
            fc = FlowClient(u.lab, workdir)
            fc.add(30, 46000)
            fc.await_replies(5, what="(30 flows)")
            for a in BACKENDS:
                steer(d, SVC, ep(a), "drain")
            drops = total(d, "ferry_xsk_drops_total", reason="no_backend")
            fc.add(10, 46100)
            mark = fc.dump()
            wait_until(lambda: total(d, "ferry_xsk_drops_total", reason="no_backend") >= drops + 50, 10,
                       "the new flows' datagrams dropped as no_backend", interval=0.05)
            end = fc.dump()
            with parts.part("UDP all drained: established flows go on, new ones get nothing"):
                old = [f for f in mark["flows"] if int(f) < 46100]
                check(all(end["replies"][f] > mark["replies"][f] for f in old),
                      "every established flow still answered")
                check_nothing_moved(judge({**mark, "flows": {f: mark["flows"][f] for f in old}}, end,
                                          "all drained"), "all drained")
                check_eq({f: end["replies"][f] for f in end["replies"] if int(f) >= 46100},
                         {str(p): 0 for p in range(46100, 46110)}, "replies to the new flows")
            for a in BACKENDS:
                steer(d, SVC, ep(a), "disable")
            mark = fc.dump()
            drops = total(d, "ferry_xsk_drops_total", reason="no_backend")
            wait_until(lambda: total(d, "ferry_xsk_drops_total", reason="no_backend") >= drops + 40 * 5,
                       10, "every flow's datagrams dropped", interval=0.05)
            end = fc.dump()
            with parts.part("UDP all disabled: nothing is answered"):
                # A reply already on its way when the last disable returned may still come in.
                late = {f: end["replies"][f] - mark["replies"][f] for f in end["replies"]
                        if end["replies"][f] - mark["replies"][f] > 1}
                check_eq(late, {}, "flows answered after every backend was disabled")
            for a in BACKENDS:
                steer(d, SVC, ep(a), "enable")
            with parts.part("UDP enabled again: every flow answered"):
                fc.await_replies(5, what="after enabling every backend")
            fc.stop()
            check_eq(ok(d.request("status"))["state"], "running", "ferryd still running")
    finally:
        u.close()

    port = free_port()
    with backends(["127.0.0.1:0", "127.0.0.1:0"]) as (b,):
        ends = [b.endpoint(0), b.endpoint(1)]
        cfg = base_config(workdir, services=[proxy_service(port, ends, balance="round_robin")])
        with running(workdir, cfg, name="tcp") as d:
            held = BlockingClient("127.0.0.1", port)
            held.echo(b"open before the drain")
            for e in ends:
                steer(d, "web", e, "drain")
            end_how, conn_id = refused_end("127.0.0.1", port)
            m = Metrics(d)
            print(f"  TCP all drained: a new connection ends with {end_how}; failed "
                  f"{m.value('ferry_proxy_connections_failed_total', service='web')}, refused "
                  f"{m.value('ferry_proxy_connections_refused_total', service='web')}", flush=True)
            with parts.part("TCP all drained: the open connection goes on, a new one is turned away"):
                held.echo(b"still forwarded")
                check(end_how in ("reset", "eof"), f"the new connection ended with {end_how}")
                check(conn_id is None or conn_id not in b.hellos, "it never reached a backend")
                check(m.value("ferry_proxy_connections_failed_total", service="web") +
                      m.value("ferry_proxy_connections_refused_total", service="web") >= 1,
                      "it is counted as failed or refused")
            held.finish()
            held.tally.check_against(b.wait_closed(held.id))
            for e in ends:
                steer(d, "web", e, "enable")
            with parts.part("TCP enabled again: new connections served"):
                got = landings(b, port, 4)
                check_eq(sorted(got), sorted(b.ports * 2), "round robin over both")
    parts.done()


@pytest.fixture(scope="module")
def steered_proxy():
    """One ferryd proxying "web" (round robin) to two loopback backends, for the tests of bad and
    good `backend` requests: each refusal test checks that what it sent changed nothing, so they
    share it; the socket is open to nobody (mode 0666 under a 0755 directory)."""
    w = Workdir()
    port = free_port()
    try:
        with backends(["127.0.0.1:0", "127.0.0.1:0"]) as (b,):
            ends = [b.endpoint(0), b.endpoint(1)]
            cfg = base_config(w, control={"socket": w.file("ctl/ferryd.sock"), "mode": "0666", "group": None},
                              services=[proxy_service(port, ends, balance="round_robin")])
            with running(w, cfg) as d:
                os.chmod(os.path.dirname(d.socket_path), 0o755)
                check(samples(d, "ferry_backend_weight"), "ferry_backend_weight is exported")
                yield types.SimpleNamespace(d=d, b=b, ends=ends, port=port)
    finally:
        w.cleanup()


def steering_state(d):
    """What a refused `backend` request must leave as it was: the services and the steering
    metrics."""
    return ok(d.request("services")), {f: samples(d, f) for f in ("ferry_backend_weight",
                                                                   "ferry_backend_admin_state")}


def check_nothing_changed(proxy, before):
    """The services and the steering metrics as `before` (steering_state before the requests),
    and the balancing as before any request."""
    d, b = proxy.d, proxy.b
    services, metrics = steering_state(d)
    check_eq(services, before[0], "services unchanged after the bad requests")
    check_eq(metrics, before[1], "the steering metrics unchanged")
    got = landings(b, proxy.port, 10)
    check_eq(sorted({p: got.count(p) for p in b.ports}.values()), [5, 5], "round robin as before")


def test_bad_backend_requests_are_refused_and_change_nothing(steered_proxy):
    """Every malformed `backend` request gets its error code and leaves the services, the
    metrics and the balancing as they were."""
    d, ends = steered_proxy.d, steered_proxy.ends
    before = steering_state(d)
    good = {"service": "web", "backend": ends[0]}
    cases = [
        ("unknown service", {"service": "nosuch", "backend": ends[0], "state": "drain"}, "not_found"),
        ("unknown backend", {"service": "web", "backend": "127.0.0.1:1", "state": "drain"}, "not_found"),
        ("backend not an address", {"service": "web", "backend": "nonsense", "state": "drain"}, None),
        ("bad state", {**good, "state": "maint"}, "bad_args"),
        ("state not a string", {**good, "state": 1}, "bad_args"),
        ("weight 257", {**good, "weight": 257}, "bad_args"),
        ("weight -1", {**good, "weight": -1}, "bad_args"),
        ("weight 'x'", {**good, "weight": "x"}, "bad_args"),
        ("weight 1.5", {**good, "weight": 1.5}, "bad_args"),
        ("weight null", {**good, "weight": None}, "bad_args"),
        ("unknown argument", {**good, "state": "drain", "colour": "blue"}, "bad_args"),
        ("no state and no weight", dict(good), "bad_args"),
        ("no service", {"backend": ends[0], "state": "drain"}, "bad_args"),
        ("no backend", {"service": "web", "state": "drain"}, "bad_args"),
        ("good state with a bad weight", {**good, "state": "drain", "weight": 300}, "bad_args"),
    ]
    with ControlClient(d.socket_path) as c:
        for what, args, code in cases:
            resp = c.request("backend", args)
            got = (resp.get("ok"), resp.get("error", {}).get("code"))
            if code is None:  # either not_found or bad_args is a fair answer
                check(got in ((False, "not_found"), (False, "bad_args")), f"{what}: {resp}")
            else:
                check_eq(got, (False, code), f"{what}: {args} -> {resp}")
            check(resp["error"].get("message"), f"{what}: a message says why: {resp}")
            print(f"  {what}: {resp['error']['code']}: {resp['error']['message']}", flush=True)
        resp = c.request("backend", ["web", ends[0], "drain"])
        check_eq((resp.get("ok"), resp.get("error", {}).get("code")), (False, "bad_args"),
                 f"args not an object: {resp}")
    check_nothing_changed(steered_proxy, before)


def test_backend_requests_from_nobody_are_refused_and_services_still_read(steered_proxy):
    d, ends = steered_proxy.d, steered_proxy.ends
    before = steering_state(d)
    nobody = pwd.getpwnam("nobody")
    for action in (["drain"], ["weight", "5"], ["enable"]):
        r = ferryctl(d, "--json", "backend", "web", ends[0], *action, user=nobody)
        check_eq(r.returncode, 4, f"backend {action} as nobody: exit ({r.stdout} {r.stderr})")
        check("permission_denied" in r.stdout + r.stderr, f"permission_denied: {r.stdout} {r.stderr}")
    r = ferryctl(d, "services", user=nobody)
    check_eq(r.returncode, 0, f"services as nobody still reads: {r.stderr}")
    check_nothing_changed(steered_proxy, before)


def test_ferryctl_backend_usage_errors_and_the_daemons_errors(steered_proxy):
    d, ends = steered_proxy.d, steered_proxy.ends
    before = steering_state(d)
    usage = [[], ["web"], ["web", ends[0]], ["web", ends[0], "pause"],
             ["web", ends[0], "weight"], ["web", ends[0], "weight", "x"],
             ["web", ends[0], "drain", "extra"], ["web", ends[0], "weight", "3", "4"],
             ["web", ends[0], "weight", "1.5"]]
    for words in usage:
        r = ferryctl(d, "backend", *words)
        check_eq(r.returncode, 2, f"ferryctl backend {' '.join(words)}: exit "
                 f"({r.stdout!r} {r.stderr!r})")
        check(r.stderr.startswith("ferryctl: "), f"a usage message: {r.stderr!r}")
    for words, code in ((["nosuch", ends[0], "drain"], "not_found"),
                        (["web", "127.0.0.1:1", "drain"], "not_found")):
        r = ferryctl(d, "backend", *words)
        check_eq(r.returncode, 1, f"ferryctl backend {' '.join(words)}: exit ({r.stderr!r})")
        check(f"ferryctl: {code}:" in r.stderr, f"the daemon's error: {r.stderr!r}")
    for words in (["web", ends[0], "weight", "257"], ["web", ends[0], "weight", "-1"]):
        r = ferryctl(d, "backend", *words)
        check(r.returncode == 2 or (r.returncode == 1 and "bad_args" in r.stderr),
              f"ferryctl backend {' '.join(words)}: a usage error or bad_args, got exit "
              f"{r.returncode} ({r.stderr!r})")
    check_nothing_changed(steered_proxy, before)


def test_good_backend_requests_answer_with_the_backends_state(steered_proxy):
    """The last of the file's tests on `steered_proxy`: it changes weights and states."""
    d, ends = steered_proxy.d, steered_proxy.ends
    good = {"service": "web", "backend": ends[0]}
    r = ferryctl(d, "backend", "web", ends[1], "weight", "4")
    check_eq(r.returncode, 0, f"ferryctl backend (human): {r.stderr}")
    print("  ferryctl backend web B weight 4:\n" + "\n".join("    " + l for l in r.stdout.splitlines()),
          flush=True)
    check("4" in r.stdout and ends[1] in r.stdout,
          f"the human answer names it and its weight: {r.stdout!r}")
    steer(d, "web", ends[1], "weight", "1")
    # And a good one answers with the backend's state.
    res = steer(d, "web", ends[0], "weight", "0")
    check_eq(res, {"service": "web", "backend": ends[0], "admin": "enabled", "weight": 0,
                   "configured_weight": 1, "health": "up", "takes_new_traffic": False},
             "weight 0's answer")
    res = ok(d.request("backend", {**good, "state": "enable", "weight": 1}), "state and weight")
    check_eq((res["admin"], res["weight"], res["takes_new_traffic"]), ("enabled", 1, True),
             f"state and weight at once {res}")
    # ferryctl services shows weight, admin state and health for every backend.
    steer(d, "web", ends[1], "drain")
    steer(d, "web", ends[0], "weight", "7")
    r = ferryctl(d, "--json", "services")
    check_eq(r.returncode, 0, f"ferryctl --json services {r.stderr}")
    rows = {x["address"]: x for x in json.loads(r.stdout)["result"]["services"][0]["backends"]}
    check_eq({a: (rows[a].get("weight"), rows[a].get("admin")) for a in ends},
             {ends[0]: (7, "enabled"), ends[1]: (1, "drain")}, "services --json weight, admin")
    r = ferryctl(d, "services")
    check_eq(r.returncode, 0, f"ferryctl services {r.stderr}")
    print("  ferryctl services:\n" + "\n".join("    " + l for l in r.stdout.splitlines()), flush=True)
    check("drain" in r.stdout and "7" in r.stdout.replace(ends[0], "").replace(ends[1], ""),
          f"the human table shows the drained backend's admin state and the weight 7:\n{r.stdout}")
