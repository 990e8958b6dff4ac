"""systemd/ferryd.service: systemd-analyze accepts it, docs/operations.md shows its current
security exposure, and what it grants is exactly enough. The unit's identity, capabilities,
memlock limit and no_new_privs are applied with prlimit + setpriv, as the service manager would,
to the ferryd under test (build-asan's too) running XDP, AF_XDP and an io_uring TCP service on a
privileged port in the fast-path lab: it must serve all of them, reload, and stop cleanly;
without any one of the capabilities, or with a memlock limit below its UMEM, it must refuse to
start; and every system call it makes must pass the unit's SystemCallFilter.
test_systemd_boot.py runs the packaged unit under a real systemd as PID 1; what stays here is
what that cannot show: each capability taken away in turn (with the full set as its positive
control, on two ports balancing to backends), the limit below the UMEM, and the strace of every
system call, socket family and path against the filters."""
import json
import os
import pwd
import re
import resource
import shutil
import signal
import subprocess
import sys
import time

from harness import (FERRYD, SOURCE_ROOT, ControlClient, Notifications, TestFailure, check, check_eq,
                     ok)
from netns import xdp_attached
from test_fastpath import fastpath_config

UNIT = os.path.join(SOURCE_ROOT, "systemd", "ferryd.service")
OPERATIONS_MD = os.path.join(SOURCE_ROOT, "docs", "operations.md")
TCP_PORT = 80  # below 1024: the unit's CAP_NET_BIND_SERVICE is what lets ferryd listen here
TCP_VIP = "10.10.1.1"  # the gateway's own address on the client side
# The lab's UMEM: 2048 x 2048 bytes = 4 MiB, small enough to fit under the memlock hard limit of
# a container without CAP_SYS_RESOURCE (8 MiB here), where LimitMEMLOCK=infinity cannot be
# reproduced; SMALL_MEMLOCK is below it, as systemd's 8 MiB default is below the default 64 MiB.
UMEM = {"frames": 2048, "frame_bytes": 2048}
SMALL_MEMLOCK = 1 << 20


def granted_memlock():
    """What LimitMEMLOCK=infinity becomes here: unlimited, or the hard limit if we cannot raise
    it (a container without CAP_SYS_RESOURCE)."""
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    return "unlimited" if hard == resource.RLIM_INFINITY else str(hard)


def unit_settings(path=UNIT):
    """{key: [values...]} of the [Service] section, in file order."""
    settings, section = {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("["):
                section = line
                continue
            if section == "[Service]":
                key, value = line.split("=", 1)
                settings.setdefault(key, []).append(value)
    return settings


def unit_caps(settings):
    bounding = " ".join(settings["CapabilityBoundingSet"]).split()
    ambient = " ".join(settings["AmbientCapabilities"]).split()
    return bounding, ambient


def service_uid():
    """The ferry user when it exists (the package creates it), else an unused uid: the point is a
    uid that owns nothing and is not root."""
    try:
        p = pwd.getpwnam(settings_user())
        return p.pw_uid, p.pw_gid
    except KeyError:
        uid = 61000
        while True:
            try:
                pwd.getpwuid(uid)
                uid += 1
            except KeyError:
                return uid, uid


def settings_user():
    return unit_settings()["User"][0]


def setpriv_caps(caps):
    return ",".join(["-all"] + ["+" + c.lower().removeprefix("cap_") for c in caps])


def write_unit_for_build(w):
    """The unit with ExecStart pointing at the built ferryd, and the man pages it names where man
    finds them."""
    with open(UNIT) as f:
        text = f.read().replace("/usr/sbin/ferryd", FERRYD)
    path = w.file("ferryd.service")
    with open(path, "w") as f:
        f.write(text)
    for name, section in (("ferryd.8", "8"), ("ferryctl.8", "8"), ("ferryd.json.5", "5")):
        os.makedirs(w.file(f"man/man{section}"), exist_ok=True)
        shutil.copy(os.path.join(SOURCE_ROOT, "man", name), w.file(f"man/man{section}/{name}"))
    return path


def test_unit_passes_systemd_analyze_verify(workdir):
    path = write_unit_for_build(workdir)
    r = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, MANPATH=workdir.file("man"), SYSTEMD_LOG_LEVEL="notice"))
    check_eq(r.returncode, 0, f"systemd-analyze verify: {r.stdout} {r.stderr}")
    check_eq(r.stderr.strip() + r.stdout.strip(), "", "systemd-analyze verify says nothing")


