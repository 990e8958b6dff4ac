#!/usr/bin/env python3
"""Peers for the TCP proxy tests: a backend process (echo, source, sink, reset, stall on request)
that reports a sha256 per direction per connection, clients that check them end to end, and the
proxy service config and metrics readers the tests share."""
import asyncio
import contextlib
import errno
import hashlib
import json
import os
import queue
import random
import re
import select
import socket
import struct
import subprocess
import sys
import threading
import time

# Wire protocol, client -> backend: HELLO then any number of ops, then (usually) EOF.
#   HELLO = b"H" + 16-byte connection id (ASCII hex); every op = 1 byte + u64 big-endian argument.
#   E n + n bytes: echo them back as they arrive      S n: send n bytes of a pseudo-random stream
#   K n + n bytes: answer sha256(the n bytes)          W n: read until EOF, then send n bytes, close
#   R n: send n bytes, then reset (SO_LINGER 0)        T 0: read and discard until EOF or error
#   F n: send n bytes, shut down writing, then read and discard until EOF (backend half-closes)
#   P n: send n bytes, but reset once one send waits 1 s (a backend giving up on a stalled reader)
#   Z 0: stop reading, wait for the peer to hang up (a backend that stalls)
# The backend prints one JSON line per event on stdout: {"event":"listening","ports":[...]},
# {"event":"hello","id","port"} and, when a connection ends, {"event":"closed","id","port",
# "in_bytes","out_bytes","in_sha","out_sha","end"} with end "eof", "reset" or the errno name.
HEADER = struct.Struct("!cQ")
HELLO_BYTES = 17
SOURCE_BLOCK_BYTES = 1 << 20
CHUNK_BYTES = 256 << 10


def new_id():
    return os.urandom(8).hex()


def hello(conn_id):
    return b"H" + conn_id.encode()


def op(code, n=0):
    return HEADER.pack(code.encode(), n)


def error_name(exc):
    if isinstance(exc, ConnectionResetError):
        return "reset"
    if isinstance(exc, OSError) and exc.errno:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return type(exc).__name__


# ---------------------------------------------------------------- backend (its own process)

