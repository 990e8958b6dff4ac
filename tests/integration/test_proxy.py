"""The TCP proxy of the real daemon against real loopback backends: byte-exact forwarding both
ways on 256 connections (also with bundles or incremental rings forced off), IPv6, a slow reader
that must not grow the daemon or slow others, reloads that change backends under live
connections or drain a removed service, the balance policies, the service and global accept
limits, and the ferry_proxy_* counters matching the bytes."""
import random
import socket
import threading
import time

from harness import base_config, check, check_eq, ok, running, wait_until
from proxy_peers import (BlockingClient, Metrics, backends, free_port, op, proxy_service,
                         proxy_to_one_backend, random_plan, read_rss_bytes, refused_end, run_many, wait_idle)

CONNECTIONS = 256
STEPS_PER_CONNECTION = 4


def socket_refused(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def landing_ports(b, clients):
    return [b.wait_hello(c.id)["port"] for c in clients]


def sequential_landings(b, port, count):
    """Opens `count` connections one after another, each finished before the next; returns the
    backend port each landed on."""
    clients = []
    for _ in range(count):
        c = BlockingClient("127.0.0.1", port)
        c.echo(b"which backend?")
        c.finish()
        clients.append(c)
    return landing_ports(b, clients)


def check_byte_exact_many(w, seed, env=None, tcp=None):
    with proxy_to_one_backend(w, tcp=tcp, env=env) as (d, b, port):
        rng = random.Random(seed)
        plans = [random_plan(rng, STEPS_PER_CONNECTION) for _ in range(CONNECTIONS)]
        started = time.monotonic()
        tallies, errors = run_many("127.0.0.1", port, plans, seed=seed, timeout_s=120)
        elapsed_s = time.monotonic() - started
        check_eq(errors[:5], [], f"client errors ({len(errors)} of {CONNECTIONS} connections)")
        for t in tallies:
            t.check_against(b.wait_closed(t.id))
        sent = sum(t.out_bytes for t in tallies)
        received = sum(t.in_bytes for t in tallies)
        print(f"  {CONNECTIONS} connections, {sent} B up, {received} B down, {elapsed_s:.2f}s "
              f"({(sent + received) / elapsed_s / 2**20:.0f} MiB/s)", flush=True)
        m = wait_idle(d)
        check_eq(m.value("ferry_proxy_connections_total", service="web"), CONNECTIONS, "connections_total")
        check_eq(m.value("ferry_proxy_bytes_in_total", service="web"), sent, "bytes_in_total = client bytes")
        check_eq(m.value("ferry_proxy_bytes_out_total", service="web"), received,
                 "bytes_out_total = backend bytes")
        check_eq(m.value("ferry_proxy_backend_bytes_in_total", backend=b.endpoint()), sent,
                 "backend bytes_in")
        check_eq(m.value("ferry_proxy_backend_bytes_out_total", backend=b.endpoint()), received,
                 "backend bytes_out")
        check_eq(m.value("ferry_proxy_backend_connections_total", backend=b.endpoint()), CONNECTIONS,
                 "backend connections_total")
        check_eq(m.value("ferry_proxy_backend_connect_seconds_count", backend=b.endpoint()), CONNECTIONS,
                 "one connect latency observed per connection")
        for family in ("ferry_proxy_connections_failed_total", "ferry_proxy_resets_total",
                       "ferry_proxy_retries_total", "ferry_proxy_connections_refused_total"):
            check_eq(m.value(family, service="web"), 0, family)
        check_eq(d.stop(), 0, "graceful stop")


def test_forwarding_is_byte_exact_for_256_connections(workdir):
    check_byte_exact_many(workdir, seed=5)


def test_forwarding_is_byte_exact_with_bundles_off(workdir):
    check_byte_exact_many(workdir, seed=6, env={"FERRY_URING_BUNDLE": "off"})


def test_forwarding_is_byte_exact_with_incremental_off(workdir):
    check_byte_exact_many(workdir, seed=7, tcp={"buffers": {"incremental": "off"}})


def test_forwarding_over_ipv6_is_byte_exact(workdir):
    port = free_port("::1")
    with backends(["[::1]:0"]) as (b,):
        service = proxy_service(port, [f"[::1]:{b.port}"], vip="::1")
        with running(workdir, base_config(workdir, services=[service])) as d:
            rng = random.Random(8)
            tallies, errors = run_many("::1", port, [random_plan(rng, 4) for _ in range(16)], seed=8)
            check_eq(errors, [], "client errors")
            for t in tallies:
                t.check_against(b.wait_closed(t.id))
            m = wait_idle(d)
            check_eq(m.value("ferry_proxy_bytes_in_total", service="web"), sum(t.out_bytes for t in tallies),
                     "bytes_in_total")


def test_slow_reader_keeps_rss_bounded_and_others_at_full_speed(workdir):
    stream_bytes = 100 << 20
    fast_bytes = 64 << 20
    with proxy_to_one_backend(workdir) as (d, b, port):
        warm = BlockingClient("127.0.0.1", port)
        warm.send(op("S", 4 << 20))
        warm.recv_count(4 << 20)
        warm.finish()
        baseline_rss = read_rss_bytes(d.proc.pid)

        slow = BlockingClient("127.0.0.1", port, timeout_s=30)
        slow.send(op("S", stream_bytes))
        peak_rss = [baseline_rss]
        slow_read = 0
        fast_result = {}

        def fast_connection():
            try:
                c = BlockingClient("127.0.0.1", port, timeout_s=30)
                started = time.monotonic()
                c.send(op("S", fast_bytes))
                c.recv_count(fast_bytes)
                fast_result["seconds"] = time.monotonic() - started
                c.finish()
                fast_result["tally"] = c.tally
            except Exception as e:  # noqa: BLE001 (checked below)
                fast_result["error"] = repr(e)

        fast = None
        slow_until = time.monotonic() + 4.0
        next_read = time.monotonic()
        while time.monotonic() < slow_until:
            slow.recv_count(1024)
            slow_read += 1024
            peak_rss.append(read_rss_bytes(d.proc.pid))
            if fast is None and time.monotonic() > slow_until - 3.0:
                fast = threading.Thread(target=fast_connection)
                fast.start()
            next_read += 0.010
            time.sleep(max(0.0, next_read - time.monotonic()))
        fast.join(timeout=60)
        check(not fast.is_alive(), "fast connection finished")
        check("error" not in fast_result, f"fast connection: {fast_result.get('error')}")
        growth = max(peak_rss) - baseline_rss
        print(f"  slow reader read {slow_read} B in 4 s; ferryd RSS {baseline_rss >> 20} MiB, "
              f"peak growth {growth / 2**20:.1f} MiB; {fast_bytes >> 20} MiB beside it in "
              f"{fast_result['seconds']:.2f}s", flush=True)
        check(growth < 64 << 20, f"ferryd RSS grew {growth} B while a reader was slow")
        check(fast_result["seconds"] < 10.0, f"{fast_bytes} B took {fast_result['seconds']:.1f}s")
        fast_result["tally"].check_against(b.wait_closed(fast_result["tally"].id))
        m = Metrics(d)
        held = m.value("ferry_proxy_backend_bytes_out_total", backend=b.endpoint()) - (4 << 20) - fast_bytes
        print(f"  the proxy took {held} B of the slow stream from the backend", flush=True)
        check(held < 32 << 20, f"the proxy took {held} B from the backend for a reader that read {slow_read} B")
        # The slow stream, once read at full speed, is still byte-exact.
        slow.recv_count(stream_bytes - slow_read)
        slow.finish()
        slow.tally.check_against(b.wait_closed(slow.id))


def test_reload_changes_backends_without_dropping_connections(workdir):
    port = free_port()
    with backends(["127.0.0.1:0", "127.0.0.1:0"]) as (b,):
        a_end, b_end = b.endpoint(0), b.endpoint(1)
        cfg = base_config(workdir, services=[proxy_service(port, [a_end], balance="round_robin")])
        with running(workdir, cfg) as d:
            rng = random.Random(9)

            def open_clients(n):
                clients = [BlockingClient("127.0.0.1", port) for _ in range(n)]
                for c in clients:
                    c.echo(rng.randbytes(rng.randint(1, 100000)))
                return clients

            def finish_clients(clients):
                for c in clients:
                    c.echo(rng.randbytes(rng.randint(1, 300000)))
                    c.send(op("S", 1 << 20))
                    c.recv_count(1 << 20)
                    c.finish()
                    c.tally.check_against(b.wait_closed(c.id))
                return [b.closed[c.id]["port"] for c in clients]

            before_add = open_clients(8)
            check_eq(set(landing_ports(b, before_add)), {b.ports[0]}, "first set: only A")
            cfg["services"][0]["backends"] = [a_end, b_end]
            workdir.write_config(cfg)
            ok(d.request("reload"), "reload adding B")
            check_eq(set(finish_clients(before_add)), {b.ports[0]}, "established on A finish on A")
            after_add = open_clients(8)
            check_eq(set(landing_ports(b, after_add)), set(b.ports), "new ones on both A and B")

            cfg["services"][0]["backends"] = [b_end]
            workdir.write_config(cfg)
            ok(d.request("reload"), "reload removing A")
            finish_clients(after_add)
            after_remove = open_clients(8)
            check_eq(set(landing_ports(b, after_remove)), {b.ports[1]}, "after removal: only B")
            finish_clients(after_remove)

            m = wait_idle(d)
            check_eq(m.value("ferry_proxy_connections_total", service="web"), 24, "connections_total")
            check_eq(m.value("ferry_proxy_resets_total", service="web"), 0, "no connection was reset")


def test_service_removal_drains_then_resets_open_connections(workdir):
    drain_ms = 1000
    port, echo_port = free_port(), free_port()
    with backends(["127.0.0.1:0"]) as (b,):
        echo = {"name": "echo", "vip": "127.0.0.1", "port": echo_port, "protocols": ["tcp"], "mode": "echo"}
        cfg = base_config(workdir, services=[proxy_service(port, [b.endpoint()]), echo],
                          tcp={"proxy": {"drain_timeout_ms": drain_ms}})
        with running(workdir, cfg) as d:
            finishing, lingering = BlockingClient("127.0.0.1", port), BlockingClient("127.0.0.1", port)
            finishing.echo(b"open before the reload")
            lingering.echo(b"open before the reload")
            cfg["services"] = [echo]
            workdir.write_config(cfg)
            reload_result = {}
            reloader = threading.Thread(target=lambda: reload_result.update(r=d.request("reload")))
            removed_at = time.monotonic()
            reloader.start()
            wait_until(lambda: socket_refused(port), 5, "the removed service's listener closed")
            finishing.echo(b"still forwarded while draining")
            finishing.send(op("S", 1 << 20))
            finishing.recv_count(1 << 20)
            finishing.finish()
            finishing.tally.check_against(b.wait_closed(finishing.id))
            end, _ = lingering.wait_end(timeout_s=drain_ms / 1000 + 5)
            reset_after = time.monotonic() - removed_at
            check_eq(end, "reset", "a connection still open when the drain time is up")
            check(drain_ms / 1000 * 0.9 <= reset_after <= drain_ms / 1000 + 2.0,
                  f"reset {reset_after:.2f}s after the reload, drain_timeout_ms {drain_ms}")
            check_eq(b.wait_closed(lingering.id)["end"], "reset", "its backend side reset too")
            lingering.close()
            reloader.join(timeout=10)
            ok(reload_result["r"], "reload removing the proxy service")


def test_balance_policies_pick_backends_as_documented(workdir):
    port = free_port()
    with backends(["127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"]) as (b,):
        ends = [b.endpoint(i) for i in range(3)]
        cfg = base_config(workdir, services=[proxy_service(port, ends[:2], balance="round_robin")])
        with running(workdir, cfg) as d:
            got = sequential_landings(b, port, 4)
            check_eq(sorted(got), sorted(b.ports[:2] * 2), f"round robin over two backends: {got}")

            cfg["services"][0]["balance"] = "least_connections"
            workdir.write_config(cfg)
            ok(d.request("reload"), "reload to least_connections")
            first = BlockingClient("127.0.0.1", port)
            first.echo(b"held")
            second = BlockingClient("127.0.0.1", port)
            second.echo(b"held")
            a, c = landing_ports(b, [first, second])
            check(a != c, f"least_connections puts the second open connection on the other backend: {a} {c}")
            first.finish()
            second.finish()

            cfg["services"][0]["balance"] = "maglev"
            cfg["services"][0]["backends"] = ends
            workdir.write_config(cfg)
            ok(d.request("reload"), "reload to maglev over three")
            got = sequential_landings(b, port, 6)
            check_eq(len(set(got)), 1, f"maglev keeps one client address on one backend: {got}")
            wait_idle(d)


def test_service_max_connections_refuses_the_next_and_counts_it(workdir):
    limit = 4
    port = free_port()
    with backends(["127.0.0.1:0"]) as (b,):
        service = proxy_service(port, [b.endpoint()], max_connections=limit)
        with running(workdir, base_config(workdir, services=[service])) as d:
            admitted = [BlockingClient("127.0.0.1", port) for _ in range(limit)]
            for c in admitted:
                c.echo(b"admitted")
            end, extra_id = refused_end("127.0.0.1", port)
            check_eq(end, "reset", f"connection {limit + 1} over max_connections")
            check(extra_id not in b.hellos, "the refused connection never reached the backend")
            m = Metrics(d)
            check_eq(m.value("ferry_proxy_connections_refused_total", service="web", reason="service_limit"), 1,
                     "refused{service_limit}")
            check_eq(m.value("ferry_proxy_connections_active", service="web"), limit, "active at the cap")
            admitted.pop().finish()
            wait_until(lambda: Metrics(d).value("ferry_proxy_connections_active", service="web") == limit - 1,
                       10, "a slot freed")
            again = BlockingClient("127.0.0.1", port)
            again.echo(b"fits again")
            again.finish()
            for c in admitted:
                c.finish()
            m = wait_idle(d)
            check_eq(m.value("ferry_proxy_connections_total", service="web"), limit + 1, "admitted in total")
            check_eq(m.value("ferry_proxy_connections_refused_total", service="web"), 1, "refused in total")


def test_global_max_connections_caps_all_services_together(workdir):
    ports = [free_port(), free_port()]
    with backends(["127.0.0.1:0"]) as (b,):
        services = [proxy_service(ports[0], [b.endpoint()], name="one"),
                    proxy_service(ports[1], [b.endpoint()], name="two")]
        cfg = base_config(workdir, services=services, tcp={"proxy": {"max_connections": 3}})
        with running(workdir, cfg) as d:
            admitted = [BlockingClient("127.0.0.1", p) for p in (ports[0], ports[1], ports[0])]
            for c in admitted:
                c.echo(b"in")
            end, _ = refused_end("127.0.0.1", ports[1])
            check_eq(end, "reset", "the fourth connection over tcp.proxy.max_connections")
            m = Metrics(d)
            check_eq(m.value("ferry_proxy_connections_refused_total", service="two", reason="global_limit"), 1,
                     "refused{two, global_limit}")
            for c in admitted:
                c.finish()


def test_services_command_reports_the_same_proxy_counters_as_metrics(workdir):
    with proxy_to_one_backend(workdir) as (d, b, port):
        held = BlockingClient("127.0.0.1", port)
        held.echo(b"open while we look")
        for _ in range(3):
            c = BlockingClient("127.0.0.1", port)
            c.echo(b"done")
            c.finish()
        wait_until(lambda: Metrics(d).value("ferry_proxy_connections_active", service="web") == 1, 10,
                   "only the held connection open")
        m = Metrics(d)
        services = {s["name"]: s for s in ok(d.request("services"))["services"]}
        proxy = services["web"].get("proxy")
        check(proxy is not None, f"services carries 'proxy' for a TCP proxy service: {services['web']}")
        check_eq(proxy["active"], 1, "services proxy.active")
        check_eq(proxy["total"], m.value("ferry_proxy_connections_total", service="web"), "proxy.total")
        check_eq(proxy["total"], 4, "proxy.total")
        check_eq([(x["backend"], x["active"], x["total"]) for x in proxy["backends"]],
                 [(b.endpoint(), 1, 4)], "per-backend rows")
        check_eq(ok(d.request("status"))["tcp"]["proxy"]["connections"], 1, "status tcp.proxy.connections")
        held.finish()