def test_operations_md_shows_the_current_security_exposure(workdir):
    path = write_unit_for_build(workdir)
    r = subprocess.run(["systemd-analyze", "security", "--offline=true", "--no-pager", path],
                       capture_output=True, text=True, timeout=60)
    check_eq(r.returncode, 0, f"systemd-analyze security: {r.stderr}")
    m = re.search(r"Overall exposure level for ferryd\.service: ([0-9.]+) (\w+)", r.stdout)
    check(m, f"exposure line in {r.stdout[-300:]!r}")
    with open(OPERATIONS_MD) as f:
        doc = f.read()
    line = f"Overall exposure level for ferryd.service: {m.group(1)} {m.group(2)}"
    check(line in doc, f"docs/operations.md shows the current exposure: '{line}'")
    check(float(m.group(1)) <= 3.0, f"exposure {m.group(1)} stays at most 3.0")


def first_error(log):
    """ferryd's own first error line (not libbpf's chatter, not the closing 'could not start')."""
    for line in log.splitlines():
        m = re.search(r"Z error\s+(.*)", line)
        if m and "could not start" not in m.group(1):
            return m.group(1)
    return log.strip().splitlines()[-1] if log.strip() else "(no output)"


# The unit's mount-namespace directives, as systemd sets them up: ProtectSystem=strict (/ read-only,
# only the RuntimeDirectory= writable), ProtectKernelTunables= (/sys read-only), ProcSubset=pid and
# ProtectProc=invisible (a proc instance with only process directories, others' hidden).
# PrivateTmp= and ProtectHome= are checked on the trace instead (ferryd's own files live in /tmp).
SANDBOX = ('mount --bind "$0" "$0" && mount -o remount,bind,ro / && mount -o remount,bind,ro /sys && '
           'mount -t proc -o subset=pid,hidepid=invisible proc /proc && exec "$@"')