class BackendConnection:
    def __init__(self, sock, port, emit, source):
        self.sock = sock
        self.port = port
        self.emit = emit
        self.source = source
        self.source_offset = 0
        self.in_sha = hashlib.sha256()
        self.out_sha = hashlib.sha256()
        self.in_bytes = 0
        self.out_bytes = 0
        self.id = None
        self.buf = bytearray()

    def recv_some(self):
        data = self.sock.recv(CHUNK_BYTES)
        self.in_sha.update(data)
        self.in_bytes += len(data)
        return data

    def read_exact(self, n):
        """Returns n bytes, or None at EOF before them."""
        while len(self.buf) < n:
            data = self.recv_some()
            if not data:
                return None
            self.buf += data
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def send(self, data):
        self.sock.sendall(data)
        self.out_sha.update(data)
        self.out_bytes += len(data)

    def send_source(self, n):
        while n > 0:
            start = self.source_offset % SOURCE_BLOCK_BYTES
            piece = min(n, SOURCE_BLOCK_BYTES - start, CHUNK_BYTES)
            self.send(self.source[start:start + piece])
            self.source_offset += piece
            n -= piece

    def stream_payload(self, n, each):
        """Feeds the n payload bytes following an op header to `each` as they arrive."""
        while n > 0:
            if not self.buf:
                data = self.recv_some()
                if not data:
                    raise EOFError(f"EOF with {n} payload bytes missing")
                self.buf += data
            piece = bytes(self.buf[:n])
            del self.buf[:len(piece)]
            n -= len(piece)
            each(piece)

    def drain_until_eof(self):
        self.buf.clear()
        while self.recv_some():
            pass

    def serve(self):
        end = "eof"
        try:
            first = self.read_exact(HELLO_BYTES)
            if first is None or first[:1] != b"H":
                raise ValueError(f"bad hello {first!r}")
            self.id = first[1:].decode()
            self.emit({"event": "hello", "id": self.id, "port": self.port})
            while True:
                header = self.read_exact(HEADER.size)
                if header is None:
                    break
                code, n = HEADER.unpack(header)
                if code == b"E":
                    self.stream_payload(n, self.send)
                elif code == b"S":
                    self.send_source(n)
                elif code == b"K":
                    digest = hashlib.sha256()
                    self.stream_payload(n, digest.update)
                    self.send(digest.digest())
                elif code == b"W":
                    self.drain_until_eof()
                    self.send_source(n)
                    break
                elif code == b"R":
                    self.send_source(n)
                    self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    end = "sent_reset"
                    break
                elif code == b"P":
                    self.sock.settimeout(1.0)
                    try:
                        self.send_source(n)
                    except socket.timeout:
                        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        end = "sent_reset"
                    break
                elif code == b"F":
                    self.send_source(n)
                    self.sock.shutdown(socket.SHUT_WR)
                    self.drain_until_eof()
                    break
                elif code == b"T":
                    self.drain_until_eof()
                    break
                elif code == b"Z":
                    with select.epoll() as ep:
                        ep.register(self.sock.fileno(), select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR)
                        while not ep.poll(1.0):
                            pass
                    err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    end = errno.errorcode.get(err, "reset") if err else "hangup"
                    if err == errno.ECONNRESET:
                        end = "reset"
                    break
                else:
                    raise ValueError(f"unknown op {code!r}")
        except Exception as e:  # noqa: BLE001 (reported as the connection's end)
            end = error_name(e)
        finally:
            self.emit({"event": "closed", "id": self.id, "port": self.port, "in_bytes": self.in_bytes,
                       "out_bytes": self.out_bytes, "in_sha": self.in_sha.hexdigest(),
                       "out_sha": self.out_sha.hexdigest(), "end": end})
            self.sock.close()


def backend_main(listen):
    lock = threading.Lock()

    def emit(event):
        line = json.dumps(event)
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    source = os.urandom(SOURCE_BLOCK_BYTES)
    listeners = []
    for endpoint in listen:
        host, port = endpoint.rsplit(":", 1)
        host = host.strip("[]")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        s = socket.socket(family, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, int(port)))
        s.listen(1024)
        listeners.append(s)

    def accept_loop(s):
        port = s.getsockname()[1]
        while True:
            conn, _ = s.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            t = threading.Thread(target=BackendConnection(conn, port, emit, source).serve, daemon=True)
            t.start()

    for s in listeners:
        threading.Thread(target=accept_loop, args=(s,), daemon=True).start()
    emit({"event": "listening", "ports": [s.getsockname()[1] for s in listeners]})
    threading.Event().wait()  # until SIGTERM/SIGKILL ends the process


class Backend:
    """A backend process on one or more loopback ports (port 0 = any free); collects its events."""

    def __init__(self, listen=("127.0.0.1:0",), start_timeout_s=30.0):
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "backend", *listen],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events = queue.Queue()
        self.hellos = {}
        self.closed = {}
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        try:
            first = self.events.get(timeout=start_timeout_s)
        except queue.Empty:
            first = None
        if not first or first.get("event") != "listening":
            self.kill()
            raise AssertionError(f"backend did not start: {first} {self.proc.stderr.read()}")
        self.ports = first["ports"]
        self.port = self.ports[0]
        self.host = listen[0].rsplit(":", 1)[0]

    def _read(self):
        for line in self.proc.stdout:
            event = json.loads(line)
            if event["event"] == "listening":
                self.events.put(event)
                continue
            with self.cond:
                if event["event"] == "hello":
                    self.hellos[event["id"]] = event
                elif event["event"] == "closed":
                    self.closed[event["id"]] = event
                self.cond.notify_all()
        self.events.put({"event": "exited"})

    def endpoint(self, index=0):
        return f"{self.host}:{self.ports[index]}"

    def wait_closed(self, conn_id, timeout_s=10.0):
        with self.cond:
            if not self.cond.wait_for(lambda: conn_id in self.closed, timeout=timeout_s):
                raise AssertionError(f"backend saw no end of connection {conn_id} within {timeout_s}s")
            return self.closed[conn_id]

    def wait_hello(self, conn_id, timeout_s=10.0):
        with self.cond:
            if not self.cond.wait_for(lambda: conn_id in self.hellos, timeout=timeout_s):
                raise AssertionError(f"backend saw no hello of {conn_id} within {timeout_s}s")
            return self.hellos[conn_id]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


