"""`make demo` end to end: tests/lab/demo.sh builds its netns lab, runs ferryd on
etc/ferry/demo.json, drives UDP and TCP traffic, shows `ferryctl top`, and its summary must show
answers from all three backends on both paths, no errors, and every namespace removed afterwards; interrupted with
Ctrl-C (SIGINT) halfway, it must still remove everything it created."""
import os
import re
import signal
import subprocess
import time

import pytest

from harness import check

SOURCE_ROOT = os.environ.get("SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "../.."))
DEMO = os.path.join(SOURCE_ROOT, "tests/lab/demo.sh")
BACKENDS = ["backend-2", "backend-3", "backend-4"]


@pytest.fixture(scope="module", autouse=True)
def as_root():
    check(os.geteuid() == 0, "test_demo: needs root (network namespaces, XDP)")


def demo_namespaces():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith("fdemo")]


def ferryd_running_demo():
    out = subprocess.run(["pgrep", "-af", "ferryd.*demo.json"], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if "pgrep" not in line]


def block(text, title):
    """{name: count} of the indented lines under `title` in the summary."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == title)
    counts = {}
    for line in lines[start + 1:]:
        m = re.match(r"^\s+(\S+)\s+([\d,]+)$", line)
        if not m:
            break
        counts[m.group(1)] = int(m.group(2).replace(",", ""))
    return counts


def env(seconds):
    e = dict(os.environ, DEMO_SECONDS=str(seconds))
    return e


def test_demo_balances_both_paths_and_cleans_up():
    before = demo_namespaces()
    run = subprocess.run([DEMO], env=env(6), capture_output=True, text=True, timeout=240)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    summary = out[out.index("== summary"):]
    # It reads cleanly: quiet backends, the live view (ferryctl top, a frame every 5 s off a
    # terminal) with every service and its backends up, and a summary that fits on one screen.
    assert "Traceback" not in out, out[-4000:]
    live = out[out.index("== traffic"):out.index("== summary")]
    for row in (r"dns-demo\s+udp\s+10\.77\.0\.10:5353\s+fastpath\s+3/3 up",
                r"web-demo\s+tcp\s+10\.77\.0\.10:8080\s+proxy\s+3/3 up",
                r"echo\s+tcp\s+127\.0\.0\.1:7007\s+echo"):
        assert re.search(row, live), live
    assert re.search(r"fast path rx [\d.]+ kpps", live), live
    summary_lines = summary.splitlines()
    print(f"demo output {len(out.splitlines())} lines, summary {len(summary_lines)}")
    assert len(summary_lines) <= 30, summary
    assert len(out.splitlines()) <= 60, out
    udp = block(summary, "answers per backend:")
    tcp = block(summary, "responses per backend:")
    print(f"UDP answers per backend {udp}, TCP responses per backend {tcp}")
    # The senders keep veth's default offloads (partial checksums): ferry's rewrites must leave
    # checksums the receivers accept, or the datagrams die in their stacks.
    m = re.search(r"Udp InCsumErrors\): client (\d+), backends (\d+)", summary)
    assert m and (int(m.group(1)), int(m.group(2))) == (0, 0), summary
    assert sorted(udp) == BACKENDS and min(udp.values()) > 0, summary
    assert sorted(tcp) == BACKENDS and min(tcp.values()) > 0, summary
    m = re.search(r"UDP \(AF_XDP, Maglev\): ([\d,]+) requests sent, ([\d,]+) answers back", summary)
    sent, answered = (int(g.replace(",", "")) for g in m.groups())
    # ferry holds frames while it resolves a next hop, so none is lost to that; the margin is for
    # answers still in flight when the client stops listening 0.5 s after its last request.
    assert answered >= sent * 0.95, summary
    assert re.search(r"TCP \(io_uring proxy\): [\d,]+ connections, [\d,]+ responses, [\d.,]+ MiB, 0 errors",
                     summary), summary
    proxied = block(summary, "bytes proxied, backend -> client:")
    assert min(proxied.values()) > 0, summary
    assert "demo lab removed" in out
    assert demo_namespaces() == before, demo_namespaces()
    assert not ferryd_running_demo()


def test_demo_interrupted_removes_everything():
    before = demo_namespaces()
    proc = subprocess.Popen([DEMO], env=env(60), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        seen = []
        deadline = time.monotonic() + 120
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("== traffic"):
                break
            assert time.monotonic() < deadline, "".join(seen)
        time.sleep(3)
        assert len(demo_namespaces()) == len(before) + 3
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
        rest, _ = proc.communicate(timeout=60)
        out = "".join(seen) + rest
        assert "demo lab removed" in out, out[-3000:]
        assert proc.returncode != 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert demo_namespaces() == before, demo_namespaces()
    assert not ferryd_running_demo()
    assert not os.path.exists("/run/ferry/demo.sock")
