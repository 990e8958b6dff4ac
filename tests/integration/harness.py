"""Test harness for the real ferryd binary: temp configs, a sd_notify socket to await READY=1,
a control-protocol client, and cleanup that always runs."""
import contextlib
import json
import os
import pwd
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

FERRYD = os.environ.get("FERRYD", "build/daemon/ferryd")
FERRYCTL = os.environ.get("FERRYCTL", "build/daemon/ferryctl")
SOURCE_ROOT = os.environ.get("SOURCE_ROOT", os.getcwd())


class TestFailure(AssertionError):
    __test__ = False  # a failure, not a class of tests for pytest to collect


# The first line of an ASan, LeakSanitizer or UBSan report (docs/testing.md): a daemon's log that
# holds one fails the test even where the report did not end the process.
SANITIZER_REPORT = re.compile(r"ERROR: (?:AddressSanitizer|LeakSanitizer)|AddressSanitizer:DEADLYSIGNAL"
                              r"|: runtime error: ")


def sanitizer_report(text):
    """The part of `text` from the first sanitizer report on, or None."""
    m = SANITIZER_REPORT.search(text)
    return text[text.rfind("\n", 0, m.start()) + 1:] if m else None


def check(cond, message):
    if not cond:
        raise TestFailure(message)


def check_eq(actual, expected, what):
    if actual != expected:
        raise TestFailure(f"{what}: expected {expected!r}, got {actual!r}")


class Workdir:
    """A private temp directory for one test's sockets and configs."""

    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="ferry-it-")
        os.chmod(self.path, 0o755)

    def file(self, name):
        return os.path.join(self.path, name)

    def write_config(self, cfg, name="ferryd.json", mode=0o644):
        path = self.file(name)
        text = cfg if isinstance(cfg, str) else json.dumps(cfg, indent=2)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        return path

    def cleanup(self):
        shutil.rmtree(self.path, ignore_errors=True)


def base_config(workdir, **overrides):
    cfg = {
        "control": {"socket": workdir.file("ctl/ferryd.sock"), "mode": "0660", "group": None},
        "metrics": {"listen": "127.0.0.1:0"},
        "log": {"level": "debug"},
    }
    cfg.update(overrides)
    return cfg


def tcp_control_config(workdir, token):
    """base_config with the TCP control listener on 127.0.0.1:0 and `token` in a 0600 token file."""
    token_file = workdir.file("token")
    with open(token_file, "w") as f:
        f.write(token + "\n")
    os.chmod(token_file, 0o600)
    cfg = base_config(workdir)
    cfg["control"]["tcp"] = {"listen": "127.0.0.1:0", "token_file": token_file}
    return cfg


class Notifications:
    """The NOTIFY_SOCKET end: collects sd_notify datagrams from the daemon."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.messages = []

    def wait_for(self, key, timeout=10.0, fresh=False):
        """Returns the fields of a datagram with KEY=...: any received so far, or with fresh=True
        only one that arrives after this call."""
        if not fresh:
            for fields in self.messages:
                if key in fields:
                    return fields
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                break
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            self.messages.append(fields)
            if key in fields:
                return fields
        raise TestFailure(f"no {key}= notification within {timeout}s; got {self.messages}")

    def close(self):
        self.sock.close()


class Daemon:
    """One ferryd process started on a config file; waits for READY=1."""

    def __init__(self, workdir, config_path, env=None, watchdog_usec=None, name="ferryd", netns=None):
        self.workdir = workdir
        self.config_path = config_path
        self.log_path = workdir.file(f"{name}.log")
        self.notify = Notifications(workdir.file(f"{name}.notify"))
        full_env = dict(os.environ)
        full_env.pop("JOURNAL_STREAM", None)
        full_env["NOTIFY_SOCKET"] = self.notify.path
        if watchdog_usec:
            full_env["WATCHDOG_USEC"] = str(watchdog_usec)
        full_env.update(env or {})
        self.log_file = open(self.log_path, "w")
        prefix = ["ip", "netns", "exec", netns] if netns else []
        self.proc = subprocess.Popen(prefix + [FERRYD, "--config", config_path], stdout=self.log_file,
                                     stderr=subprocess.STDOUT, env=full_env)
        self.returncode = None
        self.socket_path  # noqa: B018 (caches the path before a test rewrites the file)

    def wait_ready(self, timeout=15.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise TestFailure(f"ferryd exited with {self.proc.returncode} before READY=1:\n{self.log()}")
            try:
                return self.notify.wait_for("READY", timeout=0.2)
            except TestFailure:
                continue
        raise TestFailure(f"ferryd not ready within {timeout}s:\n{self.log()}")

    @property
    def socket_path(self):
        # Read once at start: tests rewrite the file to exercise reloads.
        if not hasattr(self, "_socket_path"):
            with open(self.config_path) as f:
                self._socket_path = json.load(f)["control"]["socket"]
        return self._socket_path

    def client(self):
        return ControlClient(self.socket_path)

    def request(self, cmd, args=None):
        with self.client() as c:
            return c.request(cmd, args)

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=15.0):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise TestFailure(f"ferryd did not stop within {timeout}s after SIGTERM:\n{self.log()}")
        return self.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.returncode = self.proc.wait()

    def log(self):
        self.log_file.flush()
        with open(self.log_path) as f:
            return f.read()

    def cleanup(self):
        """Stops ferryd if the test left it running, with SIGTERM so that LeakSanitizer's exit check
        runs, and fails the test on a non-zero exit from that or a sanitizer report in the log."""
        left_running = self.proc.poll() is None
        try:
            if left_running:
                self.stop()
        finally:
            with contextlib.suppress(Exception):
                self.kill()
            log = self.log()
            self.log_file.close()
            self.notify.close()
        report = sanitizer_report(log)
        if report:
            raise TestFailure(f"sanitizer report in {self.log_path}:\n{report}")
        if left_running and self.returncode != 0:
            raise TestFailure(f"ferryd exited with {self.returncode} after SIGTERM at cleanup:\n{log}")


class ControlClient:
    """Line-protocol client for the control socket."""

    def __init__(self, path, timeout=10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""
        self.next_id = 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def read_line(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                if self.buf:
                    raise TestFailure(f"connection closed mid-line: {self.buf[:200]!r}")
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, cmd, args=None):
        rid = self.next_id
        self.next_id += 1
        req = {"id": rid, "cmd": cmd}
        if args is not None:
            req["args"] = args
        self.send_raw(json.dumps(req).encode() + b"\n")
        resp = self.read_line()
        check(resp is not None, f"connection closed before the answer to {cmd}")
        check_eq(resp.get("id"), rid, f"id of the answer to {cmd}")
        return resp

    def close(self):
        self.sock.close()


def ok(resp, what=""):
    if not resp.get("ok"):
        raise TestFailure(f"{what or 'request'} failed: {resp}")
    return resp["result"]


def metrics_endpoint(daemon):
    status = ok(daemon.request("status"), "status")
    host, port = status["metrics"]["listen"].rsplit(":", 1)
    return host, int(port)


def http_get(host, port, path="/metrics", timeout=10.0, source=None):
    """A minimal HTTP/1.0 GET (from `source` (host, port) when given); returns (status code,
    headers dict, body bytes)."""
    with socket.create_connection((host, port), timeout=timeout, source_address=source) as s:
        authority = f"[{host}]" if ":" in host else host
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: {authority}\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    code = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:] if ":" in l)}
    return code, headers, body


def as_nobody(fn, *args):
    """Runs fn(*args) in a forked child that dropped to nobody; raises its failure here."""
    nobody = pwd.getpwnam("nobody")
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            check_eq(os.geteuid(), nobody.pw_uid, "the child's uid")
            fn(*args)
            status = 0
        except BaseException:
            os.write(write_end, traceback.format_exc().encode())
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        report = f.read().decode()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise TestFailure(f"as nobody (uid {nobody.pw_uid}):\n{report}")


def wait_until(predicate, timeout, what, interval=0.02):
    """Polls `predicate` (for state only observable by polling, e.g. /proc or link state)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TestFailure(f"timed out after {timeout}s waiting for {what}")


