#!/usr/bin/env python3
"""Memory pressure on the provided-buffer rings (issue 7): many slow readers behind a TCP proxy
whose workers have a 16 x 4 KiB ring each, with the ring credit off (recvs end with ENOBUFS and
park) and on (they park before arming). Neither may spin, corrupt, lose or leak anything."""
import asyncio
import hashlib
import json
import os
import random
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time

from harness import base_config, check, check_eq, ok, running, wait_until
from proxy_peers import Metrics, free_port, proxy_service, wait_idle

WORKERS = 2
RING_BUFFERS = 16
RING_BUFFER_BYTES = 4096
CREDIT_BYTES = 16384  # the most one recv may take: a quarter of a worker's ring
CONNECTIONS = 96
PAYLOAD_BYTES = (8 << 20, 16 << 20)  # per connection, chosen per seed
# Every client reads SLOW_READ_BYTES every SLOW_INTERVAL_S (400 KB/s, a twentieth of what one gets
# at full speed) for SLOW_S. Once the kernel's socket buffers in between are full (about 1 MiB a
# connection on loopback) the rings stay dry: the proxy holds every buffer for sends to slow
# readers, and each buffer the readers free is fought over by the parked sockets.
SLOW_S = 8.0
SLOW_READ_BYTES = 8192
SLOW_INTERVAL_S = 0.02
CPU_WINDOW_S = (3.5, 7.5)  # seconds into the slow phase: the kernel's buffers are full by then
CPU_BOUND = 0.25  # of one CPU; a recv retried on a dry ring would take about 1.0
FAST_READ_BYTES = 256 << 10
RUN_TIMEOUT_S = 60.0

# Client -> backend: one request, seed and length (u64 big-endian each); the backend answers with
# `length` bytes of its seed's stream and closes. Each connection's stream is its own, and it
# repeats only every BLOCK_BYTES (odd, so never at a buffer's distance): a buffer delivered to the
# wrong connection, twice or out of order changes the sha256.
REQUEST = struct.Struct("!QQ")
BLOCK_BYTES = (1 << 20) + 4093


def stream_block(seed):
    block = random.Random(seed).randbytes(BLOCK_BYTES)
    return block + block  # any slice of up to BLOCK_BYTES starting in the first copy is contiguous


# ---------------------------------------------------------------- backend (its own process)

class StreamHandler(socketserver.BaseRequestHandler):
    """Streams the requested seed's bytes as fast as the proxy takes them; reports the sha256."""

    def handle(self):
        seed, sent, digest, error = None, 0, hashlib.sha256(), None
        try:
            request = self.request.recv(REQUEST.size, socket.MSG_WAITALL)
            seed, length = REQUEST.unpack(request)
            view = memoryview(stream_block(seed))
            while sent < length:
                start = sent % BLOCK_BYTES
                piece = view[start:start + min(length - sent, FAST_READ_BYTES)]
                self.request.sendall(piece)
                digest.update(piece)
                sent += len(piece)
        except Exception as e:  # noqa: BLE001 (reported to the test)
            error = repr(e)
        line = json.dumps({"seed": seed, "bytes": sent, "sha": digest.hexdigest(), "error": error})
        with self.server.report_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


def backend_main():
    socketserver.ThreadingTCPServer.allow_reuse_address = True
    socketserver.ThreadingTCPServer.request_queue_size = 1024
    socketserver.ThreadingTCPServer.daemon_threads = True
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), StreamHandler)
    server.report_lock = threading.Lock()
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    server.serve_forever()


class StreamBackend:
    """The backend process; collects one report per connection, keyed by seed."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--backend"],
                                     stdout=subprocess.PIPE, text=True)
        self.reports = {}
        self.cond = threading.Condition()
        first = self.proc.stdout.readline()
        check(first, "the backend process exited before it listened")
        self.port = json.loads(first)["port"]
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self):
        for line in self.proc.stdout:
            report = json.loads(line)
            with self.cond:
                self.reports[report["seed"]] = report
                self.cond.notify_all()

    def wait_reports(self, seeds, timeout_s):
        with self.cond:
            done = self.cond.wait_for(lambda: all(s in self.reports for s in seeds), timeout=timeout_s)
            check(done, f"the backend reported {len(self.reports)} of {len(seeds)} connections")
            return {s: self.reports[s] for s in seeds}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


# ---------------------------------------------------------------- the slow clients

def cpu_seconds(pid):
    """utime + stime of a process, from /proc/PID/stat (fields 14 and 15, after the comm)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def slow_then_fast_client(port, seed, length, slow_until):
    """Requests `length` bytes of `seed`'s stream, reads slowly until `slow_until`, then at full
    speed to EOF; returns (bytes, sha256 hex)."""
    loop = asyncio.get_running_loop()
    digest = hashlib.sha256()
    received = 0
    buf = bytearray(FAST_READ_BYTES)
    view = memoryview(buf)
    with socket.socket() as sock:
        sock.setblocking(False)
        await loop.sock_connect(sock, ("127.0.0.1", port))
        await loop.sock_sendall(sock, REQUEST.pack(seed, length))
        while time.monotonic() < slow_until:
            n = await loop.sock_recv_into(sock, view[:SLOW_READ_BYTES])
            if not n:
                break
            digest.update(view[:n])
            received += n
            await asyncio.sleep(SLOW_INTERVAL_S)
        while True:
            n = await loop.sock_recv_into(sock, view)
            if not n:
                return received, digest.hexdigest()
            digest.update(view[:n])
            received += n


