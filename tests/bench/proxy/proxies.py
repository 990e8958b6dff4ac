"""The proxies the TCP proxy benchmarks run (proxy_bench.py, streams.py, pinned.py): ferryd,
HAProxy and nginx stream from config templates beside this file, each started fresh with the same
worker count, and the /proc readings over their process trees (CPU, memory, fds) and over the
machine. KINDS names every variant a bench can ask for.
"""
import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from harness import Notifications  # noqa: E402  (the sd_notify end ferryd reports READY=1 to)

CLK_TCK = os.sysconf("SC_CLK_TCK")
GIB = 1 << 30


# ---------------------------------------------------------------------------------------------
# /proc readings over a process tree


def process_tree(root_pid):
    """root_pid and all its descendants (nginx: master and workers)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / CLK_TCK


def proc_kib(path, key):
    """The kB figure of `key` in a /proc file of "Key:   N kB" lines; 0 when it is not there."""
    with open(path) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def status_kib(pid, key):
    return proc_kib(f"/proc/{pid}/status", key)


def pss_kib(pid):
    return proc_kib(f"/proc/{pid}/smaps_rollup", "Pss")


def memory_kib(pids):
    return (sum(status_kib(p, "VmRSS") for p in pids), sum(pss_kib(p) for p in pids))


def open_fds(pids):
    return sum(len(os.listdir(f"/proc/{p}/fd")) for p in pids)


def machine_busy():
    """(busy, total, softirq) jiffies of the whole machine, to show how loaded it was during a
    load and how much of it was softirq work no process is charged for. Busy is the wall time
    times the CPUs less the idle time: the kernel accounts idle time exactly (NO_HZ), but busy
    time only by ticks, and the ticks miss most of a CPU that sleeps and wakes thousands of times
    a second (a proxy pinned to one CPU at 13 Gbit/s: 2.2 s by ticks, 3.4 s by wall less idle,
    and its own utime + stime 3.3 s)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    total = round(time.monotonic() * CLK_TCK * (os.cpu_count() or 1))
    # Not busy: idle, iowait, and steal (the host ran something else on this vCPU).
    return total - values[3] - values[4] - values[7], total, values[6]


def ksoftirqd_pids():
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as f:
                    if f.read().startswith("ksoftirqd/"):
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


def prioritize(nice):
    """With sched_autogroup on, a nice value only ranks processes inside their session's group,
    and every session's group gets an equal share: on a machine shared with other sessions a
    niced run still gets 1/sessions of the CPUs. So the run takes its own session (a fresh
    autogroup) and gives that group the nice value too."""
    try:
        if os.getsid(0) != os.getpid():
            os.setsid()
    except PermissionError:
        raise SystemExit(f"{os.path.basename(sys.argv[0])}: already a process group leader; "
                         "start it with setsid -w (run.sh does) or pass --nice 0")
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
    except OSError as e:
        print(f"{os.path.basename(sys.argv[0])}: cannot set the autogroup's nice ({e}); only the "
              "processes' own", file=sys.stderr)
    os.nice(nice)


def reported_port(proc, what):
    """The port a bench tool (proxy-backend, floor-proxy) prints first, as "port N"."""
    line = proc.stdout.readline().split()
    if len(line) != 2 or line[0] != "port":
        raise RuntimeError(f"{what} did not report its port (it printed {' '.join(line)!r})")
    return int(line[1])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# The proxies


def fill(template, values):
    with open(os.path.join(HERE, template)) as f:
        text = f.read()
    for key, value in values.items():
        text = text.replace(f"@{key}@", str(value))
    left = re.findall(r"@[A-Z_]+@", text)
    if left:
        raise SystemExit(f"{template}: placeholders left unfilled: {sorted(set(left))}")
    return text


