#!/usr/bin/env python3
"""ferryctl against the real daemon: human tables, --json, watch with rates, and the exit codes
for a daemon that is not running."""
import json
import subprocess

from harness import FERRYCTL, base_config, check, check_eq, run_tests, running


def ctl(d, *args, timeout=20):
    return subprocess.run([FERRYCTL, "--socket", d.socket_path, *args], capture_output=True,
                          text=True, timeout=timeout)


SERVICES = [
    {"name": "dns", "vip": "10.0.0.10", "port": 53, "protocols": ["udp"],
     "backends": ["10.0.1.2:53", "10.0.1.3:53"]},
    {"name": "echo", "vip": "127.0.0.1", "port": 7007, "protocols": ["tcp"], "mode": "echo"},
]


def human_tables_for_every_read_command(w):
    with running(w, base_config(w, services=SERVICES)) as d:
        r = ctl(d, "status")
        check_eq(r.returncode, 0, f"status exit ({r.stderr})")
        check(str(d.proc.pid) in r.stdout and "running" in r.stdout, f"status output:\n{r.stdout}")
        check(not r.stdout.lstrip().startswith("{"), "status is not raw JSON")
        r = ctl(d, "services")
        check_eq(r.returncode, 0, "services exit")
        lines = r.stdout.splitlines()
        check(lines[0].split()[0] == "NAME", f"services header:\n{r.stdout}")
        check(any(l.startswith("dns") and "10.0.0.10:53" in l and "10.0.1.3:53" in l for l in lines),
              f"dns row:\n{r.stdout}")
        r = ctl(d, "workers")
        check(r.returncode == 0 and "control" in r.stdout, f"workers:\n{r.stdout}")
        r = ctl(d, "stats")
        check(r.returncode == 0 and "ferry_control_requests_total" in r.stdout, f"stats:\n{r.stdout}")
        r = ctl(d, "config")
        check(r.returncode == 0 and '"dns"' in r.stdout, f"config:\n{r.stdout}")


def json_flag_prints_the_raw_response(w):
    with running(w, base_config(w)) as d:
        r = ctl(d, "--json", "status")
        check_eq(r.returncode, 0, "exit")
        doc = json.loads(r.stdout)
        check_eq(doc["ok"], True, "ok")
        check_eq(doc["result"]["pid"], d.proc.pid, "pid")
        r = ctl(d, "status", "--json")
        check_eq(json.loads(r.stdout)["result"]["pid"], d.proc.pid, "--json after the command")


def watch_shows_rates_from_successive_snapshots(w):
    with running(w, base_config(w)) as d:
        r = ctl(d, "watch", "--interval-ms", "300", "--count", "3")
        check_eq(r.returncode, 0, f"watch exit ({r.stderr})")
        check("RATE" in r.stdout, f"rate column:\n{r.stdout}")
        # the requests counter grows with watch's own requests, so the last snapshot has a rate
        last = r.stdout.strip().split("\n\n")[-1]
        row = [l for l in last.splitlines() if l.startswith("ferry_control_requests_total")
               and "cmd=stats" in l]
        check(row and row[0].split()[-1] not in ("-", "0", "0.0"), f"stats request rate:\n{last}")


def reload_via_ferryctl_and_rejected_reload_exit_code(w):
    cfg = base_config(w)
    with running(w, cfg) as d:
        r = ctl(d, "reload")
        check_eq(r.returncode, 0, f"reload exit ({r.stderr})")
        path = w.write_config('{ "metrics": { "listen": 5 } }')
        r = ctl(d, "reload")
        check_eq(r.returncode, 1, "rejected reload exit code")
        check(f"{path}:1:" in r.stderr, f"FILE:LINE:COL on stderr: {r.stderr!r}")


def daemon_not_running_exit_code(w):
    r = subprocess.run([FERRYCTL, "--socket", w.file("nope.sock"), "status"], capture_output=True,
                       text=True, timeout=10)
    check_eq(r.returncode, 3, "exit code")
    check("not running" in r.stderr, f"message: {r.stderr!r}")
    r = subprocess.run([FERRYCTL, "frobnicate"], capture_output=True, text=True, timeout=10)
    check_eq(r.returncode, 2, "usage error exit code")


if __name__ == "__main__":
    run_tests([
        human_tables_for_every_read_command,
        json_flag_prints_the_raw_response,
        watch_shows_rates_from_successive_snapshots,
        reload_via_ferryctl_and_rejected_reload_exit_code,
        daemon_not_running_exit_code,
    ])
