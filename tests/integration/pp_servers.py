#!/usr/bin/env python3
"""Real PROXY protocol peers for test_proxy_protocol.py: Debian's nginx and HAProxy as temporary
unprivileged instances (own config and files in a temp dir, no system service, loopback only),
and a Python backend that records what each connection brought."""
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

NOBODY = 65534  # uid and gid: the servers run unprivileged


def _listening(ports, netns):
    """The (host, port) of `ports` not yet listening, read with ss in the server's namespace."""
    prefix = ["ip", "netns", "exec", netns] if netns else []
    out = subprocess.run(prefix + ["ss", "-Hltn"], capture_output=True, text=True).stdout
    local = {line.split()[3] for line in out.splitlines() if len(line.split()) > 3}
    return [(h, p) for h, p in ports
            if (f"[{h}]:{p}" if ":" in h else f"{h}:{p}") not in local]


def _wait_listening(proc, ports, what, log_path, netns, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    pending = _listening(ports, netns)
    while pending and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
        pending = _listening(ports, netns)
    if pending:
        with open(log_path, errors="replace") as f:
            log = f.read()
        raise AssertionError(f"{what} not listening on {pending} (exit {proc.poll()}):\n{log}")


@contextlib.contextmanager
def _server(argv, conf_name, conf_text, ports, what, netns=None):
    tmp = tempfile.mkdtemp(prefix=f"ferry-it-{what}-")
    os.chmod(tmp, 0o755)
    os.chown(tmp, NOBODY, NOBODY)
    conf = os.path.join(tmp, conf_name)
    with open(conf, "w") as f:
        f.write(conf_text.replace("@DIR@", tmp))
    log_path = os.path.join(tmp, "stderr.log")
    log = open(log_path, "w")
    # Into the namespace as root (setns), then down to nobody for the server itself.
    prefix = ["ip", "netns", "exec", netns] if netns else []
    prefix += ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    proc = subprocess.Popen(prefix + [a.replace("@CONF@", conf).replace("@DIR@", tmp) for a in argv],
                            stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
    try:
        _wait_listening(proc, ports, what, log_path, netns)
        yield tmp
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


# What the echo servers answer: the PROXY header's client and server, then the TCP peer.
ECHO_FIELDS = ("client_addr", "client_port", "server_addr", "server_port", "peer_addr", "peer_port")


@contextlib.contextmanager
def nginx_echo(listens, netns=None):
    """nginx with `proxy_protocol` on each (host, port) of `listens`, answering every request
    with the header's addresses and the TCP peer's (ECHO_FIELDS, space separated)."""
    listen_lines = "\n".join(f"    listen {f'[{h}]' if ':' in h else h}:{p} proxy_protocol;"
                              for h, p in listens)
    conf = f"""
worker_processes 1;
pid @DIR@/nginx.pid;
error_log @DIR@/error.log info;
events {{ worker_connections 128; }}
http {{
  access_log @DIR@/access.log;
  client_body_temp_path @DIR@/body;
  proxy_temp_path @DIR@/proxy;
  fastcgi_temp_path @DIR@/fastcgi;
  uwsgi_temp_path @DIR@/uwsgi;
  scgi_temp_path @DIR@/scgi;
  server {{
{listen_lines}
    location / {{
      default_type text/plain;
      return 200 "$proxy_protocol_addr $proxy_protocol_port $proxy_protocol_server_addr $proxy_protocol_server_port $remote_addr $remote_port\\n";
    }}
  }}
}}
"""
    argv = ["nginx", "-p", "@DIR@", "-e", "@DIR@/error.log", "-c", "@CONF@", "-g", "daemon off;"]
    with _server(argv, "nginx.conf", conf, listens, "nginx", netns) as d:
        yield d


def haproxy_conf(body):
    return f"""
global
  maxconn 256
defaults
  timeout connect 3s
  timeout client 10s
  timeout server 10s
{body}
"""


@contextlib.contextmanager
def haproxy(body, ports):
    """HAProxy 2.6 in the foreground with `body` (frontends, backends) after the defaults."""
    argv = ["haproxy", "-db", "-f", "@CONF@"]
    with _server(argv, "haproxy.cfg", haproxy_conf(body), ports, "haproxy") as d:
        yield d


def http_get_fields(host, port, source_host=None, timeout_s=10.0):
    """GET / from `source_host` (default: `host`) on a port picked here; returns the client's
    own (addr, port) and the echoed ECHO_FIELDS as a dict."""
    from harness import http_get
    source_host = source_host or host
    family = socket.AF_INET6 if ":" in source_host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((source_host, 0))
        me = (source_host, s.getsockname()[1])
    code, _, body = http_get(host, port, "/", timeout_s, source=me)
    if code != 200:
        raise AssertionError(f"GET through {host}:{port} answered {code}: {body!r}")
    values = body.decode().split()
    if len(values) != len(ECHO_FIELDS):
        raise AssertionError(f"unexpected echo body {body!r}")
    return me, dict(zip(ECHO_FIELDS, values))


class RecordingBackend:
    """A loopback TCP backend: records each connection's bytes until EOF; answers `reply` once
    it has seen `expect_bytes` bytes (0: never answers)."""

    def __init__(self, host="127.0.0.1", expect_bytes=0, reply=b""):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.host = host
        self.expect_bytes = expect_bytes
        self.reply = reply
        self.lock = threading.Lock()
        self.connections = []  # bytes received, one entry per connection (growing)
        self.done = threading.Condition(self.lock)
        self.closed = 0
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def endpoint(self):
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                index = len(self.connections)
                self.connections.append(b"")
            threading.Thread(target=self._serve, args=(conn, index), daemon=True).start()

    def _serve(self, conn, index):
        answered = False
        with conn:
            conn.settimeout(30)
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    break
                with self.lock:
                    self.connections[index] += data
                    seen = len(self.connections[index])
                if self.expect_bytes and not answered and seen >= self.expect_bytes:
                    conn.sendall(self.reply)
                    answered = True
        with self.lock:
            self.closed += 1
            self.done.notify_all()

    def accepted(self):
        with self.lock:
            return len(self.connections)

    def wait_closed(self, n, timeout_s=10.0):
        with self.lock:
            if not self.done.wait_for(lambda: self.closed >= n, timeout_s):
                raise AssertionError(f"{self.closed} of {n} backend connections closed")
            return list(self.connections)

    def close(self):
        self.sock.close()