class Proxy:
    """One running proxy instance: start() returns the port clients connect to."""

    name = ""
    idle_test = True

    def __init__(self, workdir, workers, backend_port, maxconn, nofile):
        self.workdir = workdir
        self.workers = workers
        self.backend_port = backend_port
        self.maxconn = maxconn
        self.nofile = nofile
        self.proc = None
        self.port = None
        self.log_path = os.path.join(workdir, f"{self.name}.log")

    def values(self):
        return {"WORKERS": self.workers, "LISTEN_PORT": self.port, "BACKEND_PORT": self.backend_port,
                "MAXCONN": self.maxconn, "NOFILE": self.nofile,
                "WORKER_CONNECTIONS": self.nofile - 32,
                "PIDFILE": os.path.join(self.workdir, f"{self.name}.pid"),
                "ERROR_LOG": self.log_path,
                "CONTROL_SOCKET": os.path.join(self.workdir, "ferryd.sock"),
                "SPLICE": ""}

    def write(self, template, name):
        path = os.path.join(self.workdir, name)
        with open(path, "w") as f:
            f.write(fill(template, self.values()))
        os.chmod(path, 0o644)
        return path

    def pids(self):
        return process_tree(self.proc.pid) if self.proc else []

    def wait_listening(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: {self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.name} does not listen on {self.port} within {timeout}s; its "
                           f"log ends: {self.log()}")

    def log(self):
        try:
            with open(self.log_path) as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def stop(self):
        if not self.proc:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                for pid in reversed(self.pids()):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                self.proc.wait()
        self.proc = None


class Direct(Proxy):
    """No proxy: the load talks to the backend itself (the kernel-bound reference)."""

    name = "direct"

    def start(self):
        self.port = self.backend_port
        return self.port

    def pids(self):
        return []


