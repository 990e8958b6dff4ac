"""The TCP echo service of the real daemon, on the io_uring runtime: byte-exact echo with many
connections and large messages, the runtime's workers in status/workers, reload adding and
removing the service, and an idle daemon starting no TCP worker."""
import hashlib
import os
import random
import socket
import threading

from harness import base_config, check, check_eq, ok


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def echo_service(port):
    return {"name": "echo", "vip": "127.0.0.1", "port": port, "protocols": ["tcp"], "mode": "echo"}


def echo_roundtrip(port, sizes, errors):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
            for size in sizes:
                payload = os.urandom(size)
                sender = threading.Thread(target=s.sendall, args=(payload,))
                sender.start()
                got = bytearray()
                while len(got) < size:
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        raise AssertionError(f"EOF after {len(got)} of {size} bytes")
                    got += chunk
                sender.join()
                if hashlib.sha256(got).digest() != hashlib.sha256(payload).digest():
                    raise AssertionError(f"echo of {size} bytes differs")
    except Exception as e:  # noqa: BLE001 (collected and reported by the test thread)
        errors.append(repr(e))


def test_echo_is_byte_exact_for_many_connections(workdir, ferryd):
    port = free_port()
    d = ferryd(base_config(workdir, services=[echo_service(port)]))
    status = ok(d.request("status"))["tcp"]
    check_eq(status["running"], True, "tcp runtime running")
    check_eq([l["service"] for l in status["listeners"]], ["echo"], "listeners")
    rng = random.Random(7)
    errors, threads = [], []
    for _ in range(64):
        sizes = [rng.choice([1, 100, 4096, 65536, rng.randint(1, 1 << 20)]) for _ in range(4)]
        t = threading.Thread(target=echo_roundtrip, args=(port, sizes, errors))
        t.start()
        threads.append(t)
    for t in threads:
        t.join(timeout=120)
    check_eq(errors, [], "echo errors")
    workers = ok(d.request("workers"))["workers"]
    tcp = [x for x in workers if x["kind"] == "tcp"]
    check_eq(len(tcp), 2, f"two tcp workers (tcp.workers default): {workers}")
    check(all(x["alive"] for x in tcp), "tcp workers alive")
    check(sum(x.get("tasks_run", 0) for x in tcp) > 0, f"tasks ran: {tcp}")


def test_idle_daemon_starts_no_tcp_worker_and_reload_adds_and_removes(workdir, ferryd):
    port = free_port()
    cfg = base_config(workdir)
    d = ferryd(cfg)
    check_eq(ok(d.request("status"))["tcp"]["running"], False, "no TCP service, no runtime")
    check_eq([x for x in ok(d.request("workers"))["workers"] if x["kind"] == "tcp"], [],
             "no tcp workers")
    cfg["services"] = [echo_service(port)]
    workdir.write_config(cfg)
    result = ok(d.request("reload"), "reload adding echo")
    check_eq(result["tcp"]["added"], ["echo"], f"added: {result}")
    errors = []
    echo_roundtrip(port, [12345], errors)
    check_eq(errors, [], "echo after reload")
    cfg["services"] = []
    workdir.write_config(cfg)
    ok(d.request("reload"), "reload removing echo")
    with socket.socket() as s:
        check(s.connect_ex(("127.0.0.1", port)) != 0, "listener closed after removal")
    check_eq(d.stop(), 0, "graceful stop")
