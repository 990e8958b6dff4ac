"""TCP semantics and failures through the real daemon's proxy: half-close both ways, resets
propagated both ways (also while backpressure pauses a direction), the idle timeout, connect
refused or timed out with a retry on the other backend, a health-checked backend down and up, a
backend killed mid-stream, every backend down, and a backend that stops reading."""
import random
import socket
import threading
import time

from harness import base_config, check, check_eq, ok, running, wait_until
from proxy_peers import (Backend, BlackholePort, BlockingClient, Metrics, backends, closed_port,
                         free_port, hello_port, op, proxy_service, proxy_to_one_backend,
                         read_rss_bytes, refused_end, wait_idle)


def test_client_half_close_reaches_backend_and_response_still_arrives(workdir):
    with proxy_to_one_backend(workdir) as (d, b, port):
        c = BlockingClient("127.0.0.1", port)
        c.echo(random.Random(1).randbytes(70000))
        # W: the backend answers only after it has seen our FIN, so the answer proves the
        # FIN crossed the proxy while the backend->client direction stayed open.
        c.send(op("W", 300000))
        c.send(b"trailing bytes before the FIN")
        c.sock.shutdown(socket.SHUT_WR)
        c.recv_count(300000)
        end, _ = c.wait_end()
        check_eq(end, "eof", "after the response")
        c.close()
        record = b.wait_closed(c.id)
        check_eq(record["end"], "eof", "backend saw the client's FIN")
        c.tally.check_against(record)
        wait_idle(d)


def test_backend_half_close_reaches_client_and_upload_continues(workdir):
    with proxy_to_one_backend(workdir) as (d, b, port):
        c = BlockingClient("127.0.0.1", port)
        c.send(op("F", 100000))
        c.recv_count(100000)
        end, _ = c.wait_end()
        check_eq(end, "eof", "the backend's FIN reaches the client")
        c.send(random.Random(2).randbytes(2 << 20))
        c.sock.shutdown(socket.SHUT_WR)
        record = b.wait_closed(c.id)
        check_eq(record["end"], "eof", "backend read the upload to the client's FIN")
        c.tally.check_against(record)
        c.close()
        wait_idle(d)


def test_backend_reset_reaches_client(workdir):
    with proxy_to_one_backend(workdir) as (d, b, port):
        c = BlockingClient("127.0.0.1", port)
        c.echo(b"before the reset")
        c.send(op("R", 0))
        end, seconds = c.wait_end(timeout_s=5)
        check_eq(end, "reset", "client sees the backend's RST as ECONNRESET")
        check(seconds < 2.0, f"reset took {seconds:.2f}s")
        c.close()
        check_eq(b.wait_closed(c.id)["end"], "sent_reset", "backend reset")
        wait_idle(d)
        check_eq(Metrics(d).value("ferry_proxy_resets_total", service="web"), 1, "resets_total")


def test_client_reset_reaches_backend(workdir):
    with proxy_to_one_backend(workdir) as (d, b, port):
        c = BlockingClient("127.0.0.1", port)
        c.send(op("T"))
        b.wait_hello(c.id)
        started = time.monotonic()
        c.reset()
        record = b.wait_closed(c.id, timeout_s=5)
        check_eq(record["end"], "reset", "backend sees the client's RST as ECONNRESET, not a FIN")
        check(time.monotonic() - started < 2.0, "reset propagated promptly")
        wait_idle(d)
        check_eq(Metrics(d).value("ferry_proxy_resets_total", service="web"), 1, "resets_total")


def test_idle_timeout_resets_the_idle_connection_only(workdir):
    idle_ms = 400
    with proxy_to_one_backend(workdir, tcp={"proxy": {"idle_timeout_ms": idle_ms}}) as (d, b, port):
        idle = BlockingClient("127.0.0.1", port)
        idle.send(op("T"))
        b.wait_hello(idle.id)
        busy = BlockingClient("127.0.0.1", port)
        end_holder = {}
        waiter = threading.Thread(target=lambda: end_holder.update(end=idle.wait_end(timeout_s=5)))
        waiter.start()
        # The busy connection talks every 100 ms for three idle periods and must survive.
        deadline = time.monotonic() + 3 * idle_ms / 1000
        while time.monotonic() < deadline:
            busy.echo(b"still here")
            time.sleep(0.1)
        waiter.join(timeout=10)
        end, seconds = end_holder["end"]
        check_eq(end, "reset", "idle client is reset")
        check(0.8 * idle_ms / 1000 <= seconds <= idle_ms / 1000 + 1.5,
              f"reset {seconds:.2f}s after the last byte, idle_timeout_ms {idle_ms}")
        record = b.wait_closed(idle.id, timeout_s=5)
        check_eq(record["end"], "reset", "idle backend side is reset")
        idle.close()
        busy.echo(b"after the idle one went")
        busy.finish()
        busy.tally.check_against(b.wait_closed(busy.id))
        m = Metrics(d)
        check_eq(m.value("ferry_proxy_idle_timeouts_total", service="web"), 1, "idle_timeouts_total")