class PressureWindow:
    """ferryd's CPU share of one CPU over CPU_WINDOW_S of the slow phase, and what its rings did
    meanwhile (one scrape on each side of the CPU reading, so the scrapes are not counted)."""

    async def sample(self, d, started):
        await asyncio.sleep(started + CPU_WINDOW_S[0] - time.monotonic())
        first = await asyncio.to_thread(Metrics, d)
        cpu_before, wall_before = cpu_seconds(d.proc.pid), time.monotonic()
        await asyncio.sleep(CPU_WINDOW_S[1] - CPU_WINDOW_S[0])
        self.cpu_share = (cpu_seconds(d.proc.pid) - cpu_before) / (time.monotonic() - wall_before)
        last = await asyncio.to_thread(Metrics, d)
        for family in ("ferry_uring_enobufs_total", "ferry_uring_parks_total", "ferry_uring_cqes_total"):
            setattr(self, family.split("_")[2], last.value(family) - first.value(family))
        self.free_buffers = last.value("ferry_uring_buffer_ring_free")
        self.enobufs_before = first.value("ferry_uring_enobufs_total")  # while connections opened


async def slow_readers(d, port, requests):
    """Runs every client and the pressure window at once; returns (results per seed, window,
    slow phase's end)."""
    started = time.monotonic()
    slow_until = started + SLOW_S
    clients = [slow_then_fast_client(port, seed, length, slow_until) for seed, length in requests.items()]
    window = PressureWindow()
    sampler = asyncio.ensure_future(window.sample(d, started))
    results = await asyncio.wait_for(asyncio.gather(*clients, return_exceptions=True), RUN_TIMEOUT_S)
    await sampler
    return dict(zip(requests, results)), window, slow_until


# ---------------------------------------------------------------- the runs

def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def settled_fd_count(pid):
    """The fd count once it held for 5 samples 50 ms apart (a scrape's socket closes just after
    the answer)."""
    counts = []
    wait_until(lambda: counts.append(fd_count(pid)) or counts[-5:] == [counts[-1]] * 5, 5,
               f"ferryd's fd count to settle: {counts[-10:]}", interval=0.05)
    return counts[-1]


def per_worker(m, name):
    return {labels["worker"]: value for n, labels, value in m.samples if n == name}


def ring_whole(d):
    m = Metrics(d)
    free = per_worker(m, "ferry_uring_buffer_ring_free")
    held = per_worker(m, "ferry_uring_buffer_ring_held")
    return len(free) == WORKERS and all(v == RING_BUFFERS for v in free.values()) and \
        not any(held.values())