class ConfinedFerryd:
    """ferryd in the gateway namespace with the unit's file-system view, uid, capabilities,
    memlock limit and no_new_privs; `prefix` goes between setpriv and ferryd (strace)."""

    runs = 0

    def __init__(self, w, lab, cfg_path, caps, memlock, prefix=()):
        uid, gid = service_uid()
        ConfinedFerryd.runs += 1
        self.log_path = w.file(f"confined-{self.runs}.log")
        self.notify = Notifications(w.file(f"confined-{self.runs}.notify"))
        os.chmod(self.notify.path, 0o777)  # the service uid sends READY=1 to it
        env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
        env["NOTIFY_SOCKET"] = self.notify.path
        if prefix:  # LeakSanitizer cannot stop the threads of a traced process (a sanitized build)
            env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
        self.log_file = open(self.log_path, "w")
        run_dir = os.path.dirname(cfg_socket(cfg_path))
        cmd = ["ip", "netns", "exec", lab.gw.name,
               "unshare", "--mount", "--propagation", "private", "sh", "-c", SANDBOX, run_dir,
               "prlimit", f"--memlock={memlock}", "--",
               "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs",
               f"--inh-caps={setpriv_caps(caps)}", f"--ambient-caps={setpriv_caps(caps)}",
               f"--bounding-set={setpriv_caps(caps)}", "--", *prefix, FERRYD, "--config", cfg_path]
        self.prefix = prefix
        self.proc = subprocess.Popen(cmd, stdout=self.log_file, stderr=subprocess.STDOUT, env=env)

    def log(self):
        self.log_file.flush()
        with open(self.log_path) as f:
            return f.read()

    def wait_ready_or_exit(self, timeout=30.0):
        """'ready', or the exit status if ferryd ended first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return self.proc.returncode
            try:
                self.notify.wait_for("READY", timeout=0.2)
                return "ready"
            except TestFailure:
                continue
        raise TestFailure(f"ferryd neither ready nor gone within {timeout}s:\n{self.log()}")

    def daemon_pid(self):
        """ferryd's pid: ip netns exec, prlimit and setpriv exec into the next program, so it is
        the Popen pid, or its child when strace sits in between."""
        if not self.prefix:
            return self.proc.pid
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
            return int(f.read().split()[0])

    def stop(self):
        os.kill(self.daemon_pid(), signal.SIGTERM)
        return self.proc.wait(timeout=30)

    def close(self):
        if self.proc.poll() is None:
            try:
                os.kill(self.daemon_pid(), signal.SIGKILL)  # strace would leave it running
            except (OSError, IndexError, ValueError):
                pass
            self.proc.kill()
            self.proc.wait()
        self.log_file.close()
        self.notify.close()


def lab_config(w):
    """The fast-path lab's config plus an io_uring echo service on a privileged port; the
    control socket in a directory the service uid owns, as RuntimeDirectory= provides."""
    uid, gid = service_uid()
    run_dir = w.file("run")
    os.makedirs(run_dir, mode=0o750, exist_ok=True)
    os.chown(run_dir, uid, gid)
    cfg = fastpath_config(w)
    cfg["control"] = {"socket": os.path.join(run_dir, "ferryd.sock"), "mode": "0660", "group": None}
    cfg["log"] = {"level": "info"}
    cfg["services"].append({"name": "tcp-echo", "vip": TCP_VIP, "port": TCP_PORT,
                            "protocols": ["tcp"], "mode": "echo"})
    cfg["tcp"] = {"workers": 1}
    cfg["xdp"]["umem"] = UMEM
    return w.write_config(cfg), cfg["control"]["socket"]


def cfg_socket(cfg_path):
    with open(cfg_path) as f:
        return json.load(f)["control"]["socket"]


TCP_ECHO_CLIENT = r"""
import socket, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10) as s:
    s.sendall(b"ferry-unit-check")
    got = b""
    while len(got) < 16:
        chunk = s.recv(64)
        if not chunk: break
        got += chunk