def test_connect_refused_retries_on_the_other_backend(workdir):
    port = free_port()
    dead = closed_port()
    try:
        dead_end = f"127.0.0.1:{dead.getsockname()[1]}"
        with backends(["127.0.0.1:0"]) as (b,):
            service = proxy_service(port, [dead_end, b.endpoint()], balance="round_robin")
            with running(workdir, base_config(workdir, services=[service])) as d:
                rng = random.Random(3)
                for _ in range(8):
                    c = BlockingClient("127.0.0.1", port)
                    c.echo(rng.randbytes(rng.randint(1, 200000)))
                    c.finish()
                    c.tally.check_against(b.wait_closed(c.id))
                wait_idle(d)
                m = Metrics(d)
                retries = m.value("ferry_proxy_retries_total", service="web")
                failures = m.value("ferry_proxy_backend_connect_failures_total", backend=dead_end)
                check(retries >= 1, f"round robin put some first attempts on the dead backend: {retries}")
                check_eq(retries, failures, "every retry follows a connect failure on the closed port")
                check_eq(m.value("ferry_proxy_backend_connections_total", backend=b.endpoint()), 8,
                         "all eight landed on the live backend")
                check_eq(m.value("ferry_proxy_backend_connections_total", backend=dead_end), 0,
                         "none on the dead one")
                check_eq(m.value("ferry_proxy_connections_failed_total", service="web"), 0, "none failed")
    finally:
        dead.close()


def test_connect_timeout_retries_on_the_other_backend(workdir):
    timeout_ms = 300
    port = free_port()
    hole = BlackholePort()
    try:
        with backends(["127.0.0.1:0"]) as (b,):
            service = proxy_service(port, [hole.endpoint(), b.endpoint()], balance="round_robin")
            cfg = base_config(workdir, services=[service], tcp={"proxy": {"connect_timeout_ms": timeout_ms}})
            with running(workdir, cfg) as d:
                waits = []
                for _ in range(4):
                    started = time.monotonic()
                    c = BlockingClient("127.0.0.1", port)
                    c.echo(b"after a connect timeout, maybe")
                    waits.append(time.monotonic() - started)
                    c.finish()
                    c.tally.check_against(b.wait_closed(c.id))
                m = wait_idle(d)
                timeouts = m.value("ferry_proxy_backend_connect_failures_total", backend=hole.endpoint())
                check(timeouts >= 1, f"round robin tried the unanswering backend: {timeouts}")
                check_eq(m.value("ferry_proxy_retries_total", service="web"), timeouts, "each timeout retried")
                check_eq(m.value("ferry_proxy_backend_connections_total", backend=b.endpoint()), 4,
                         "all four on the live backend")
                slow = sorted(waits)[-int(timeouts):]
                check(all(timeout_ms / 1000 * 0.9 <= s < timeout_ms / 1000 + 2.0 for s in slow),
                      f"a retried client waited about connect_timeout_ms: {waits}")
    finally:
        hole.close()


def test_health_checked_down_backend_gets_no_new_connections_until_up(workdir):
    port = free_port()
    dead = closed_port()
    dead_port = dead.getsockname()[1]
    dead_end = f"127.0.0.1:{dead_port}"
    revived = None
    try:
        with backends(["127.0.0.1:0"]) as (b,):
            health = {"interval_ms": 100, "timeout_ms": 50, "rise": 1, "fall": 1}
            service = proxy_service(port, [dead_end, b.endpoint()], balance="round_robin", health=health)
            with running(workdir, base_config(workdir, services=[service])) as d:
                def up(endpoint):
                    return Metrics(d).value("ferry_proxy_backend_up", service="web", backend=endpoint)

                wait_until(lambda: up(dead_end) == 0, 5, "the closed backend marked down")
                check_eq(up(b.endpoint()), 1, "the live backend stays up")
                before = Metrics(d)
                for _ in range(6):
                    c = BlockingClient("127.0.0.1", port)
                    c.echo(b"only the live one")
                    c.finish()
                    check_eq(b.wait_hello(c.id)["port"], b.port, "landed on the live backend")
                after = Metrics(d)
                for family, labels in (("ferry_proxy_retries_total", {"service": "web"}),
                                       ("ferry_proxy_backend_connect_failures_total", {"backend": dead_end})):
                    check_eq(after.value(family, **labels), before.value(family, **labels),
                             f"{family}: the down backend was not even tried")
                dead.close()
                revived = Backend([dead_end])
                wait_until(lambda: up(dead_end) == 1, 5, "the revived backend marked up")
                landed = set()
                for _ in range(6):
                    c = BlockingClient("127.0.0.1", port)
                    c.echo(b"both again")
                    c.finish()
                    landed.add(hello_port([revived, b], c.id))
                check_eq(landed, {dead_port, b.port}, "round robin over both once the backend is up")
    finally:
        dead.close()
        if revived:
            revived.stop()


