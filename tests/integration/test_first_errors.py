"""The errors an operator meets first, each checked word for word: they say what is wrong and what
to change. A UMEM beyond the locked-memory limit, an interface not in ferryd's network namespace,
a driver without native XDP, a TCP port another process holds, a control socket group that does
not exist; ferryd exits non-zero and leaves nothing attached."""
import json
import os
import socket

from fastpath_lab import Lab, fastpath_config
from harness import FERRYD, base_config, check, check_eq
from netns import Netns, sh, veth, xdp_attached


def start_fails(w, cfg, ns=None, prefix=()):
    """Runs ferryd on `cfg` (in `ns`), expects it to refuse to start; returns its stderr."""
    path = w.file("first-errors.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    cmd = [*prefix, FERRYD, "--config", path]
    r = ns.run(*cmd, check=False) if ns else sh(*cmd, check=False)
    errors = [l for l in r.stderr.splitlines() if " error " in l]
    print(f"  exit {r.returncode}: {errors[:1]}", flush=True)
    # 1, not just non-zero: a sanitizer finding (86 in the ASan run) must fail the test.
    check_eq(r.returncode, 1, f"ferryd refuses to start: {r.stderr[-1500:]}")
    return r.stderr


def test_umem_beyond_the_memlock_limit_says_what_to_change(workdir):
    """A UMEM larger than RLIMIT_MEMLOCK (a container's 8 MiB, a capped unit) and no CAP_IPC_LOCK:
    ferryd stops with how much it needs, what the limit is and the three ways out, and leaves no
    XDP program behind."""
    lab = Lab()
    try:
        cfg = fastpath_config(workdir)
        cfg["xdp"]["umem"]["frames"] = 16384  # 64 MiB of 4 KiB frames
        stderr = start_fails(workdir, cfg, lab.gw, ("prlimit", "--memlock=8388608:8388608", "setpriv",
                                                    "--bounding-set=-ipc_lock", "--inh-caps=-ipc_lock"))
        message = ("out of locked memory for the UMEM: 16384 x 4096 bytes need 64 MiB, RLIMIT_MEMLOCK "
                   "allows 8 MiB (hard limit 8 MiB) and ferryd has no CAP_IPC_LOCK; raise the limit "
                   "(LimitMEMLOCK= in the systemd unit, ulimit -l, the container's memlock limit), "
                   "grant ferryd CAP_IPC_LOCK (AmbientCapabilities=), or lower xdp.umem.frames to at "
                   "most 2048")
        check(message in stderr, f"the message says what to change: {stderr[-1500:]}")
        check(not xdp_attached(lab.gw, "g0") and not xdp_attached(lab.gw, "g1"), "nothing attached")
    finally:
        lab.close()


def test_interface_not_in_this_namespace_names_the_ones_it_has(workdir):
    with Netns("ferr") as ns:
        veth(ns, "fe0", ns, "fe1")
        stderr = start_fails(workdir, base_config(workdir, xdp={"interfaces": [{"name": "eth7"}]}), ns)
        check("xdp.interfaces: eth7: no such interface in this network namespace (it has: lo, fe"
              in stderr, f"the namespace's interfaces are named: {stderr[-800:]}")


def test_driver_without_native_xdp_says_which_mode_to_set(workdir):
    with Netns("ferr") as ns:
        ns.ip("link", "add", "br7", "type", "bridge")
        ns.ip("link", "set", "br7", "up")
        xdp = {"interfaces": [{"name": "br7", "mode": "native"}],
               "umem": {"frames": 1024, "frame_bytes": 4096}}
        stderr = start_fails(workdir, base_config(workdir, xdp=xdp), ns)
        check('br7: attaching XDP in native mode failed: Operation not supported (set '
              'xdp.interfaces[].mode to "auto" or "generic" if the driver has no native XDP)' in stderr,
              f"says which mode to set: {stderr[-800:]}")
        check(not xdp_attached(ns, "br7"), "nothing attached")


def test_tcp_port_taken_names_the_process_that_holds_it(workdir):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        comm = open(f"/proc/{os.getpid()}/comm").read().strip()
        stderr = start_fails(workdir, base_config(workdir, services=[
            {"name": "web", "vip": "127.0.0.1", "port": port, "protocols": ["tcp"], "mode": "echo"}]))
        check(f"service web: cannot bind 127.0.0.1:{port} ({comm}, pid {os.getpid()}, listens there): "
              "Address already in use" in stderr, f"names the holder: {stderr[-800:]}")


def test_missing_control_group_says_how_to_create_it(workdir):
    cfg = base_config(workdir)
    cfg["control"]["group"] = "ferry-no-such-group"
    stderr = start_fails(workdir, cfg)
    check("control.group 'ferry-no-such-group' does not exist: create it (groupadd --system "
          "ferry-no-such-group) or set control.group to null" in stderr, stderr[-800:])
