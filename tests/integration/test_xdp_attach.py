"""The XDP program on real veth interfaces in a private netns: attached through a bpf_link in
native or generic mode, counting what passes, detached on SIGTERM and by the kernel on SIGKILL."""

import sys

from harness import Daemon, base_config, check, check_eq, ok, running, wait_until
from netns import Netns, veth, xdp_attached


def lab():
    gw, peer = Netns("gw"), Netns("peer")
    try:
        veth(gw, "fx0", peer, "fx0p")
        gw.ip("addr", "add", "10.211.0.1/24", "dev", "fx0")
        peer.ip("addr", "add", "10.211.0.2/24", "dev", "fx0p")
    except Exception:
        gw.close()
        peer.close()
        raise
    return gw, peer


def xdp_cfg(w, mode="auto"):
    return base_config(w, xdp={"interfaces": [{"name": "fx0", "mode": mode}]})


def test_attaches_native_counts_passes_and_detaches_on_sigterm(workdir):
    gw, peer = lab()
    try:
        with running(workdir, xdp_cfg(workdir), netns=gw.name) as d:
            check(xdp_attached(gw, "fx0"), "ip link shows the XDP program")
            status = ok(d.request("status"))["xdp"]
            check_eq(status["program_loaded"], True, "program loaded")
            check_eq([(i["name"], i["mode"]) for i in status["interfaces"]], [("fx0", "native")],
                     "attached interfaces")
            r = peer.run("ping", "-c", "3", "-i", "0.2", "-W", "2", "10.211.0.1", check=False)
            check_eq(r.returncode, 0, f"ping through XDP_PASS: {r.stdout}")
            fams = ok(d.request("stats", {"prefix": "ferry_xdp_packets_total"}))["metrics"]
            passed = [s["value"] for s in fams[0]["samples"] if s["labels"]["action"] == "pass"][0]
            check(passed >= 3, f"pass counter {passed} counts the pings")
            check_eq(d.stop(), 0, "graceful exit")
            check(not xdp_attached(gw, "fx0"), "detached after SIGTERM")
    finally:
        gw.close()
        peer.close()


def test_without_xdp_metadata_the_program_loads_and_says_so(workdir):
    """FERRY_XDP_NO_METADATA=1 loads the program with its metadata call switched off, as ferryd
    does on a kernel that refuses bpf_xdp_adjust_meta to XDP programs: it attaches and passes
    traffic, and status says the workers match every frame."""
    gw, peer = lab()
    try:
        with running(workdir, xdp_cfg(workdir), netns=gw.name,
                     env={"FERRY_XDP_NO_METADATA": "1"}) as d:
            status = ok(d.request("status"))["xdp"]
            check_eq((status["program_loaded"], status["metadata"]), (True, False),
                     "program loaded, without metadata")
            check(xdp_attached(gw, "fx0"), "ip link shows the XDP program")
            r = peer.run("ping", "-c", "2", "-i", "0.2", "-W", "2", "10.211.0.1", check=False)
            check_eq(r.returncode, 0, f"ping through XDP_PASS: {r.stdout}")
            check("XDP metadata off" in d.log(), "the log says why")
    finally:
        gw.close()
        peer.close()


def test_sigkill_leaves_no_program_and_restart_works(workdir):
    gw, peer = lab()
    try:
        cfg = xdp_cfg(workdir)
        with running(workdir, cfg, netns=gw.name) as d:
            check(xdp_attached(gw, "fx0"), "attached")
            d.kill()
            wait_until(lambda: not xdp_attached(gw, "fx0"), 5, "kernel to release the bpf_link")
        with running(workdir, cfg, netns=gw.name, name="second") as d2:
            check(xdp_attached(gw, "fx0"), "attached again by the new daemon")
            check_eq(ok(d2.request("status"))["state"], "running", "second daemon serves")
    finally:
        gw.close()
        peer.close()


def test_generic_mode_is_honoured(workdir):
    gw, peer = lab()
    try:
        with running(workdir, xdp_cfg(workdir, "generic"), netns=gw.name) as d:
            status = ok(d.request("status"))["xdp"]
            check_eq(status["interfaces"][0]["mode"], "generic", "mode")
            check("xdpgeneric" in gw.ip("link", "show", "dev", "fx0").stdout, "ip link says xdpgeneric")
    finally:
        gw.close()
        peer.close()


def test_missing_interface_fails_start_clearly(workdir):
    gw = Netns("gw")
    try:
        cfg = base_config(workdir, xdp={"interfaces": [{"name": "nosuch0"}]})
        d = Daemon(workdir, workdir.write_config(cfg), netns=gw.name)
        try:
            check_eq(d.proc.wait(timeout=15), 1, "exit code")
            check("nosuch0: no such interface" in d.log(), f"clear error:\n{d.log()}")
        finally:
            d.cleanup()
    finally:
        gw.close()


