"""The real /metrics endpoint: promtool-clean Prometheus text, the process families, and the
same numbers as the control protocol's stats (one registry feeds both)."""
import re
import socket
import subprocess

from harness import base_config, check, check_eq, http_get, metrics_endpoint, ok


def parse_samples(text):
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            samples[key] = float(value)
    return samples


def test_scrape_passes_promtool(workdir, ferryd):
    d = ferryd(base_config(workdir))
    host, port = metrics_endpoint(d)
    code, headers, body = http_get(host, port)
    check_eq(code, 200, "status code")
    check(headers.get("content-type", "").startswith("text/plain; version=0.0.4"),
          f"content type {headers}")
    r = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, timeout=30)
    check_eq(r.returncode, 0, f"promtool check metrics: {r.stdout!r} {r.stderr!r}")
    text = body.decode()
    for family in ("ferry_build_info", "ferry_start_time_seconds", "ferry_config_reloads_total",
                   "ferry_config_reload_failures_total", "ferry_control_requests_total"):
        check(f"# TYPE {family} " in text, f"{family} has a TYPE line")
    check(re.search(r'^ferry_build_info\{version="[^"]+"\} 1$', text, re.M), "build_info sample")
    for line in text.splitlines():
        if line.startswith("# TYPE ") and line.endswith(" counter"):
            check(line.split()[2].endswith("_total"), f"counter name {line}")


def test_every_exported_family_is_documented(workdir, ferryd):
    import os
    from harness import SOURCE_ROOT
    with open(os.path.join(SOURCE_ROOT, "docs", "metrics.md")) as f:
        doc = f.read()
    d = ferryd(base_config(workdir))
    host, port = metrics_endpoint(d)
    _, _, body = http_get(host, port)
    families = [l.split()[2] for l in body.decode().splitlines() if l.startswith("# TYPE ")]
    check(families, "scrape has families")
    missing = [f for f in families if f"`{f}`" not in doc]
    check(not missing, f"families missing from docs/metrics.md: {missing}")


def test_stats_and_metrics_agree(workdir, ferryd):
    d = ferryd(base_config(workdir))
    for _ in range(3):
        ok(d.request("status"))
    host, port = metrics_endpoint(d)
    _, _, body = http_get(host, port)
    scraped = parse_samples(body.decode())
    stats = ok(d.request("stats", {"prefix": "ferry_config_re"}))["metrics"]
    for fam in stats:
        for sample in fam["samples"]:
            check_eq(scraped[fam["name"]], sample["value"], fam["name"])
    key = 'ferry_control_requests_total{cmd="status",result="ok"}'
    check(scraped.get(key, 0) >= 4, f"{key} counts the status requests: {scraped.get(key)}")


def test_other_paths_and_bad_requests(workdir, ferryd):
    d = ferryd(base_config(workdir))
    host, port = metrics_endpoint(d)
    check_eq(http_get(host, port, "/nope")[0], 404, "unknown path")
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"\x16\x03\x01garbage\r\n\r\n")
        reply = s.recv(4096)
        check(reply.startswith(b"HTTP/1.1 400") or reply == b"", f"garbage answered: {reply[:60]!r}")
    check_eq(http_get(host, port)[0], 200, "still serving /metrics")


def test_metrics_can_be_disabled(workdir, ferryd):
    d = ferryd(base_config(workdir, metrics={'listen': None}))
    status = ok(d.request("status"))
    check_eq(status["metrics"], None, "status.metrics when disabled")


def test_documented_alert_rules_pass_promtool(workdir):
    """The sample alert rules in docs/metrics.md are valid rules that name real metric families."""
    import os
    doc = open(os.path.join(os.environ.get("SOURCE_ROOT", "../.."), "docs/metrics.md")).read()
    blocks = re.findall(r"```yaml\n(.*?)```", doc, re.S)
    check_eq(len(blocks), 1, "one yaml block of alert rules in docs/metrics.md")
    rules = workdir.file("rules.yml")
    with open(rules, "w") as f:
        f.write(blocks[0])
    r = subprocess.run(["promtool", "check", "rules", rules], capture_output=True, text=True, timeout=30)
    check_eq(r.returncode, 0, f"promtool check rules: {r.stdout} {r.stderr}")
    documented = set(re.findall(r"^\| `(ferry_[a-z_]+)`", doc, re.M))
    for name in set(re.findall(r"\b(ferry_[a-z_]+)", blocks[0])):
        check(name in documented, f"alert rule metric {name} is a documented family")
