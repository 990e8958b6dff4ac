"""ferryd lifecycle with the real binary: READY/STATUS/WATCHDOG/STOPPING, graceful stop, exit
codes of --check-config and --version, refusal of a bad config."""
import os
import signal
import subprocess

from harness import FERRYD, SOURCE_ROOT, Daemon, base_config, check, check_eq, ok


def test_ready_notifies_status_and_stop_removes_socket(workdir, ferryd):
    d = ferryd(base_config(workdir))
    ready = d.notify.wait_for("READY")
    check("STATUS" in ready and "control" in ready["STATUS"], f"READY without STATUS: {ready}")
    sock = d.socket_path
    check(os.path.exists(sock), "control socket exists while running")
    status = ok(d.request("status"), "status")
    check_eq(status["state"], "running", "status.state")
    check_eq(status["pid"], d.proc.pid, "status.pid")
    check_eq(status["config_path"], d.config_path, "status.config_path")
    check_eq(oct(os.stat(sock).st_mode & 0o777), "0o660", "socket mode")
    check_eq(oct(os.stat(os.path.dirname(sock)).st_mode & 0o777), "0o750", "socket dir mode")
    check_eq(d.stop(), 0, "exit code after SIGTERM")
    d.notify.wait_for("STOPPING")
    check(not os.path.exists(sock), "socket file removed after SIGTERM")
    check("ferryd stopped" in d.log(), "stop is logged")


def test_sigint_stops_gracefully(workdir, ferryd):
    d = ferryd(base_config(workdir))
    d.signal(signal.SIGINT)
    check_eq(d.proc.wait(timeout=15), 0, "exit code after SIGINT")
    check(not os.path.exists(d.socket_path), "socket file removed after SIGINT")


def test_watchdog_is_pinged_while_threads_beat(workdir, ferryd):
    d = ferryd(base_config(workdir), watchdog_usec=400000)
    for _ in range(3):
        d.notify.wait_for("WATCHDOG", timeout=3, fresh=True)
    workers = ok(d.request("workers"), "workers")["workers"]
    check(any(x["name"] == "control" and x["alive"] for x in workers), f"control alive: {workers}")


def test_check_config_accepts_shipped_and_rejects_bad(workdir):
    for shipped in ("etc/ferry/ferryd.json", "etc/ferry/demo.json"):
        r = subprocess.run([FERRYD, "--check-config", "--config", os.path.join(SOURCE_ROOT, shipped)],
                           capture_output=True, text=True)
        check_eq(r.returncode, 0, f"--check-config {shipped} ({r.stderr})")
    bad = workdir.write_config('{\n  "metrics": { "listen": "127.0.0.1:99999" }\n}\n', name="bad.json")
    r = subprocess.run([FERRYD, "--check-config", "--config", bad], capture_output=True, text=True)
    check_eq(r.returncode, 78, "exit code for an invalid config")
    check(r.stderr.startswith(f"{bad}:2:"), f"FILE:LINE:COL prefix in {r.stderr!r}")
    r = subprocess.run([FERRYD, "--check-config", "--config", workdir.file("missing.json")],
                       capture_output=True, text=True)
    check_eq(r.returncode, 78, "exit code for a missing config file")


def test_daemon_refuses_to_start_on_bad_config(workdir):
    bad = workdir.write_config('{ "control": { "sokcet": "/tmp/x" } }', name="bad.json")
    r = subprocess.run([FERRYD, "--config", bad], capture_output=True, text=True, timeout=10)
    check_eq(r.returncode, 78, "exit code")
    check(f"{bad}:1:" in r.stderr and "sokcet" in r.stderr, f"error names the key: {r.stderr!r}")


def test_version_and_usage(workdir):
    r = subprocess.run([FERRYD, "--version"], capture_output=True, text=True)
    check_eq(r.returncode, 0, "--version exit")
    check(r.stdout.startswith("ferryd "), f"--version output {r.stdout!r}")
    r = subprocess.run([FERRYD, "--bogus"], capture_output=True, text=True)
    check_eq(r.returncode, 64, "unknown argument exit (EX_USAGE)")


def test_metrics_port_in_use_fails_clearly_and_releases_socket(workdir):
    import socket as so
    blocker = so.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    port = blocker.getsockname()[1]
    try:
        cfg = base_config(workdir, metrics={"listen": f"127.0.0.1:{port}"})
        path = workdir.write_config(cfg)
        d = Daemon(workdir, path)
        try:
            code = d.proc.wait(timeout=15)
            check_eq(code, 1, "exit code when metrics.listen is taken")
            check(f"127.0.0.1:{port}" in d.log() and "in use" in d.log(), f"clear error:\n{d.log()}")
            check(not os.path.exists(cfg["control"]["socket"]), "control socket released on failure")
        finally:
            d.cleanup()
    finally:
        blocker.close()
