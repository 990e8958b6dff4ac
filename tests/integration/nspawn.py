"""A container with systemd as PID 1, booted by systemd-nspawn from this machine's own root through
an overlay (docs/operations.md, "Tested under a real systemd"): writes land in a scratch upper
directory, the host's files stay as they are. One veth pair joins it to the host (host0 inside,
ve-NAME outside). Closing it always powers the container off (SIGKILL of its init after a bounded
wait), and the overlay lives in a mount namespace of its own, so no mount outlives the container
even if the test itself is killed."""
import contextlib
import ctypes
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from harness import TestFailure, check, wait_until

SCRATCH = "/var/tmp"
PREFIX = "ferry-boot-"
# Services of this machine's root that would start in the container and have nothing to do there.
MASKED = ["postgresql.service", "prometheus.service", "apt-daily.timer", "apt-daily-upgrade.timer",
          "man-db.timer", "e2scrub_all.timer", "fstrim.timer", "dpkg-db-backup.timer"]
BOOT_TIMEOUT_S = 90
POWEROFF_TIMEOUT_S = 30

# The overlay is mounted in a mount namespace only nspawn (and so the container) lives in: when the
# last of them exits, the kernel unmounts it.
BOOT = ('mount -t overlay overlay -o "lowerdir=/,upperdir=$1/upper,workdir=$1/work" "$1/root" && '
        'shift && exec systemd-nspawn "$@"')

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    # A test killed outright (SIGKILL, a timeout's second signal) still powers the container off.
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def sweep_leftovers():
    """Removes scratch directories of earlier runs whose test process is gone (a SIGKILLed test
    cannot clean up after itself; its container went down with it)."""
    for path in glob.glob(os.path.join(SCRATCH, PREFIX + "*")):
        m = re.match(rf"{PREFIX}(\d+)-", os.path.basename(path))
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            with open("/proc/self/mountinfo") as f:
                if path not in f.read():
                    shutil.rmtree(path, ignore_errors=True)