def test_reload_attaches_and_detaches_interfaces(workdir):
    gw, peer = lab()
    try:
        veth(gw, "fx1", peer, "fx1p")
        cfg = xdp_cfg(workdir)
        with running(workdir, cfg, netns=gw.name) as d:
            cfg["xdp"]["interfaces"].append({"name": "fx1"})
            workdir.write_config(cfg)
            ok(d.request("reload"), "reload adding fx1")
            check(xdp_attached(gw, "fx1") and xdp_attached(gw, "fx0"), "both attached")
            cfg["xdp"]["interfaces"] = [{"name": "fx1"}]
            workdir.write_config(cfg)
            ok(d.request("reload"), "reload removing fx0")
            check(not xdp_attached(gw, "fx0") and xdp_attached(gw, "fx1"), "fx0 detached, fx1 kept")
            cfg["xdp"]["interfaces"].append({"name": "nosuch9"})
            workdir.write_config(cfg)
            resp = d.request("reload")
            check_eq(resp["ok"], False, "reload naming a missing interface is rejected")
            check(xdp_attached(gw, "fx1"), "fx1 still attached after the rejected reload")
            names = [i["name"] for i in ok(d.request("status"))["xdp"]["interfaces"]]
            check_eq(names, ["fx1"], "status after rejected reload")
    finally:
        gw.close()
        peer.close()


SEND_UDP = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 0))
for _ in range(int(sys.argv[4])):
    s.sendto(b"x" * 32, (sys.argv[2], int(sys.argv[3])))
"""


def samples(d, family):
    fams = ok(d.request("stats", {"prefix": family}))["metrics"]
    fam = [f for f in fams if f["name"] == family]
    return {tuple(sorted(s["labels"].items())): s["value"] for s in fam[0]["samples"]} if fam else {}


def map_entries(ns, daemon, name):
    """Entries of the map called `name` that this daemon holds (map names are not unique on the
    machine: another ferryd may be running)."""
    import glob
    import json as js
    for info in glob.glob(f"/proc/{daemon.proc.pid}/fdinfo/*"):
        try:
            with open(info) as f:
                fields = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
        except OSError:
            continue
        if "map_id" not in fields:
            continue
        map_id = fields["map_id"].strip()
        shown = js.loads(ns.run("bpftool", "-j", "map", "show", "id", map_id).stdout)
        if shown.get("name") == name:
            return js.loads(ns.run("bpftool", "-j", "map", "dump", "id", map_id).stdout)
    raise AssertionError(f"ferryd holds no map called {name}")


def test_maps_follow_config_steer_services_and_drop_sources(workdir):
    gw, peer = lab()
    try:
        peer.ip("addr", "add", "10.211.0.200/24", "dev", "fx0p")
        cfg = xdp_cfg(workdir)
        cfg["xdp"]["drop"] = ["10.211.0.128/25"]
        cfg["services"] = [{"name": "svc", "vip": "10.211.0.1", "port": 5300, "protocols": ["udp"],
                            "backends": ["10.211.5.5:5300"]}]
        with running(workdir, cfg, netns=gw.name) as d:
            check_eq(len(map_entries(gw, d, "services")), 1, "services map entries")
            check_eq(len(map_entries(gw, d, "backends")), 1, "backends map entries")
            check_eq(len(map_entries(gw, d, "drop4")), 1, "drop4 map entries")
            peer.run(sys.executable, "-c", SEND_UDP, "10.211.0.2", "10.211.0.1", "5300", "40")
            peer.run(sys.executable, "-c", SEND_UDP, "10.211.0.200", "10.211.0.1", "5301", "25")
            peer.run(sys.executable, "-c", SEND_UDP, "10.211.0.2", "10.211.0.1", "5301", "10")
            svc = samples(d, "ferry_xdp_service_packets_total")
            check_eq(svc.get((("direction", "in"), ("service", "svc"))), 40, "service steer counter")
            check_eq(svc.get((("direction", "out"), ("service", "svc"))), 0, "no backend replied")
            act = {k[0][1]: v for k, v in samples(d, "ferry_xdp_packets_total").items()}
            # the fast path binds an AF_XDP socket on every queue, so every match is redirected
            check_eq(act["redirect"], 40, "redirected into AF_XDP")
            check_eq(act["no_socket"], 0, "no queue without a socket")
            check_eq(act["drop"], 25, "dropped by source prefix")
            check(act["pass"] >= 10, f"other UDP passed: {act}")
            cfg["services"] = []
            cfg["xdp"]["drop"] = []
            workdir.write_config(cfg)
            ok(d.request("reload"), "reload")
            check_eq(map_entries(gw, d, "services"), [], "services map emptied by reload")
            check_eq(map_entries(gw, d, "drop4"), [], "drop4 emptied by reload")
            check(xdp_attached(gw, "fx0"), "program stays attached through the reload")
            peer.run(sys.executable, "-c", SEND_UDP, "10.211.0.200", "10.211.0.1", "5301", "5")
            act = {k[0][1]: v for k, v in samples(d, "ferry_xdp_packets_total").items()}
            check_eq(act["drop"], 25, "no drops after the prefix was removed")
    finally:
        gw.close()
        peer.close()
