"""A handover of encapsulating services under load (docs/dsr.md, docs/upgrade.md): `ferryctl
upgrade` while kept-alive HTTP connections (ipip over IPv4, gue over IPv6) hold their backends, a
long transfer runs and dnsperf sends DNS over UDP. The backends' weights change first, so
Maglev's table no longer names every connection's backend: only the flow table the new ferryd
takes over keeps them there. Nothing is lost: every connection answers from its backend after
the upgrade, the transfer arrives whole, dnsperf loses no query."""
import hashlib
import json
import subprocess
import threading

import pytest

from dsr_lab import (BACKENDS4, BACKENDS6, BIG_BYTES, CLIENT4, DNS, DsrLab, HTTP, NAMES, VIP4,
                     VIP6, dsr_config)
from harness import check, check_eq, total
from test_dns import dnsperf
from upgrade_lab import Lineage, become_subreaper

CONNECTIONS = 24  # per VIP


@pytest.fixture(scope="module")
def lab():
    import harness
    w = harness.Workdir()
    lab = DsrLab(w)
    try:
        lab.start_servers()
        yield lab
    finally:
        lab.close()
        w.cleanup()


def slow_download(lab, vip):
    """curl of the big file at 1 MiB/s (about 3 s) from the client: its process, started."""
    host = f"[{vip}]" if ":" in vip else vip
    return subprocess.Popen(["ip", "netns", "exec", lab.client.name, "curl", "-sS", "-g",
                             "--max-time", "60", "--limit-rate", "1M", "-o", "-",
                             f"http://{host}:{HTTP}/big"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def test_upgrade_under_load_loses_no_connection_flow_or_query(lab):
    become_subreaper()  # the new ferryd, once its parent (the old one) is gone, is ours to reap
    w = lab.w
    lineage = Lineage(w, w.write_config(dsr_config(w)), lab.gw.name)
    clients = []
    try:
        for vip in (VIP4, VIP6):
            clients.append((vip, lab.keepalive_clients(vip, CONNECTIONS, 1)))
        first = {}
        for vip, p in clients:
            first[vip] = p.stdout.readline().split()
            check_eq(len(first[vip]), CONNECTIONS, f"{vip}: kept-alive connections answered")
            check(len(set(first[vip])) >= 2, f"{vip}: spread over the backends: {first[vip]}")
        # Maglev moves some of them now: a backend of each service weighs five times the others.
        for service, address in (("web", f"{BACKENDS4[0]}:{HTTP}"),
                                 ("web6", f"[{BACKENDS6[0]}]:{HTTP}")):
            r = lineage.ferryctl("backend", service, address, "weight", "5")
            check_eq(r.returncode, 0, f"ferryctl backend {service} weight: {r.stdout}{r.stderr}")

        download = slow_download(lab, VIP4)
        perf = {}
        perf_thread = threading.Thread(
            target=lambda: perf.update(dnsperf(lab, w, VIP4, CLIENT4, port=DNS, seconds=4,
                                               qps=500)))
        perf_thread.start()
        old = lineage.pid
        r = lineage.ferryctl("--json", "upgrade")
        check_eq(r.returncode, 0, f"ferryctl upgrade ({r.stdout} {r.stderr})\n"
                 f"{lineage.log()[-3000:]}")
        out = json.loads(r.stdout)
        check(out["new_pid"] != old, f"a new ferryd: {out}")
        lineage.adopt(out["new_pid"])
        print(f"upgrade: {out}", flush=True)
        check(out.get("flows_carried", 0) >= 2 * CONNECTIONS,
              f"the kept-alive connections' flows carried over: {out}")

        for vip, p in clients:
            p.stdin.write("go\n")
            p.stdin.flush()
            now = p.stdout.readline().split()
            check_eq(now, first[vip], f"{vip}: every connection answered by its backend after "
                     "the upgrade")
        body, err = download.communicate(timeout=60)
        check_eq(download.returncode, 0, f"the long transfer across the upgrade: {err.decode()}")
        check_eq(len(body), BIG_BYTES, "the long transfer's length")
        check_eq(hashlib.sha256(body).hexdigest(), lab.big_sha256, "the long transfer's sha256")
        perf_thread.join(timeout=60)
        check(not perf_thread.is_alive(), "dnsperf ended")
        print(f"dnsperf: {perf}", flush=True)
        check_eq(perf.get("lost"), 0, f"DNS queries lost across the upgrade: {perf}")
        check(perf["sent"] > 0 and perf["completed"] == perf["sent"], f"every query: {perf}")
        check(total(lineage.daemon, "ferry_xsk_encapsulated_packets_total") > 0,
              "the new ferryd encapsulated the requests after the upgrade")
        check(set(NAMES) >= set(first[VIP4]), "names are the backends'")
        _, code = lineage.wait_gone(old, 15, "the old ferryd")
        check_eq(code, 0, "the old ferryd's exit status")
    finally:
        for _, p in clients:
            if p.poll() is None:
                p.kill()
            p.wait()
        lineage.cleanup()