def test_backend_killed_mid_stream_ends_client_promptly(workdir):
    port = free_port()
    victim = Backend()
    try:
        with running(workdir, base_config(workdir, services=[proxy_service(port, [victim.endpoint()])])) as d:
            c = BlockingClient("127.0.0.1", port)
            c.send(op("S", 1 << 30))
            c.recv_count(1 << 20)
            victim.kill()
            end, seconds = c.wait_end(timeout_s=10)
            check(end in ("reset", "eof"), f"client sees the end of the stream, got {end}")
            check(seconds < 5.0, f"client waited {seconds:.2f}s")
            check(c.tally.in_bytes < 1 << 30, "stream cut short")
            c.close()
            wait_idle(d, timeout_s=5)
            check_eq(ok(d.request("status"))["tcp"]["running"], True, "daemon still serving")
            # A new client now finds no backend: turned away, counted failed, nothing hangs.
            end, _ = refused_end("127.0.0.1", port)
            check_eq(end, "reset", "client of a service whose only backend is gone")
    finally:
        victim.stop()


def test_all_backends_down_resets_client_and_counts_failed(workdir):
    port = free_port()
    dead = [closed_port(), closed_port()]
    try:
        ends = [f"127.0.0.1:{s.getsockname()[1]}" for s in dead]
        with running(workdir, base_config(workdir, services=[proxy_service(port, ends)])) as d:
            for attempt in (1, 2):
                started = time.monotonic()
                end, _ = refused_end("127.0.0.1", port)
                check_eq(end, "reset", f"client {attempt} with every backend down")
                check(time.monotonic() - started < 3.0, "turned away promptly (refused, not timed out)")
            wait_idle(d)
            m = Metrics(d)
            check_eq(m.value("ferry_proxy_connections_failed_total", service="web"), 2, "failed_total")
            failures = sum(m.value("ferry_proxy_backend_connect_failures_total", backend=e) for e in ends)
            check(failures >= 4, f"each client tried both backends: {failures} connect failures")
            check_eq(m.value("ferry_proxy_retries_total", service="web"), failures - 2,
                     "retries = attempts after the first")
    finally:
        for s in dead:
            s.close()


def stalled_upload(d, port, b, seconds=3.0):
    """Opens a connection to a backend that reads nothing and pushes into it for `seconds`;
    returns (client, bytes accepted, ferryd RSS growth)."""
    warm = BlockingClient("127.0.0.1", port)
    warm.echo(random.Random(4).randbytes(1 << 20))
    warm.finish()
    baseline_rss = read_rss_bytes(d.proc.pid)
    c = BlockingClient("127.0.0.1", port)
    c.send(op("Z"))
    b.wait_hello(c.id)
    c.sock.settimeout(0.5)
    piece = bytes(64 << 10)
    sent = 0
    peak_rss = baseline_rss
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and sent < 256 << 20:
        try:
            sent += c.sock.send(piece)
        except socket.timeout:
            pass
        peak_rss = max(peak_rss, read_rss_bytes(d.proc.pid))
    return c, sent, peak_rss - baseline_rss


def test_backend_that_stops_reading_bounds_the_upload(workdir):
    with proxy_to_one_backend(workdir) as (d, b, port):
        c, sent, growth = stalled_upload(d, port, b)
        print(f"  client got {sent} B into a backend that reads nothing; ferryd RSS growth "
              f"{growth / 2**20:.1f} MiB", flush=True)
        check(sent < 64 << 20, f"the upload was not held back: {sent} B accepted")
        check(growth < 64 << 20, f"ferryd RSS grew {growth} B")
        c.close()


def test_client_reset_reaches_backend_while_its_direction_is_paused(workdir):
    with proxy_to_one_backend(workdir) as (d, b, port):
        c, _, _ = stalled_upload(d, port, b, seconds=1.5)
        c.reset()
        record = b.wait_closed(c.id, timeout_s=5)
        check_eq(record["end"], "reset", "the stalled backend is reset when the client resets")
        wait_idle(d, timeout_s=5)


def test_backend_reset_reaches_client_while_its_direction_is_paused(workdir):
    with proxy_to_one_backend(workdir) as (d, b, port):
        c = BlockingClient("127.0.0.1", port, timeout_s=15)
        c.send(op("P", 256 << 20))  # we read nothing: the backend resets after a 1 s stall
        record = b.wait_closed(c.id, timeout_s=15)
        check_eq(record["end"], "sent_reset", "backend gave up on the stalled stream")
        wait_idle(d, timeout_s=5)
        end, _ = c.wait_end(timeout_s=10)
        check_eq(end, "reset", "client reads what was forwarded, then the reset")
        c.close()
