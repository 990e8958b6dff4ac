"""Debian's real Prometheus server scrapes a real ferryd on loopback: the target is up and a ferry
counter is stored, asked through Prometheus' own HTTP query API."""
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request

from harness import TestFailure, base_config, check, check_eq, metrics_endpoint, running

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
SCRAPE_INTERVAL_S = 1
DEADLINE_S = 60


class PrometheusServer:
    """One prometheus process on 127.0.0.1 with its TSDB in the test's workdir."""

    def __init__(self, workdir, target):
        self.config_path = workdir.file("prometheus.yml")
        with open(self.config_path, "w") as f:
            f.write("global:\n"
                    f"  scrape_interval: {SCRAPE_INTERVAL_S}s\n"
                    f"  evaluation_interval: {SCRAPE_INTERVAL_S}s\n"
                    "scrape_configs:\n"
                    "  - job_name: ferry\n"
                    "    static_configs:\n"
                    f"      - targets: ['{target}']\n")
        self.log_path = workdir.file("prometheus.log")
        self.log_file = open(self.log_path, "w")
        # Port 0: the kernel picks a free port, read back from /proc below, so parallel runs
        # and a Prometheus already on 9090 cannot collide with the test.
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={self.config_path}",
             f"--storage.tsdb.path={workdir.file('tsdb')}", "--web.listen-address=127.0.0.1:0",
             "--storage.tsdb.retention.time=1h", "--log.level=info"],
            stdout=self.log_file, stderr=subprocess.STDOUT)
        self.port = None

    def log(self):
        self.log_file.flush()
        with open(self.log_path) as f:
            return f.read()

    def listening_port(self):
        """The TCP port the process listens on, from its socket inodes and /proc/net/tcp."""
        if self.proc.poll() is not None:
            raise TestFailure(f"prometheus exited with {self.proc.returncode}:\n{self.log()}")
        inodes = set()
        fd_dir = f"/proc/{self.proc.pid}/fd"
        for fd in os.listdir(fd_dir):
            try:
                link = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            m = re.fullmatch(r"socket:\[(\d+)\]", link)
            if m:
                inodes.add(m.group(1))
        with open(f"/proc/{self.proc.pid}/net/tcp") as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and inode in inodes and local.startswith("0100007F:"):
                    return int(local.split(":")[1], 16)
        return None

    def wait_listening(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            port = self.listening_port()
            if port:
                self.port = port
                return port
            time.sleep(0.1)
        raise TestFailure(f"prometheus not listening within {timeout}s:\n{self.log()}")

    def query(self, expr):
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as resp:
            body = json.load(resp)
        check_eq(body.get("status"), "success", f"query {expr!r}: {body}")
        return body["data"]["result"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()


def wait_for_result(prom, expr, timeout):
    """Polls the query API: a scrape is only observable through the stored series."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = prom.query(expr)
        if result:
            return result
        time.sleep(0.25)
    raise TestFailure(f"no result for {expr!r} within {timeout}s:\n{prom.log()[-3000:]}")


def test_prometheus_scrapes_ferryd(workdir):
    check(os.access(PROMETHEUS, os.X_OK), f"{PROMETHEUS} is not installed (make deps installs prometheus)")
    with running(workdir, base_config(workdir)) as d:
        host, port = metrics_endpoint(d)
        # Some control requests first, so the counter below has a known, non-zero lower bound.
        for _ in range(3):
            d.request("status")
        prom = PrometheusServer(workdir, f"{host}:{port}")
        try:
            prom.wait_listening(timeout=30)
            up = wait_for_result(prom, 'up{job="ferry"}', timeout=DEADLINE_S)
            check_eq(len(up), 1, f"one ferry target: {up}")
            check_eq(up[0]["value"][1], "1", f"up of the ferry target {up[0]['metric']}")
            check_eq(up[0]["metric"].get("instance"), f"{host}:{port}", "scraped instance")

            reqs = wait_for_result(prom, 'ferry_control_requests_total{job="ferry",cmd="status",result="ok"}',
                                   timeout=DEADLINE_S)
            check(float(reqs[0]["value"][1]) >= 3, f"stored status request counter >= 3: {reqs}")
            info = prom.query('ferry_build_info{job="ferry"}')
            check_eq(len(info), 1, f"build info series: {info}")
            check(info[0]["metric"].get("version"), f"build info has a version label: {info}")
        finally:
            prom.stop()