def slow_readers_on_a_small_ring(w, credit_bytes):
    """The whole run; returns the figures (ENOBUFS, parks, CPU share) for the caller's asserts."""
    port = free_port()
    backend = StreamBackend()
    try:
        buffers = {"count": RING_BUFFERS, "bytes": RING_BUFFER_BYTES, "recv_credit_bytes": credit_bytes}
        cfg = base_config(w, services=[proxy_service(port, [f"127.0.0.1:{backend.port}"])],
                          tcp={"workers": WORKERS, "buffers": buffers})
        with running(w, cfg) as d:
            before = Metrics(d)
            check_eq(per_worker(before, "ferry_uring_buffer_ring_buffers"),
                     {k: RING_BUFFERS for k in per_worker(before, "ferry_uring_buffer_ring_buffers")},
                     "every worker's ring has tcp.buffers.count buffers")
            fds_before = settled_fd_count(d.proc.pid)
            rng = random.Random(credit_bytes)
            requests = {(credit_bytes << 32) + i: rng.randint(*PAYLOAD_BYTES) for i in range(CONNECTIONS)}

            started = time.monotonic()
            results, window, slow_until = asyncio.run(slow_readers(d, port, requests))
            fast_s = time.monotonic() - slow_until
            reports = backend.wait_reports(list(requests), timeout_s=10)
            errors = [f"{seed}: {r!r}" for seed, r in results.items() if isinstance(r, BaseException)]
            check_eq(errors[:3], [], f"client errors ({len(errors)} of {CONNECTIONS})")
            for seed, length in requests.items():
                got_bytes, got_sha = results[seed]
                report = reports[seed]
                check_eq(report["error"], None, f"backend of connection {seed}")
                check_eq((report["bytes"], got_bytes), (length, length), f"bytes sent, received on {seed}")
                check_eq(got_sha, report["sha"], f"sha256 of connection {seed}'s {length} B")

            after = wait_idle(d)
            wait_until(lambda: ring_whole(d), 5, f"{RING_BUFFERS} buffers free and none held on "
                       f"each of the {WORKERS} workers' rings")
            wait_until(lambda: fd_count(d.proc.pid) == fds_before, 5,
                       f"ferryd's fd count back to {fds_before} (now {fd_count(d.proc.pid)})")
            check_eq(ok(d.request("status"), "status")["tcp"]["running"], True, "ferryd still serving")
            check_eq(d.proc.poll(), None, "ferryd alive")
            for family in ("ferry_proxy_connections_failed_total", "ferry_proxy_resets_total"):
                check_eq(after.value(family, service="web"), before.value(family, service="web"), family)
            check_eq(after.value("ferry_uring_recv_protocol_errors_total"), 0, "ring protocol errors")
            enobufs = after.value("ferry_uring_enobufs_total")
            parks = after.value("ferry_uring_parks_total")
            total = sum(requests.values())
            print(f"  credit {credit_bytes} B, {CONNECTIONS} connections, {total >> 20} MiB through "
                  f"{WORKERS} x {RING_BUFFERS} x {RING_BUFFER_BYTES} B rings: slow "
                  f"{slow_until - started:.1f}s + fast {fast_s:.1f}s ({total / fast_s / 2**20:.0f} "
                  f"MiB/s); ENOBUFS {enobufs:.0f} ({window.enobufs_before:.0f} in the first "
                  f"{CPU_WINDOW_S[0]}s), parks {parks:.0f} in all", flush=True)
            print(f"  while readers were slow ({CPU_WINDOW_S[1] - CPU_WINDOW_S[0]:.0f}s): ferryd CPU "
                  f"{100 * window.cpu_share:.1f}% of one CPU, ENOBUFS {window.enobufs:.0f}, parks "
                  f"{window.parks:.0f}, receive completions {window.cqes:.0f}, {window.free_buffers:.0f} "
                  f"buffers free at the end; after: rings whole, fds back to {fds_before}", flush=True)
            check(window.cpu_share < CPU_BOUND, f"ferryd took {100 * window.cpu_share:.1f}% of one CPU "
                  f"while every reader was slow (bound {100 * CPU_BOUND:.0f}%): a recv spinning on a dry ring?")
            check(window.cqes > 0, "no receive completed while the readers were slow: nothing moved")
            return {"enobufs": enobufs, "parks": parks, "window": window}
    finally:
        backend.stop()


def test_without_credit_recvs_end_with_enobufs_and_nothing_spins(workdir):
    figures = slow_readers_on_a_small_ring(workdir, credit_bytes=0)
    check(figures["window"].enobufs > 0, "no ENOBUFS while the readers were slow: the CPU bound "
          "was not measured on the dry-ring path")


def test_with_credit_recvs_park_instead_of_enobufs(workdir):
    figures = slow_readers_on_a_small_ring(workdir, credit_bytes=CREDIT_BYTES)
    # The credit's promise (docs/uring.md, "Ring credit") is that no recv finds a ring dry: recvs
    # wait parked for credit instead. It does not hold here yet (open, docs/testing.md): a recv
    # whose idle credit was taken stays armed, and the client's FIN (or a backend's late answer)
    # arriving on a dry ring ends it with ENOBUFS: up to 126 a run against 90,000+ parks, where
    # without the credit ENOBUFS are about 95% of parks. Asserted until it is fixed: sockets
    # park instead, ENOBUFS stay under 1% of parks.
    check(figures["enobufs"] < figures["parks"] / 100, f"ENOBUFS with the ring credit on: "
          f"{figures['enobufs']:.0f} against {figures['parks']:.0f} parks")
    check(figures["window"].parks > 0, "no socket parked while the readers were slow: the CPU "
          "bound was not measured with the credit exhausted")


if __name__ == "__main__":  # StreamBackend runs this file as its loopback backend
    backend_main()