def hello_port(backend_list, conn_id, timeout_s=10.0):
    """The port of whichever of several backend processes saw this connection's hello."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for b in backend_list:
            if conn_id in b.hellos:
                return b.hellos[conn_id]["port"]
        time.sleep(0.005)  # the hello line is on its way through another process's pipe
    raise AssertionError(f"no backend saw the hello of {conn_id} within {timeout_s}s")


@contextlib.contextmanager
def backends(*listen_lists):
    """Starts one Backend per listen list; always stops them."""
    started = []
    try:
        for listen in listen_lists:
            started.append(Backend(listen))
        yield started
    finally:
        for b in started:
            with contextlib.suppress(Exception):
                b.stop()


def closed_port(host="127.0.0.1"):
    """A loopback port with no listener: bound to reserve the number, never listened on. The
    socket must stay open while the test uses the port (connects to it are refused)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.bind((host, 0))
    return s


class BlackholePort:
    """A loopback listener whose accept queue is full (backlog 0, one connection never accepted),
    so the kernel drops further SYNs: a connect to it neither succeeds nor is refused."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(0)
        self.port = self.listener.getsockname()[1]
        self.fillers = []
        for _ in range(2):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", self.port))
            self.fillers.append(s)

    def endpoint(self):
        return f"127.0.0.1:{self.port}"

    def close(self):
        for s in self.fillers:
            s.close()
        self.listener.close()


def free_port(host="127.0.0.1"):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- clients

class Tally:
    """What one client connection sent and received, hashed like the backend hashes it."""

    def __init__(self):
        self.id = new_id()
        self.out_sha = hashlib.sha256()
        self.in_sha = hashlib.sha256()
        self.out_bytes = 0
        self.in_bytes = 0

    def sent(self, data):
        self.out_sha.update(data)
        self.out_bytes += len(data)

    def received(self, data):
        self.in_sha.update(data)
        self.in_bytes += len(data)

    def check_against(self, record):
        """Raises unless the backend saw exactly these bytes both ways."""
        problems = []
        if record["in_bytes"] != self.out_bytes or record["in_sha"] != self.out_sha.hexdigest():
            problems.append(f"client->backend: client sent {self.out_bytes} B, backend got "
                            f"{record['in_bytes']} B (sha256 {'equal' if record['in_sha'] == self.out_sha.hexdigest() else 'differs'})")
        if record["out_bytes"] != self.in_bytes or record["out_sha"] != self.in_sha.hexdigest():
            problems.append(f"backend->client: backend sent {record['out_bytes']} B, client got "
                            f"{self.in_bytes} B (sha256 {'equal' if record['out_sha'] == self.in_sha.hexdigest() else 'differs'})")
        if problems:
            raise AssertionError(f"connection {self.id}: " + "; ".join(problems))


class BlockingClient:
    """One client connection with blocking calls, for the single-connection behaviours."""

    def __init__(self, host, port, timeout_s=10.0, send_hello=True):
        self.tally = Tally()
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if send_hello:
            self.send(hello(self.tally.id))

    @property
    def id(self):
        return self.tally.id

    def send(self, data):
        self.sock.sendall(data)
        self.tally.sent(data)

    def recv_some(self, max_bytes=CHUNK_BYTES):
        data = self.sock.recv(max_bytes)
        self.tally.received(data)
        return data

    def recv_exact(self, n):
        got = bytearray()
        while len(got) < n:
            data = self.recv_some(min(CHUNK_BYTES, n - len(got)))
            if not data:
                raise AssertionError(f"EOF after {len(got)} of {n} bytes")
            got += data
        return bytes(got)

    def recv_count(self, n):
        """Receives n bytes without keeping them (hashed only)."""
        left = n
        buf = bytearray(CHUNK_BYTES)
        view = memoryview(buf)
        while left:
            k = self.sock.recv_into(view[:min(left, CHUNK_BYTES)])
            if not k:
                raise AssertionError(f"EOF after {n - left} of {n} bytes")
            self.tally.received(view[:k])
            left -= k

    def echo(self, payload):
        self.send(op("E", len(payload)))
        sender = threading.Thread(target=self.send, args=(payload,))
        sender.start()
        try:
            got = self.recv_exact(len(payload))
        finally:
            sender.join()
        if got != payload:
            raise AssertionError(f"echo of {len(payload)} bytes differs")

    def wait_end(self, timeout_s=5.0):
        """Reads until the connection ends; returns ("eof"|"reset"|errno name, seconds waited)."""
        started = time.monotonic()
        self.sock.settimeout(timeout_s)
        try:
            while True:
                if not self.recv_some():
                    return "eof", time.monotonic() - started
                if time.monotonic() - started > timeout_s:
                    raise AssertionError(f"connection still delivering data after {timeout_s}s")
        except socket.timeout:
            raise AssertionError(f"connection did not end within {timeout_s}s") from None
        except OSError as e:
            return error_name(e), time.monotonic() - started

    def finish(self):
        """Half-closes, expects EOF right after (the backend answered everything), closes."""
        self.sock.shutdown(socket.SHUT_WR)
        end, _ = self.wait_end()
        if end != "eof":
            raise AssertionError(f"connection {self.id} ended with {end} instead of EOF")
        self.close()

    def reset(self):
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close()

    def close(self):
        self.sock.close()


def refused_end(host, port, timeout_s=5.0):
    """Connects and returns how the connection ended ("reset", "eof", errno name) for a client a
    proxy turns away; on loopback the reset can already fail the connect itself."""
    try:
        c = BlockingClient(host, port, timeout_s=timeout_s)
    except ConnectionResetError:
        return "reset", None
    try:
        end, _ = c.wait_end(timeout_s=timeout_s)
        return end, c.id
    finally:
        c.close()


class Pattern:
    """A random byte source for payloads: slices of one random block at random offsets."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.block = self.rng.randbytes(2 * SOURCE_BLOCK_BYTES)

    def payload(self, n):
        start = self.rng.randrange(0, len(self.block) - n + 1)
        return self.block[start:start + n]