class HAProxy(Proxy):
    name = "haproxy"

    def start(self):
        self.port = free_port()
        cfg = self.write("haproxy.cfg.in", "haproxy.cfg")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(["haproxy", "-db", "-f", cfg], stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.wait_listening()
        return self.port


class HAProxySplice(HAProxy):
    """HAProxy with `option splice-auto`: its fastest way to move bulk bytes on Linux. Each pipe
    costs two descriptors (maxpipes defaults to maxconn/4), so under the 20,000-descriptor limit
    it gets a smaller maxconn and no idle test (splice changes nothing for idle connections)."""

    name = "haproxy-splice"
    idle_test = False

    def values(self):
        return dict(super().values(), SPLICE="option splice-auto", MAXCONN=7000)


class Nginx(Proxy):
    name = "nginx"

    def start(self):
        self.port = free_port()
        cfg = self.write("nginx.conf.in", "nginx.conf")
        with open(os.path.join(self.workdir, "nginx.stdout"), "w") as out:
            self.proc = subprocess.Popen(["nginx", "-p", self.workdir + "/", "-c", cfg,
                                          "-e", self.log_path], stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.wait_listening()
        deadline = time.monotonic() + 10  # the workers are forked after the listener exists
        while len(self.pids()) < 1 + self.workers and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.port

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful: the master waits for its workers
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        super().stop()


class Ferry(Proxy):
    name = "ferry"
    binary = None
    env = {}  # added to ferryd's environment
    tcp_sections = {}  # sections of the config's "tcp" object to replace: name -> value

    def write(self, template, name):
        path = super().write(template, name)
        if self.tcp_sections:
            with open(path) as f:
                cfg = json.loads("\n".join(l for l in f if not l.lstrip().startswith("//")))
            cfg["tcp"].update(self.tcp_sections)
            with open(path, "w") as f:
                json.dump(cfg, f, indent=2)
        return path

    def start(self):
        self.port = free_port()
        cfg = self.write("ferryd.json.in", "ferryd.json")
        notify_path = os.path.join(self.workdir, "ferryd.notify")
        if os.path.exists(notify_path):
            os.unlink(notify_path)
        self.notify = Notifications(notify_path)
        env = dict(os.environ, NOTIFY_SOCKET=notify_path, **self.env)
        env.pop("JOURNAL_STREAM", None)
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen([self.binary, "--config", cfg], stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env)
        deadline = time.monotonic() + 15
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ferryd exited with {self.proc.returncode}: {self.log()}")
            try:
                self.notify.wait_for("READY", timeout=0.2)
                break
            except AssertionError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"ferryd not READY within 15 s: {self.log()}")
        self.wait_listening()
        return self.port

    def stop(self):
        super().stop()
        if getattr(self, "notify", None):
            self.notify.close()
            self.notify = None


class FerryBigRing(Ferry):
    """ferry with tcp.buffers.count 4096 (64 MiB of 16 KiB buffers per worker): with the
    runtime's 64 KiB credit per armed recv, 1024 recvs per worker instead of 64."""

    name = "ferry-ring4096"
    tcp_sections = {"buffers": {"count": 4096}}


class FerryNoCredit(Ferry):
    """ferry with the ring credit off (tcp.buffers.recv_credit_bytes 0): a recv may take the whole
    ring and parks on ENOBUFS, the behaviour before the credit was on by default."""

    name = "ferry-nocredit"
    tcp_sections = {"buffers": {"recv_credit_bytes": 0}}


class FerryB(Ferry):
    """A second ferryd (--ferryd-b) with the same config: an A/B of two builds in one run."""

    name = "ferry-b"
    binary = None


class FerryNoStreamGrowth(Ferry):
    """ferry with FERRY_URING_NO_STREAM_GROWTH=1: every recv stays within the ring credit's cap
    (64 KiB), as before streams grew their recvs past it (to the high-water mark)."""

    name = "ferry-nogrowth"
    env = {"FERRY_URING_NO_STREAM_GROWTH": "1"}


class FerryRing64(Ferry):
    """ferry with tcp.buffers.count 64 (1 MiB of 16 KiB buffers per worker): the buffers the
    kernel cycles through in order stay few enough to be in cache when they are reused."""

    name = "ferry-ring64"
    tcp_sections = {"buffers": {"count": 64}}


class FerryNoDeferTaskrun(Ferry):
    """ferry with FERRY_URING_NO_DEFER_TASKRUN=1: the workers' rings without SINGLE_ISSUER |
    DEFER_TASKRUN, as on a kernel before 6.1 (task work runs on any syscall)."""

    name = "ferry-nodefer"
    env = {"FERRY_URING_NO_DEFER_TASKRUN": "1"}


class FerryRing512(Ferry):
    """ferry with tcp.buffers.count 512 (8 MiB of 16 KiB buffers per worker): room for four
    streams' recvs of the whole 1 MiB high-water mark at once."""

    name = "ferry-ring512"
    tcp_sections = {"buffers": {"count": 512}}


class Floor(Proxy):
    """floor-proxy (floor_proxy.cc): a forwarder that does nothing but move the bytes. Its ratio to
    a peer is what a proxy with no work of its own reaches on a shape, in the floor's way of
    moving them (a proxy that moves them better, as ferry does on 64 KiB, gets further); ferry's
    distance to it is ferry's own work plus how it moves them. Built beside ferryd
    (-Dbench=true)."""

    name = "floor-uring"
    mode = "uring"
    args = []
    binary = None
    idle_test = False

    def start(self):
        if not self.binary or not os.path.exists(self.binary):
            raise RuntimeError(f"no floor-proxy at {self.binary}: build with -Dbench=true")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen([self.binary, "--backend", str(self.backend_port),
                                          "--threads", str(self.workers), "--mode", self.mode]
                                         + self.args,
                                         stdout=subprocess.PIPE, stderr=log, text=True,
                                         stdin=subprocess.DEVNULL)
        try:
            self.port = reported_port(self.proc, "floor-proxy")
        except RuntimeError as e:
            raise RuntimeError(f"{e}: {self.log()}") from e
        self.wait_listening()
        return self.port


class FloorFixed(Floor):
    """floor-proxy --fixed-files: its recvs and sends name the sockets by registered slot, so no
    request takes the fd table's reference (what registered files could save a proxy at most)."""

    name = "floor-fixed"
    args = ["--fixed-files"]


class FloorEpoll(Floor):
    """floor-proxy --mode epoll: the least an epoll proxy (HAProxy's and nginx's kind) can cost."""

    name = "floor-epoll"
    mode = "epoll"


def use_builds(ferryd, ferryd_b=None):
    """The binaries the kinds run: ferryd (and a second build for ferry-b), and the floor-proxy
    built in the same build directory as ferryd."""
    Ferry.binary = ferryd
    FerryB.binary = ferryd_b
    build = os.path.dirname(os.path.dirname(os.path.abspath(ferryd)))
    Floor.binary = os.path.join(build, "tests", "bench", "proxy", "floor-proxy")


KINDS = {"direct": Direct, "floor-uring": Floor, "floor-fixed": FloorFixed,
         "floor-epoll": FloorEpoll, "ferry-ring512": FerryRing512, "ferry-b": FerryB, "ferry-nogrowth": FerryNoStreamGrowth, "ferry-nodefer": FerryNoDeferTaskrun,
         "ferry-ring64": FerryRing64, "ferry-ring4096": FerryBigRing, "ferry-nocredit": FerryNoCredit, "ferry": Ferry, "haproxy": HAProxy, "haproxy-splice": HAProxySplice,
         "nginx": Nginx}


def machine():
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} CPUs ({model}), {round(os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / GIB)} GiB, kernel {platform.release()}"
