"""The control socket of the real daemon: stale files, a second daemon, bad-input barrage, slow
and many clients, access levels for a non-root uid."""
import json
import os
import pwd
import resource
import socket

from harness import (Daemon, base_config, check, check_eq, ferryctl, ok,
                     tcp_control_config)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_stale_socket_file_is_replaced(workdir, ferryd):
    cfg = base_config(workdir)
    sock_path = cfg["control"]["socket"]
    os.makedirs(os.path.dirname(sock_path), mode=0o750)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(sock_path)
    stale.close()  # the file stays, nobody listens: what a crashed daemon leaves behind
    d = ferryd(cfg)
    check_eq(ok(d.request("status"))["state"], "running", "serves on the replaced socket")


def test_second_daemon_on_same_socket_is_refused(workdir, ferryd):
    cfg = base_config(workdir)
    first = ferryd(cfg)
    path2 = workdir.write_config(cfg, name="second.json")
    second = Daemon(workdir, path2, name="second")
    try:
        code = second.proc.wait(timeout=15)
        check_eq(code, 1, "second daemon exit code")
        check("already running" in second.log() and str(first.proc.pid) in second.log(),
              f"message names the running daemon:\n{second.log()}")
    finally:
        second.cleanup()
    check_eq(ok(first.request("status"))["pid"], first.proc.pid, "first daemon unaffected")


def test_symlink_at_socket_path_is_refused(workdir):
    cfg = base_config(workdir)
    sock_path = cfg["control"]["socket"]
    os.makedirs(os.path.dirname(sock_path), mode=0o750)
    target = workdir.file("precious")
    open(target, "w").close()
    os.symlink(target, sock_path)
    d = Daemon(workdir, workdir.write_config(cfg))
    try:
        check_eq(d.proc.wait(timeout=15), 1, "exit code")
        check(os.path.exists(target) and os.path.islink(sock_path), "symlink and target untouched")
    finally:
        d.cleanup()


def test_barrage_of_bad_input_gets_errors_and_daemon_keeps_answering(workdir, ferryd):
    d = ferryd(base_config(workdir))
    with d.client() as c:
        cases = [b"{not json\n", b"[1,2,3]\n", b"\"str\"\n", b'{"id":1}\n',
                 b'{"id":"x","cmd":"status"}\n', b'{"id":2,"cmd":"no_such"}\n',
                 b'{"id":3,"cmd":"stats","args":{"prefix":5}}\n', b'{"id":4,"cmd":"status","args":[]}\n',
                 b"\xff\xfe\x00garbage\x01\x02\n", b'{"id":5,"cmd":"status","extra":1}\n',
                 b"[" * 5000 + b"\n"]
        for raw in cases:
            c.send_raw(raw)
            resp = c.read_line()
            check(resp is not None and resp["ok"] is False, f"error answer for {raw[:40]!r}: {resp}")
        check_eq(ok(c.request("status"))["state"], "running", "same connection still answers")
    # a line over 64 KiB: error or close, never a hang, and other clients unaffected
    with d.client() as c:
        try:
            c.send_raw(b'{"id":1,"cmd":"status","args":{"x":"' + b"a" * 70000 + b'"}}\n')
            resp = c.read_line()
            check(resp is None or resp["error"]["code"] == "too_large", f"too_large: {resp}")
        except (BrokenPipeError, ConnectionResetError):
            pass
    # half-written requests, then the client goes away
    for _ in range(50):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(d.socket_path)
        s.sendall(b'{"id":1,"cmd":"sta')
        s.close()
    check_eq(ok(d.request("status"))["state"], "running", "daemon answers after the barrage")


def test_clients_that_never_read_are_cut_off_with_bounded_memory(workdir, ferryd):
    d = ferryd(base_config(workdir))
    before = rss_kib(d.proc.pid)
    hogs = []
    for _ in range(8):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(d.socket_path)
        s.setblocking(False)
        req = b'{"id":1,"cmd":"config"}\n' * 2000
        sent = 0
        try:
            while sent < len(req) * 20:
                sent += s.send(req)
        except (BlockingIOError, BrokenPipeError, ConnectionResetError):
            pass
        hogs.append(s)
    check_eq(ok(d.request("status"))["state"], "running", "other clients still served")
    growth = rss_kib(d.proc.pid) - before
    check(growth < 64 * 1024, f"RSS grew by {growth} KiB with 8 non-reading clients")
    for s in hogs:
        s.close()


