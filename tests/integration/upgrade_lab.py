"""The upgrade tests' lab (test_upgrade.py): the fast-path lab (fastpath_lab.Lab) with the fleet
lab's UDP backends (each reply names its backend) and numbered fixed-rate flow client, a TCP proxy
service on the gateway's client-side address with two proxy_peers backends (sha256 per direction
per connection), a TCP load process (long-lived echo streams and new connections at a fixed
rate, every byte checked), and the lineage of ferryd processes that upgrades make: each new
ferryd is the child of the one it replaces, so the test makes itself their subreaper to await
and reap every one of them and read its exit status.

Run as `python3 upgrade_lab.py tcp-load ...` (inside the client's namespace) it is that load."""
import asyncio
import contextlib
import ctypes
import json
import os
import signal
import socket
import sys
import threading
import time

from fastpath_lab import BACKENDS, CLIENT, GATEWAY_CLIENT_SIDE, PORT, VIP, Lab, fastpath_config, inside
from fleet_lab import BACKEND_SCRIPT, FLOW_CLIENT, FlowClient
from harness import (ControlClient, Daemon, Piped, TestFailure, check, check_eq, ferryctl, ok,
                     wait_until)
from proxy_peers import Backend, BlockingClient, Pattern, Tally, hello, hello_port, op, proxy_service

HERE = os.path.dirname(os.path.abspath(__file__))
TCP_PORT = 7600
HEALTH_PORT = 5301     # the fleet backends' UDP health responder (unused here)
SPARE_TCP_PORT = 7699  # the fleet backends' TCP echo (unused here)
# Connections the old ferryd accepted get this long after a handover; the test's streams last
# far less, so an old ferryd exits as soon as they end and none is cut by the drain.
DRAIN_TIMEOUT_MS = 3000
# The old ferryd must be gone within the drain plus this (its last TCP close and teardown).
GONE_MARGIN_S = 2.5

# The old ferryd's and the new one's log lines the kill tests time their kills by (they share
# the log file: the new one inherits the old one's stdout).
OFFER_LINE = "takeover: ferryd "          # ... (pid P) offers N descriptors: the new has the fds
SWAPPED_LINE = "g1: XDP link taken over, this ferryd's program swapped in"
FASTPATH_UP_LINE = "fast path: 2 workers over 2 interfaces"
SERVING_LINE = "takeover: serving in place of pid "
PAUSED_REBIND_LINE = "upgrade: the fast path was paused for the new ferryd; binding it again"

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper():
    """Orphans below this process (a new ferryd whose parent, the old one, exited) become its
    children instead of init's: the test reaps them and learns how they ended."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def proc_state(pid):
    """The state letter of /proc/PID/stat (R, S, Z...), or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def exited(pid):
    """True once no thread of `pid` runs any more (a thread group's leader is a zombie as soon as
    it exits itself, while its other threads may still be closing the process's files)."""
    state = proc_state(pid)
    if state is None:
        return True
    try:
        return state == "Z" and len(os.listdir(f"/proc/{pid}/task")) <= 1
    except FileNotFoundError:
        return True