def ferryctl(target, *args, user=None, timeout=20):
    """`ferryctl --socket SOCKET ARGS...` for `target`, a Daemon or a control socket's path, as
    `user` (a pwd entry) when given; the CompletedProcess (text), whatever its exit status."""
    socket_path = target if isinstance(target, str) else target.socket_path
    prefix = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"] \
        if user else []
    return subprocess.run(prefix + [FERRYCTL, "--socket", socket_path, *args], capture_output=True,
                          text=True, timeout=timeout)


def ferryctl_out(target, *args, timeout=20):
    """ferryctl's stdout; fails the test unless it exits 0."""
    r = ferryctl(target, *args, timeout=timeout)
    check_eq(r.returncode, 0, f"ferryctl {' '.join(args)} ({r.stdout}{r.stderr})")
    return r.stdout


def samples(d, family):
    """[(labels, value)] of one metric family, from ferryd's `stats` command."""
    fams = ok(d.request("stats", {"prefix": family}))["metrics"]
    fam = [f for f in fams if f["name"] == family]
    return [(s["labels"], s["value"]) for s in fam[0]["samples"]] if fam else []


def total(d, family, **match):
    """The sum of a family's samples whose labels include `match`."""
    return sum(v for labels, v in samples(d, family)
               if all(labels.get(k) == str(x) for k, x in match.items()))


def by_label(d, family, label):
    """{label value: sum of the family's samples with it}."""
    out = {}
    for labels, v in samples(d, family):
        out[labels.get(label)] = out.get(labels.get(label), 0) + v
    return out


@contextlib.contextmanager
def running(workdir, cfg, **kwargs):
    """Starts ferryd on `cfg` (dict or path), waits for READY=1, always cleans up."""
    path = cfg if isinstance(cfg, str) else workdir.write_config(cfg)
    daemon = Daemon(workdir, path, **kwargs)
    try:
        daemon.wait_ready()
        yield daemon
    finally:
        daemon.cleanup()


class Piped:
    """A helper process in a namespace driven by lines on stdin, answering one line each; its
    stderr goes to `err_path`, quoted when it does not answer."""

    def __init__(self, ns, script, args, err_path, name="helper"):
        self.err_path = err_path
        self.name = name
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns.name, sys.executable, "-u", "-c", script,
                                      *map(str, args)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(err_path, "w"))
        self.buf = b""

    def read_line(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                raise TestFailure(f"{self.name}: no answer within {timeout}s (exit {self.proc.poll()}): "
                                  f"{open(self.err_path).read()}")
            data = os.read(self.proc.stdout.fileno(), 65536)
            if not data:
                raise TestFailure(f"{self.name} exited {self.proc.wait()}: {open(self.err_path).read()}")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def cmd(self, line, timeout=30):
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        return self.read_line(timeout)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