print(got.decode())
"""


def run_confined(w, lab, caps, memlock, prefix=()):
    """Starts the confined ferryd in the fast-path lab; returns (daemon, ready-or-exit-status,
    control socket)."""
    cfg_path, sock = lab_config(w)
    d = ConfinedFerryd(w, lab, cfg_path, caps, memlock, prefix)
    return d, d.wait_ready_or_exit(), sock


def test_unit_grants_enough_for_xdp_afxdp_and_io_uring(workdir, fastpath_lab):
    lab = fastpath_lab
    _, ambient = unit_caps(unit_settings())
    d, state, sock = run_confined(workdir, lab, ambient, granted_memlock())
    try:
        check_eq(state, "ready", f"ferryd with the unit's privileges starts:\n{d.log()}")
        check(xdp_attached(lab.gw, "g0") and xdp_attached(lab.gw, "g1"), "XDP on both ports")
        res = lab.converse("unit", flows=6, rounds=1)
        check_eq(res["ok"], 6, f"UDP through AF_XDP: {res}")
        r = lab.client.run("timeout", "20", sys.executable, "-c", TCP_ECHO_CLIENT, TCP_VIP, str(TCP_PORT),
                           check=False)
        check_eq(r.stdout.strip(), "ferry-unit-check", f"TCP echo on port {TCP_PORT}: {r.stderr}")
        with ControlClient(sock) as c:
            ok(c.request("reload"), "reload with the unit's privileges")
            status = ok(c.request("status"), "status")
        check_eq(status.get("pid"), d.daemon_pid(), "pid in status")
        check_eq(d.stop(), 0, f"exit status after SIGTERM:\n{d.log()}")
        check(not xdp_attached(lab.gw, "g0"), "XDP detached after stop")
        # Pinning its own worker threads needs no CAP_SYS_NICE: no "pinning ..." warning.
        check("pinning" not in d.log(), f"workers pinned without a warning:\n{d.log()}")
    finally:
        d.close()


def refused_start_log(w, lab, caps, memlock, what):
    """Runs the confined ferryd expecting it to refuse to start; returns its log, or None if it
    started after all."""
    d, state, _ = run_confined(w, lab, caps, memlock)
    try:
        log = d.log()
        if state == "ready":
            return None
        check_eq(state, 1, f"exit status {what}:\n{log}")
        check("ferryd could not start" in log, f"{what} ferryd says why:\n{log}")
        print(f"  {what}: {first_error(log)}")
        return log
    finally:
        d.close()


def test_each_granted_capability_is_needed(workdir, fastpath_lab):
    _, ambient = unit_caps(unit_settings())
    started = [cap for cap in ambient
               if refused_start_log(workdir, fastpath_lab, [c for c in ambient if c != cap],
                                    granted_memlock(), f"without {cap}") is None]
    check(not started, f"ferryd started without {started}: the unit grants more than it needs")


def test_a_memlock_limit_below_the_umem_is_not_enough(workdir, fastpath_lab):
    _, ambient = unit_caps(unit_settings())
    check_eq(unit_settings()["LimitMEMLOCK"], ["infinity"], "LimitMEMLOCK")
    log = refused_start_log(workdir, fastpath_lab, ambient, str(SMALL_MEMLOCK), "with memlock 1 MiB")
    check(log is not None, "with a 1 MiB memlock limit the 4 MiB UMEM cannot be registered")
    check("No buffer space available" in log, f"the UMEM registration is what fails:\n{log}")


def syscall_groups():
    """{'@group': [members...]} as this systemd defines them."""
    out = subprocess.run(["systemd-analyze", "syscall-filter", "--no-pager"], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    groups, current = {}, None
    for line in out.splitlines():
        if line.startswith("@"):
            current = line.strip()
            groups[current] = []
        elif current and line.strip() and not line.strip().startswith("#"):
            groups[current].append(line.strip())
    return groups


def allowed_syscalls(filters):
    groups = syscall_groups()
    allowed = set()

    def add(name):
        if name.startswith("@"):
            for member in groups[name]:
                add(member)
        else:
            allowed.add(name)
    for entry in filters:
        check(not entry.startswith("~"), f"an allow list, not a deny list: {entry}")
        for name in entry.split():
            add(name)
    return allowed


def test_every_syscall_passes_the_unit_filter(workdir, fastpath_lab):
    lab = fastpath_lab
    settings = unit_settings()
    _, ambient = unit_caps(settings)
    allowed = allowed_syscalls(settings["SystemCallFilter"])
    trace = workdir.file("run/ferryd.strace")  # written by the service uid, in the dir it owns
    d, state, sock = run_confined(workdir, lab, ambient, granted_memlock(),
                                  prefix=("strace", "-f", "-qq", "-o", trace))
    try:
        check_eq(state, "ready", f"ferryd under strace starts:\n{d.log()}")
        check_eq(lab.converse("trace", flows=4, rounds=1)["ok"], 4, "UDP through AF_XDP")
        lab.client.run("timeout", "20", sys.executable, "-c", TCP_ECHO_CLIENT, TCP_VIP, str(TCP_PORT))
        with ControlClient(sock) as c:
            ok(c.request("reload"), "reload")
            ok(c.request("stats"), "stats")
        check_eq(d.stop(), 0, f"exit status after SIGTERM:\n{d.log()}")
    finally:
        d.close()
    used, families, paths, written, wx = set(), set(), set(), set(), []
    with open(trace) as f:
        for line in f:
            m = re.match(r"^\d+\s+(?:<\.\.\. )?([a-z_0-9]+)[( ]", line)
            if not m:
                continue
            used.add(m.group(1))
            # MemoryDenyWriteExecute=: refuses mprotect(PROT_EXEC) and mmap(PROT_WRITE|PROT_EXEC).
            if (m.group(1) in ("mprotect", "pkey_mprotect") and "PROT_EXEC" in line) or \
                    (m.group(1) == "mmap" and "PROT_EXEC" in line and "PROT_WRITE" in line):
                wx.append(line.strip())
            if m.group(1) == "socket" and "(AF_" in line:
                families.add(re.search(r"\((AF_[A-Z0-9]+)", line).group(1))
            p = re.search(r'"(/[^"]*)"', line)
            if p and m.group(1) in ("openat", "newfstatat", "access", "faccessat2", "stat", "readlink"):
                paths.add(p.group(1))
            if p and (m.group(1) in ("unlink", "mkdir", "chmod", "bind", "rename")
                      or (m.group(1) == "openat" and re.search(r"O_(WRONLY|RDWR|CREAT)", line))):
                written.add(p.group(1))
    check(len(used) > 20 and "bpf" in used and "io_uring_setup" in used,
          f"the trace saw ferryd's setup: {sorted(used)}")
    print(f"  {len(used)} distinct system calls: {' '.join(sorted(used))}")
    outside = sorted(used - allowed)
    check(not outside, f"system calls the unit's SystemCallFilter would refuse: {outside}")

    # RestrictAddressFamilies=: every socket() ferryd made is of a family the unit allows.
    allowed_families = set(" ".join(settings["RestrictAddressFamilies"]).split())
    print(f"  socket families: {' '.join(sorted(families))}")
    check("AF_XDP" in families, f"AF_XDP sockets seen: {families}")
    check(families <= allowed_families, f"families outside RestrictAddressFamilies: {families - allowed_families}")

    # ProtectSystem=strict, PrivateTmp=, ProtectKernelTunables=: ferryd writes only in its
    # RuntimeDirectory (here the socket's directory); ProcSubset=pid, ProtectHome=: it reads no
    # /proc file outside its own pid's and nothing under /home or /root.
    run_dir = os.path.dirname(sock)
    libs = ("/lib", "/usr/lib", "/etc/ld.so")
    print(f"  paths looked at: {' '.join(sorted(p for p in paths if not p.startswith(libs)))}")
    print(f"  paths written: {' '.join(sorted(written))}")
    check(all(p.startswith(run_dir + "/") for p in written), f"writes outside {run_dir}: {written}")
    # Looked for, and absent under ProcSubset=pid, without harm (ferryd ran and served above):
    # glibc's heap trimming reads /proc/sys/vm/overcommit_memory, libbpf /proc/version_signature.
    proc_other = [p for p in paths if p.startswith("/proc/") and not re.match(r"/proc/(self|thread-self|\d+)/", p)]
    print(f"  /proc files outside its own, hidden by ProcSubset=pid: {' '.join(sorted(proc_other))}")
    check(not [p for p in paths if p.startswith(("/home", "/root"))], f"home directories read: {paths}")
    check(not [p for p in paths if p.startswith("/tmp/") and not p.startswith(workdir.path + "/")],
          f"/tmp files other than the test's (PrivateTmp=): {paths}")
    check(not [p for p in paths if p.startswith("/dev/")], f"device nodes (PrivateDevices=): {paths}")
    check(not wx, f"writable+executable memory (MemoryDenyWriteExecute=): {wx}")