class Container:
    """`with Container() as c:` boots it; c.run(...) runs a command inside (all its
    namespaces, as root); c.host_if / c.pid; close() always tears it down."""

    def __init__(self):
        sweep_leftovers()
        self.name = f"fboot{os.getpid()}"[:12]  # "ve-" + 12 characters fit IFNAMSIZ unshortened
        self.dir = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=SCRATCH)
        self.log_path = os.path.join(self.dir, "nspawn.log")  # beside, not in, the overlay's dirs
        self.nspawn = None
        self.pid = None
        self.host_if = None
        for sub in ("upper", "work", "root"):
            os.mkdir(os.path.join(self.dir, sub))

    def __enter__(self):
        try:
            self.boot()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def boot(self):
        args = ["-D", os.path.join(self.dir, "root"), "--boot", f"--machine={self.name}",
                "--register=no", "--keep-unit", "--console=passive", "--network-veth",
                "--capability=all", "--system-call-filter=bpf perf_event_open", "--",
                "systemd.firstboot=off", *(f"systemd.mask={u}" for u in MASKED)]
        with open(self.log_path, "w") as log:
            self.nspawn = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", BOOT, "sh",
                 self.dir, *args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent)
        started = time.monotonic()
        try:
            self.pid = wait_until(self._init_pid, 30, "systemd in the container", interval=0.1)
        except TestFailure as e:
            raise TestFailure(f"{e}; systemd-nspawn said: {self.log()}") from None
        state = wait_until(self._booted, BOOT_TIMEOUT_S, "the container's systemd to finish booting",
                           interval=0.5)
        print(f"  container {self.name} booted in {time.monotonic() - started:.1f} s "
              f"(systemd pid {self.pid} on the host, system {state})", flush=True)
        if state != "running":
            failed = self.run("systemctl", "list-units", "--failed", "--no-legend", check=False)
            print(f"  units failed in the container (not ferry's): {failed.stdout.strip()}")
        link = json.loads(self.run("ip", "-j", "link", "show", "host0").stdout)[0]
        host = json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True,
                                         text=True, check=True).stdout)
        peer = [l["ifname"] for l in host if l["ifindex"] == link["link_index"]]
        check(peer and peer[0] == f"ve-{self.name}", f"host side of host0: {peer}")
        self.host_if = peer[0]

    def _init_pid(self):
        check(self.nspawn.poll() is None, f"systemd-nspawn exited with {self.nspawn.returncode}: "
              f"{self.log()}")
        try:
            with open(f"/proc/{self.nspawn.pid}/task/{self.nspawn.pid}/children") as f:
                children = [int(p) for p in f.read().split()]
        except FileNotFoundError:
            return None
        for child in children:
            with contextlib.suppress(FileNotFoundError), open(f"/proc/{child}/comm") as f:
                if f.read().strip() == "systemd":
                    return child
        return None

    def _booted(self):
        r = self.run("systemctl", "is-system-running", check=False, timeout=30)
        state = r.stdout.strip()
        # "offline" is also what systemctl says before PID 1's private socket is up, early in the
        # boot: awaited like "starting", within BOOT_TIMEOUT_S.
        check(state not in ("maintenance", "stopping"), f"container's systemd is {state}")
        return state if state in ("running", "degraded") else None

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-3000:]
        except OSError as e:
            return f"(no log: {e})"

    def run(self, *args, input=None, check=True, timeout=60, user=None):
        """Runs a command in the container (root, or `user` with that user's groups)."""
        prefix = ["nsenter", "-t", str(self.pid), "-a"]
        if user:
            prefix += ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"]
        r = subprocess.run(prefix + list(args), input=input, capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            why = f"{r.stdout[-2000:]} {r.stderr[-2000:]}"
            if args[0] == "systemctl" and len(args) > 2:  # what the unit said, for the failure
                journal = subprocess.run(prefix + ["journalctl", "-u", args[2], "-n", "25",
                                                   "--no-pager"], capture_output=True, text=True,
                                         timeout=30)
                why += f"\n{args[2]}'s journal:\n{journal.stdout[-4000:]}"
            raise TestFailure(f"in the container: {' '.join(args)}: exit {r.returncode}: {why}")
        return r

    def write(self, path, text, mode="0644"):
        self.run("sh", "-c", f'cat > "$1.new" && chmod {mode} "$1.new" && mv "$1.new" "$1"', "sh",
                 path, input=text)

    def copy_in(self, host_path, path):
        with open(host_path, "rb") as f:
            data = f.read()
        r = subprocess.run(["nsenter", "-t", str(self.pid), "-a", "sh", "-c", 'cat > "$1"', "sh",
                            path], input=data, capture_output=True, timeout=60)
        check(r.returncode == 0, f"copying {host_path} into the container: {r.stderr}")

    def close(self):
        """Powers the container off (SIGTERM to nspawn: a clean shutdown), SIGKILLs its init (and
        with it every process in it) if that takes too long, removes what is left."""
        problems = []
        if self.nspawn:
            if self.nspawn.poll() is None:
                started = time.monotonic()
                os.kill(self.nspawn.pid, signal.SIGTERM)
                try:
                    self.nspawn.wait(timeout=POWEROFF_TIMEOUT_S)
                    seconds = time.monotonic() - started
                    print(f"  container {self.name} powered off in {seconds:.1f} s", flush=True)
                    if seconds > 5:
                        print(f"  its shutdown, the end: {self.log()[-1500:]}", flush=True)
                except subprocess.TimeoutExpired:
                    problems.append(f"not powered off within {POWEROFF_TIMEOUT_S} s; killed")
                    if self.pid:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(self.pid, signal.SIGKILL)
                    self.nspawn.kill()
                    self.nspawn.wait(timeout=30)
            if self.pid:
                with contextlib.suppress(TestFailure):
                    wait_until(lambda: not os.path.exists(f"/proc/{self.pid}"), 10,
                               "the container's init to be gone")
        if self.host_if and subprocess.run(["ip", "link", "show", self.host_if],
                                           capture_output=True).returncode == 0:
            problems.append(f"{self.host_if} left behind; deleted")
            subprocess.run(["ip", "link", "del", self.host_if], capture_output=True)
        with open("/proc/self/mountinfo") as f:
            if self.dir in f.read():  # only if the mount escaped its namespace
                problems.append("overlay still mounted; unmounted lazily")
                subprocess.run(["umount", "-l", os.path.join(self.dir, "root")], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        if problems:
            print(f"  container cleanup: {'; '.join(problems)}", flush=True)

    def leftovers(self):
        """What of the container is still on the host (for a test of the cleanup): []."""
        out = []
        if self.nspawn and self.nspawn.poll() is None:
            out.append(f"systemd-nspawn pid {self.nspawn.pid}")
        if self.pid and os.path.exists(f"/proc/{self.pid}"):
            out.append(f"container init pid {self.pid}")
        if self.host_if and subprocess.run(["ip", "link", "show", self.host_if],
                                           capture_output=True).returncode == 0:
            out.append(self.host_if)
        with open("/proc/self/mountinfo") as f:
            if self.dir in f.read():
                out.append("overlay mount")
        if os.path.exists(self.dir):
            out.append(self.dir)
        return out
