"""Network namespaces and veth pairs for tests: unique names, always removed."""
import itertools
import os
import subprocess

# One number per namespace this process makes: a file's tests may hold a lab their module shares
# while one of them builds a lab of the same kind.
_serial = itertools.count()


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


class Netns:
    """A named network namespace, deleted (with its interfaces) on close. ipv6: None leaves the
    kernel's defaults, False turns IPv6 off, True on without duplicate address detection (so
    addresses are usable at once, not tentative for a second or more)."""

    def __init__(self, tag, ipv6=None):
        self.name = f"fit-{tag}-{os.getpid()}-{next(_serial)}"
        sh("ip", "netns", "add", self.name)
        sh("ip", "-n", self.name, "link", "set", "lo", "up")
        if ipv6 is not None:
            for knob in ("all", "default"):
                self.run("sysctl", "-qw", f"net.ipv6.conf.{knob}.disable_ipv6={0 if ipv6 else 1}")
                if ipv6:
                    self.run("sysctl", "-qw", f"net.ipv6.conf.{knob}.accept_dad=0")

    def run(self, *args, check=True):
        return sh("ip", "netns", "exec", self.name, *args, check=check)

    def ip(self, *args, check=True):
        return sh("ip", "-n", self.name, *args, check=check)

    def nft(self, rules, what="nft"):
        """Loads nftables `rules` (one ruleset text, applied atomically) in this namespace; fails
        the test with nft's message when it refuses them."""
        r = subprocess.run(["ip", "netns", "exec", self.name, "nft", "-f", "-"], input=rules,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError(f"{what}: nft exited {r.returncode}: {r.stderr.strip()}")

    def add_addresses(self, ifname, *cidrs):
        """`ip addr add` of each CIDR on `ifname`; IPv6 ones nodad (usable at once)."""
        for c in cidrs:
            self.ip("addr", "add", c, "dev", ifname, *(["nodad"] if ":" in c else []))

    def close(self):
        sh("ip", "netns", "del", self.name, check=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def end_all(procs, spaces):
    """A lab's end: kills its processes still running (and reaps every one), then deletes its
    namespaces with their interfaces."""
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
    for ns in spaces:
        ns.close()


def veth(ns_a, name_a, ns_b, name_b, queues=1):
    """Creates a veth pair with one end in each namespace, both up."""
    sh("ip", "-n", ns_a.name, "link", "add", name_a, "numrxqueues", str(queues), "numtxqueues",
       str(queues), "type", "veth", "peer", "name", name_b, "netns", ns_b.name, "numrxqueues",
       str(queues), "numtxqueues", str(queues))
    ns_a.ip("link", "set", name_a, "up")
    ns_b.ip("link", "set", name_b, "up")


def xdp_attached(ns, ifname):
    """True when `ip link` reports an XDP program on the interface."""
    out = ns.ip("-d", "link", "show", "dev", ifname).stdout
    return "prog/xdp" in out