def test_thousand_concurrent_clients_are_all_answered(workdir, ferryd):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    d = ferryd(base_config(workdir))
    clients = []
    for _ in range(1000):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(20)
        s.connect(d.socket_path)
        clients.append(s)
    for i, s in enumerate(clients):
        s.sendall(json.dumps({"id": i, "cmd": "status"}).encode() + b"\n")
    answered = 0
    for i, s in enumerate(clients):
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        if buf:
            resp = json.loads(buf.split(b"\n")[0])
            answered += resp.get("id") == i and resp.get("ok") is True
        s.close()
    # The cap is 1024 connections; our own checks above fit under it.
    check_eq(answered, 1000, "answered clients")
    check_eq(ok(d.request("status"))["state"], "running", "daemon answers afterwards")


def test_non_root_uid_reads_but_cannot_reload(workdir, ferryd):
    cfg = base_config(workdir, control={"socket": workdir.file("ctl/ferryd.sock"), "mode": "0666",
                                        "group": None})
    nobody = pwd.getpwnam("nobody")
    d = ferryd(cfg)
    os.chmod(os.path.dirname(d.socket_path), 0o755)
    r = ferryctl(d, "status", user=nobody, timeout=10)
    check_eq(r.returncode, 0, f"status as nobody ({r.stderr})")
    r = ferryctl(d, "--json", "reload", user=nobody, timeout=10)
    check_eq(r.returncode, 4, f"reload as nobody exit code ({r.stdout} {r.stderr})")
    check("permission_denied" in r.stdout + r.stderr, f"permission_denied: {r.stdout} {r.stderr}")
    check_eq(ok(d.request("status"))["reloads"], 0, "nothing was reloaded")
    check_eq(ok(d.request("reload"))["reloaded"], True, "root may reload")


def test_uid_outside_socket_permissions_cannot_connect(workdir, ferryd):
    nobody = pwd.getpwnam("nobody")
    d = ferryd(base_config(workdir))
    os.chmod(os.path.dirname(d.socket_path), 0o755)
    r = ferryctl(d, "status", user=nobody, timeout=10)
    check_eq(r.returncode, 4, f"exit code for EACCES ({r.stderr})")
    check("permission denied" in r.stderr.lower(), f"message: {r.stderr}")


def test_tcp_control_needs_the_token(workdir, ferryd):
    cfg = tcp_control_config(workdir, "s3cret-token")
    d = ferryd(cfg)
    host, port = ok(d.request("status"))["control"]["tcp"].rsplit(":", 1)

    def session(first_line):
        with socket.create_connection((host, int(port)), timeout=10) as s:
            f = s.makefile("rwb")
            f.write(first_line + b"\n")
            f.write(b'{"id":1,"cmd":"reload"}\n')
            f.flush()
            return [json.loads(l) for l in f.readlines()]

    answers = session(b'{"auth":"wrong"}')
    check_eq(answers[0]["ok"], False, "wrong token refused")
    check_eq(answers[0]["error"]["code"], "unauthorized", "error code")
    check_eq(len(answers), 1, "connection closed after a wrong token")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        f = s.makefile("rwb")
        f.write(b'{"auth":"s3cret-token"}\n{"id":1,"cmd":"reload"}\n')
        f.flush()
        check_eq(json.loads(f.readline())["ok"], True, "token accepted")
        check_eq(json.loads(f.readline())["result"]["reloaded"], True, "token holder is admin")
    counters = ok(d.request("stats", {"prefix": "ferry_control_rejected"}))["metrics"][0]["samples"]
    auth = [c["value"] for c in counters if c["labels"]["reason"] == "auth"][0]
    check_eq(auth, 1, "failed authentication counted")