def control_socket_refuses(path):
    """True when nothing listens on the control socket any more (connect is refused or the file
    is gone): what a ferryd starting afresh needs to take the path over."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(path)
        except (ConnectionRefusedError, FileNotFoundError):
            return True
        except OSError:
            return False
        return False


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise TestFailure(f"no VmRSS for pid {pid}")


class Lineage:
    """The ferryd serving the lab and every one before it. `pid` is the current one; ferryds
    started afresh (the first, and restarts after a failure) are harness Daemons, those an upgrade
    started are their descendants, which share their log file and notify socket."""

    def __init__(self, w, cfg_path, netns, name="ferryd"):
        self.w = w
        self.cfg_path = cfg_path
        self.netns = netns
        self.daemons = []
        self.exits = {}       # pid -> exit code (negative: killed by that signal), once reaped
        self.pids = []
        self.notified_main_pids = []
        self.start(name)

    def start(self, name):
        """Starts a ferryd afresh (the first, or a normal restart) and waits for READY=1; from
        then on its notify socket is read as it fills, as systemd reads it: a full datagram queue
        would block the sd_notify() of every ferryd of the lineage."""
        d = Daemon(self.w, self.cfg_path, netns=self.netns, name=name)
        self.daemons.append(d)
        d.wait_ready()
        self.pid = d.proc.pid
        self.pids.append(self.pid)
        threading.Thread(target=self._drain_notifications, args=(d.notify,), daemon=True).start()
        return d

    def _drain_notifications(self, n):
        n.sock.settimeout(0.2)
        while True:
            try:
                data = n.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return  # closed at cleanup
            fields = dict(l.split("=", 1) for l in data.decode().splitlines() if "=" in l)
            n.messages.append(fields)

    @property
    def daemon(self):
        """The Daemon whose log and notify socket the current ferryd shares."""
        return self.daemons[-1]

    @property
    def socket_path(self):
        return self.daemons[0].socket_path

    def request(self, cmd, args=None):
        with ControlClient(self.socket_path) as c:
            return c.request(cmd, args)

    def status(self):
        return ok(self.request("status"), "status")

    def ferryctl(self, *args, timeout=90):
        return ferryctl(self.socket_path, *args, timeout=timeout)

    def adopt(self, pid):
        self.pid = pid
        self.pids.append(pid)

    def exit_code(self, pid):
        """How `pid` ended: its exit code, "gone" for a process someone else reaped, or None
        while it runs (a zombie of another parent counts as ended)."""
        if pid in self.exits:
            return self.exits[pid]
        for d in self.daemons:
            if d.proc.pid == pid:
                rc = d.proc.poll()
                if rc is not None:
                    self.exits[pid] = rc
                return rc
        try:
            reaped, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return "gone" if exited(pid) else None
        if reaped == 0:
            return None
        self.exits[pid] = os.waitstatus_to_exitcode(status)
        return self.exits[pid]

    def alive(self, pid):
        return self.exit_code(pid) is None

    def wait_gone(self, pid, timeout, what="ferryd"):
        """Awaits the end of `pid` (polling /proc and waitpid every 5 ms); returns (seconds,
        exit code)."""
        started = time.monotonic()
        wait_until(lambda: not self.alive(pid), timeout, f"{what} (pid {pid}) to exit", interval=0.005)
        return time.monotonic() - started, self.exit_code(pid)

    def log(self):
        # The file itself: every ferryd of the lineage writes to it, and the first Daemon's handle
        # may be closed already.
        with open(self.daemon.log_path, errors="replace") as f:
            return f.read()

    def log_size(self):
        return os.path.getsize(self.daemon.log_path)

    def wait_log(self, needles, since, timeout, interval=0.0005):
        """Awaits a log line written after byte `since` holding one of `needles`; returns it."""
        path = self.daemon.log_path
        deadline = time.monotonic() + timeout
        with open(path, "rb") as f:
            f.seek(since)
            buf = b""
            while True:
                buf += f.read()
                lines = buf.split(b"\n")
                buf = lines.pop()
                for line in lines:
                    text = line.decode(errors="replace")
                    if any(n in text for n in needles):
                        return text
                if time.monotonic() > deadline:
                    raise TestFailure(f"no log line with {needles} within {timeout}s:\n"
                                      f"{self.log()[-3000:]}")
                time.sleep(interval)

    def main_pids_notified(self):
        """Every MAINPID= an old ferryd sent to the notify socket so far (systemd's view)."""
        return [int(m["MAINPID"]) for d in self.daemons for m in list(d.notify.messages)
                if "MAINPID" in m]

    def cleanup(self):
        """SIGTERM to the current ferryd (exit 0 expected, LeakSanitizer's check included),
        SIGKILL to any other of the lineage still running (a failure too), then the Daemons'
        own cleanup (sanitizer reports in the logs)."""
        problems = []
        current = self.pid
        if self.alive(current):
            os.kill(current, signal.SIGTERM)
            try:
                _, code = self.wait_gone(current, DRAIN_TIMEOUT_MS / 1000 + 15)
                if code not in (0, "gone"):
                    problems.append(f"ferryd {current} exited {code} after SIGTERM")
            except TestFailure as e:
                problems.append(str(e))
        for pid in self.pids:
            if self.alive(pid):
                problems.append(f"ferryd {pid} of the lineage still ran at cleanup")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(TestFailure):
                    self.wait_gone(pid, 5)
        for d in self.daemons:
            try:
                d.cleanup()
            except Exception as e:  # noqa: BLE001 (every daemon's report counts)
                problems.append(str(e))
        if problems:
            raise TestFailure("; ".join(problems) + f"\nlog:\n{self.log()[-4000:]}")


class UdpFlows(FlowClient):
    """fleet_lab's numbered flow client on this lab's VIP: `flows` sockets, one datagram each
    every `period` s; the replies name the backend that answered."""

    def __init__(self, lab, w, flows, base, period, name="flows"):
        Piped.__init__(self, lab.client, FLOW_CLIENT,
                       [VIP, PORT, CLIENT, flows, base, period, ",".join(BACKENDS)],
                       w.file(f"{name}.err"), name=name)
        self.w = w
        self.name = name
        self.ports = list(range(base, base + flows))
        self.period = period
        self.dumps = 0

    def dump(self):
        self.dumps += 1
        path = self.w.file(f"{self.name}-{self.dumps}.json")
        check_eq(self.cmd(f"dump {path}"), "dumped", f"{self.name} dump")
        with open(path) as f:
            out = json.load(f)
        os.unlink(path)
        return out

    def settled(self, lo, hi, settle_s=1.0):
        """The outcome of ticks lo+1..hi once their replies had `settle_s` to come back (returns
        as soon as every one has)."""
        deadline = time.monotonic() + settle_s
        while True:
            d = self.last_dump = self.dump()
            out = udp_outcome(d, lo, hi)
            if out["lost"] == 0 or time.monotonic() > deadline:
                return out
            time.sleep(0.02)


def udp_outcome(dump, lo, hi):
    """sent, answered, lost, the longest run of unanswered ticks on one flow (times the period:
    the longest outage a flow saw), the backends each flow was answered by, and the client's
    error counters, for ticks lo+1..hi of a dump."""
    sent = answered = 0
    longest = 0
    backends = {}
    for port, marks in dump["flows"].items():
        window = marks[lo:hi]
        sent += len(window)
        answered += sum(1 for c in window if c != ".")
        run = 0
        for c in window:
            run = run + 1 if c == "." else 0
            longest = max(longest, run)
        backends[port] = sorted(set(window) - {"."})
    return {"sent": sent, "answered": answered, "lost": sent - answered,
            "longest_gap_ms": round(longest * dump["period"] * 1000), "backends": backends,
            "stats": dump["stats"]}


class Rig:
    """The fast-path lab, its UDP backends, two TCP backends in the gateway namespace, and the
    config: UDP service "echo" on the VIP through the AF_XDP fast path, TCP proxy service "web"
    on GATEWAY_CLIENT_SIDE:TCP_PORT (the clients' frames pass the XDP program to the kernel)."""

    def __init__(self, w):
        self.w = w
        self.lab = Lab()
        self.tcp = []
        self.lineage = None
        self.loads = []
        self.checks = 0
        try:
            log = w.file("udp-backends.log")
            self.lab.spawn(self.lab.back, BACKEND_SCRIPT, str(PORT), str(HEALTH_PORT),
                           str(SPARE_TCP_PORT), *BACKENDS, log=log)
            wait_until(lambda: "ready" in open(log).read(), 10, "UDP backends")
            with inside(self.lab.gw):
                self.tcp = [Backend(), Backend()]
        except Exception:
            self.close()
            raise

    def config(self):
        cfg = fastpath_config(self.w)
        cfg["log"]["level"] = "info"
        cfg["services"].append(proxy_service(TCP_PORT, [b.endpoint() for b in self.tcp],
                                             vip=GATEWAY_CLIENT_SIDE))
        cfg["tcp"] = {"proxy": {"drain_timeout_ms": DRAIN_TIMEOUT_MS}}
        return cfg

    def start(self, cfg=None, name="ferryd"):
        path = self.w.write_config(cfg or self.config())
        self.lineage = Lineage(self.w, path, self.lab.gw.name, name=name)
        return self.lineage

    def udp_flows(self, flows, base, period=0.01, name="flows"):
        f = UdpFlows(self.lab, self.w, flows, base, period, name=name)
        self.loads.append(f)
        return f

    def tcp_load(self, **kw):
        t = TcpLoad(self, **kw)
        self.loads.append(t)
        return t

    def check_udp(self, what, ticks=25, complete=True):
        """A short numbered run of 4 flows through the VIP: every datagram answered (complete)
        or at least the last 10 ticks (a ferryd just started may still resolve its neighbours)."""
        self.checks += 1
        f = UdpFlows(self.lab, self.w, 4, 31000 + 10 * self.checks, 0.01, name=f"check{self.checks}")
        try:
            wait_until(lambda: f.dump()["seq"] >= ticks, 15, f"{what}: {ticks} UDP ticks sent", interval=0.05)
            out = f.settled(0, ticks)
        finally:
            f.stop()
            f.close()
        if complete:
            check_eq(out["lost"], 0, f"{what}: UDP datagrams unanswered {out}")
        else:
            check(out["answered"] > 0, f"{what}: UDP not served {out}")
        check_eq((out["stats"]["bad"], out["stats"]["malformed"]), (0, 0), f"{what}: bad UDP replies")
        return out

    def check_tcp(self, what):
        """One connection from the client through the proxy: an echo, a clean end, and the
        backend saw exactly these bytes."""
        with inside(self.lab.client):
            c = BlockingClient(GATEWAY_CLIENT_SIDE, TCP_PORT, timeout_s=10)
        try:
            c.echo(os.urandom(3000))
            c.finish()
        except Exception as e:
            raise TestFailure(f"{what}: TCP through the proxy failed: {e!r}") from e
        verify_far_end(self.tcp, [{"id": c.id, "out_bytes": c.tally.out_bytes,
                                   "in_bytes": c.tally.in_bytes, "out_sha": c.tally.out_sha.hexdigest(),
                                   "in_sha": c.tally.in_sha.hexdigest()}])

    def check_serving(self, what, complete=True):
        self.check_udp(what, complete=complete)
        self.check_tcp(what)

    def close(self):
        for load in self.loads:
            with contextlib.suppress(Exception):
                load.close()
        try:
            if self.lineage:
                self.lineage.cleanup()
        finally:
            for b in self.tcp:
                with contextlib.suppress(Exception):
                    b.stop()
            self.lab.close()


def verify_far_end(backends, records, timeout_s=10.0):
    """Each record's bytes, both ways, are what the backend that took the connection saw
    (proxy_peers' sha256 per direction); returns the bytes verified."""
    by_port = {p: b for b in backends for p in b.ports}
    verified = 0
    for r in records:
        port = hello_port(backends, r["id"], timeout_s)
        far = by_port[port].wait_closed(r["id"], timeout_s)
        check_eq((far["in_bytes"], far["in_sha"], far["out_bytes"], far["out_sha"]),
                 (r["out_bytes"], r["out_sha"], r["in_bytes"], r["in_sha"]),
                 f"connection {r['id']}: bytes and sha256 at the backend (client->backend, "
                 f"backend->client); the backend's end: {far['end']}")
        check_eq(far["end"], "eof", f"connection {r['id']}: how it ended at the backend")
        verified += r["out_bytes"] + r["in_bytes"]
    return verified


class TcpLoad(Piped):
    """The TCP load in the client's namespace (tcp_load_main): `streams` connections each
    echoing `chunk` bytes every `period` s for `lifetime` s and then ending cleanly, one after
    the other; and `rate` new connections a second, each one echo of 600 bytes. "started" once
    every stream has connected; "stop" ends it (streams finish their connection) and writes every
    connection's record."""

    def __init__(self, rig, streams=4, lifetime=1.0, chunk=8192, period=0.01, rate=20):
        self.out = rig.w.file(f"tcp-load-{len(rig.loads)}.json")
        script = (f"import sys; sys.path.insert(0, {HERE!r}); import upgrade_lab; "
                  "upgrade_lab.tcp_load_main(sys.argv[1:])")
        super().__init__(rig.lab.client, script,
                         [GATEWAY_CLIENT_SIDE, TCP_PORT, streams, lifetime, chunk, period, rate, self.out],
                         rig.w.file(f"tcp-load-{len(rig.loads)}.err"), name="tcp load")
        check_eq(self.read_line(30), "started", "TCP load started")

    def stop(self):
        check_eq(self.cmd("stop", timeout=60), "stopped", "TCP load stopped")
        self.proc.wait(timeout=10)
        with open(self.out) as f:
            return json.load(f)


def summarize_tcp(records, backends):
    """Outcome counts per kind, far-end verification of every connection that ended well."""
    out = {}
    for kind in ("stream", "new"):
        rs = [r for r in records if r["kind"] == kind]
        ends = {}
        for r in rs:
            ends[r["result"]] = ends.get(r["result"], 0) + 1
        good = [r for r in rs if r["result"] == "ok"]
        out[kind] = {"total": len(rs), "ends": ends,
                     "bytes_verified": verify_far_end(backends, good),
                     "failures": [r for r in rs if r["result"] != "ok"][:5]}
    return out


# ---------------------------------------------------------------- the TCP load (its own process)

def tcp_load_main(argv):
    host, port = argv[0], int(argv[1])
    streams, lifetime, chunk = int(argv[2]), float(argv[3]), int(argv[4])
    period, rate, out_path = float(argv[5]), float(argv[6]), argv[7]
    records = []
    pattern = Pattern(7)

    def result_of(exc):
        if isinstance(exc, ConnectionRefusedError):
            return "refused"
        if isinstance(exc, ConnectionResetError):
            return "reset"
        if isinstance(exc, asyncio.IncompleteReadError):
            return "eof"
        if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
            return "timeout"
        return f"{type(exc).__name__}: {exc}"

    async def connection(kind, stop, first_echo=None):
        tally = Tally()
        rec = {"kind": kind, "id": tally.id, "start": time.monotonic(), "echoes": 0}
        writer = None
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 5)
            writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            async def send(data):
                writer.write(data)
                tally.sent(data)
                await writer.drain()

            async def echo(n):
                payload = pattern.payload(n)
                await send(op("E", n) + payload)
                got = await asyncio.wait_for(reader.readexactly(n), 10)
                tally.received(got)
                if got != payload:
                    raise ValueError(f"echo of {n} bytes came back different")
                rec["echoes"] += 1

            await send(hello(tally.id))
            if kind == "new":
                await echo(600)
            else:
                await echo(chunk)
                if first_echo:
                    first_echo.set()
                deadline = rec["start"] + lifetime
                while time.monotonic() < deadline and not stop.is_set():
                    await asyncio.sleep(period)
                    await echo(chunk)
            writer.write_eof()
            tail = await asyncio.wait_for(reader.read(1), 10)
            if tail:
                raise ValueError(f"data after the last echo: {tail!r}")
            rec["result"] = "ok"
        except Exception as e:  # noqa: BLE001 (every end is a result)
            rec["result"] = result_of(e)
        finally:
            if writer is not None:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
            rec.update(end=time.monotonic(), out_bytes=tally.out_bytes, in_bytes=tally.in_bytes,
                       out_sha=tally.out_sha.hexdigest(), in_sha=tally.in_sha.hexdigest())
            records.append(rec)

    async def stream(stop, first_echo):
        while not stop.is_set():
            await connection("stream", stop, first_echo)
            first_echo = None

    async def main():
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        def read_stdin():
            for line in sys.stdin:
                if line.strip() == "stop":
                    break
            loop.call_soon_threadsafe(stop.set)
        threading.Thread(target=read_stdin, daemon=True).start()
        firsts = [asyncio.Event() for _ in range(streams)]
        tasks = [asyncio.ensure_future(stream(stop, e)) for e in firsts]
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in firsts)), 30)
        print("started", flush=True)
        news = []
        next_at = time.monotonic()
        while not stop.is_set():
            news.append(asyncio.ensure_future(connection("new", stop)))
            next_at += 1.0 / rate
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, next_at - time.monotonic()))
        await asyncio.gather(*tasks, *news)
        with open(out_path + ".tmp", "w") as f:
            json.dump(records, f)
        os.rename(out_path + ".tmp", out_path)
        print("stopped", flush=True)

    asyncio.run(main())


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "tcp-load":
        tcp_load_main(sys.argv[2:])
    else:
        sys.exit(f"usage: {sys.argv[0]} tcp-load HOST PORT STREAMS LIFETIME_S CHUNK PERIOD_S RATE OUT")