def random_plan(rng, steps, max_bytes=1 << 20):
    """A list of (op, bytes) exercising both directions: echo, source (incl. 64 KiB responses),
    sink with a digest answer; sizes 1 B..max_bytes with the edges and 64 KiB weighted in."""
    plan = []
    for _ in range(steps):
        size = rng.choice([1, 2, 100, 1460, 4096, 16384, 65535, 65536, 65537,
                           rng.randint(1, 1 << 16), rng.randint(1, max_bytes), max_bytes])
        plan.append((rng.choice(["E", "S", "S", "K"]), size))
    return plan


async def run_plan_async(host, port, plan, pattern, timeout_s):
    """One connection: HELLO, the plan's ops with every answer checked, half-close, EOF.
    Returns its Tally."""
    tally = Tally()
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, limit=1 << 20), timeout_s)
    try:
        async def send(data):
            writer.write(data)
            tally.sent(data)
            await writer.drain()

        async def recv_exact(n, keep):
            got = bytearray() if keep else None
            left = n
            while left:
                data = await reader.read(min(left, CHUNK_BYTES))
                if not data:
                    raise AssertionError(f"EOF with {left} of {n} bytes missing")
                tally.received(data)
                left -= len(data)
                if keep:
                    got += data
            return got

        async def steps():
            await send(hello(tally.id))
            for code, n in plan:
                if code == "S":
                    await send(op("S", n))
                    await recv_exact(n, keep=False)
                elif code in ("E", "K"):
                    payload = pattern.payload(n)
                    await send(op(code, n))
                    sender = asyncio.ensure_future(send(payload))
                    got = await recv_exact(n if code == "E" else 32, keep=True)
                    await sender
                    want = payload if code == "E" else hashlib.sha256(payload).digest()
                    if got != want:
                        raise AssertionError(f"{code} {n}: answer differs")
            writer.write_eof()
            tail = await reader.read(1)
            if tail:
                raise AssertionError(f"data after the last answer: {tail!r}")

        await asyncio.wait_for(steps(), timeout_s)
        return tally
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def run_many(host, port, plans, seed, timeout_s=120.0):
    """Runs every plan on its own connection at once; returns (tallies, errors)."""
    pattern = Pattern(seed)

    async def main():
        results = await asyncio.gather(*(run_plan_async(host, port, p, pattern, timeout_s) for p in plans),
                                       return_exceptions=True)
        tallies = [r for r in results if isinstance(r, Tally)]
        errors = [repr(r) for r in results if not isinstance(r, Tally)]
        return tallies, errors

    return asyncio.run(main())


