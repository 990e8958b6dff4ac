"""ferryctl against the real daemon: human tables, --json, watch with rates, and the exit codes
for a daemon that is not running."""
import json
import subprocess

from harness import FERRYCTL, base_config, check, check_eq


SERVICES = [
    {"name": "dns", "vip": "10.0.0.10", "port": 53, "protocols": ["udp"],
     "backends": ["10.0.1.2:53", "10.0.1.3:53"]},
    {"name": "echo", "vip": "127.0.0.1", "port": 7008, "protocols": ["tcp"], "mode": "echo"},
]


def test_human_tables_for_every_read_command(workdir, ferryd, ferryctl):
    d = ferryd(base_config(workdir, services=SERVICES))
    r = ferryctl(d, "status")
    check_eq(r.returncode, 0, f"status exit ({r.stderr})")
    check(str(d.proc.pid) in r.stdout and "running" in r.stdout, f"status output:\n{r.stdout}")
    check(not r.stdout.lstrip().startswith("{"), "status is not raw JSON")
    r = ferryctl(d, "services")
    check_eq(r.returncode, 0, "services exit")
    lines = r.stdout.splitlines()
    check(lines[0].split()[0] == "NAME", f"services header:\n{r.stdout}")
    check(any(l.startswith("dns") and "10.0.0.10:53" in l and "10.0.1.3:53" in l for l in lines),
          f"dns row:\n{r.stdout}")
    r = ferryctl(d, "workers")
    check(r.returncode == 0 and "control" in r.stdout, f"workers:\n{r.stdout}")
    r = ferryctl(d, "stats")
    check(r.returncode == 0 and "ferry_control_requests_total" in r.stdout, f"stats:\n{r.stdout}")
    r = ferryctl(d, "config")
    check(r.returncode == 0 and '"dns"' in r.stdout, f"config:\n{r.stdout}")


def test_json_flag_prints_the_raw_response(workdir, ferryd, ferryctl):
    d = ferryd(base_config(workdir))
    r = ferryctl(d, "--json", "status")
    check_eq(r.returncode, 0, "exit")
    doc = json.loads(r.stdout)
    check_eq(doc["ok"], True, "ok")
    check_eq(doc["result"]["pid"], d.proc.pid, "pid")
    r = ferryctl(d, "status", "--json")
    check_eq(json.loads(r.stdout)["result"]["pid"], d.proc.pid, "--json after the command")


def test_watch_shows_rates_from_successive_snapshots(workdir, ferryd, ferryctl):
    d = ferryd(base_config(workdir))
    r = ferryctl(d, "watch", "--interval-ms", "300", "--count", "3")
    check_eq(r.returncode, 0, f"watch exit ({r.stderr})")
    check("RATE" in r.stdout, f"rate column:\n{r.stdout}")
    # the requests counter grows with watch's own requests, so the last snapshot has a rate
    last = r.stdout.strip().split("\n\n")[-1]
    row = [l for l in last.splitlines() if l.startswith("ferry_control_requests_total")
           and "cmd=stats" in l]
    check(row and row[0].split()[-1] not in ("-", "0", "0.0"), f"stats request rate:\n{last}")


def test_reload_via_ferryctl_and_rejected_reload_exit_code(workdir, ferryd, ferryctl):
    cfg = base_config(workdir)
    d = ferryd(cfg)
    r = ferryctl(d, "reload")
    check_eq(r.returncode, 0, f"reload exit ({r.stderr})")
    path = workdir.write_config('{ "metrics": { "listen": 5 } }')
    r = ferryctl(d, "reload")
    check_eq(r.returncode, 1, "rejected reload exit code")
    check(f"{path}:1:" in r.stderr, f"FILE:LINE:COL on stderr: {r.stderr!r}")


def test_daemon_not_running_exit_code(workdir, ferryctl):
    r = ferryctl(workdir.file("nope.sock"), "status", timeout=10)
    check_eq(r.returncode, 3, "exit code")
    check("not running" in r.stderr, f"message: {r.stderr!r}")
    r = subprocess.run([FERRYCTL, "frobnicate"], capture_output=True, text=True, timeout=10)
    check_eq(r.returncode, 2, "usage error exit code")