def read_rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


# ---------------------------------------------------------------- the proxy side

def proxy_service(port, backend_endpoints, name="web", vip="127.0.0.1", **extra):
    service = {"name": name, "vip": vip, "port": port, "protocols": ["tcp"], "mode": "proxy",
               "backends": list(backend_endpoints)}
    service.update(extra)
    return service


@contextlib.contextmanager
def proxy_to_one_backend(workdir, tcp=None, env=None):
    """ferryd proxying service "web" on a free loopback port to one Backend; yields
    (daemon, backend, port) and always cleans up both."""
    from harness import base_config, running
    port = free_port()
    with backends(["127.0.0.1:0"]) as (backend,):
        cfg = base_config(workdir, services=[proxy_service(port, [backend.endpoint()])])
        if tcp:
            cfg["tcp"] = tcp
        with running(workdir, cfg, env=env) as daemon:
            yield daemon, backend, port


def parse_metrics(text):
    """Prometheus text -> list of (name, labels dict, value)."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, value = line.rsplit(" ", 1)
        name, _, rest = key.partition("{")
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', rest))
        samples.append((name, labels, float(value)))
    return samples


class Metrics:
    """One scrape of ferryd's /metrics."""

    def __init__(self, daemon):
        from harness import http_get, metrics_endpoint
        host, port = metrics_endpoint(daemon)
        code, _, body = http_get(host, port)
        if code != 200:
            raise AssertionError(f"/metrics answered {code}")
        self.samples = parse_metrics(body.decode())

    def has(self, name):
        return any(n == name for n, _, _ in self.samples)

    def value(self, name, **labels):
        """Sum of the samples of `name` whose labels include `labels`; the family must exist."""
        if not self.has(name):
            raise AssertionError(f"metric family {name} not exported")
        return sum(v for n, l, v in self.samples
                   if n == name and all(l.get(k) == str(want) for k, want in labels.items()))


def wait_idle(daemon, service="web", timeout_s=10.0):
    """Waits until the service has no open proxied connection; returns that scrape."""
    from harness import wait_until
    box = {}

    def idle():
        box["m"] = Metrics(daemon)
        return box["m"].value("ferry_proxy_connections_active", service=service) == 0

    wait_until(idle, timeout_s, f"ferry_proxy_connections_active{{service={service}}} == 0", interval=0.05)
    return box["m"]


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "backend":
        backend_main(sys.argv[2:])
    else:
        sys.exit(f"usage: {sys.argv[0]} backend HOST:PORT...")
