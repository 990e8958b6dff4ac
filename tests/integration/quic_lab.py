"""The QUIC lab of the tests with real QUIC (issue 29): a client namespace and a server namespace
joined by one veth, IPv4 and IPv6, the client with a second address to move to; the test server
(tests/quic/ferry_quic_server) logging JSON events, Debian's ngtcp2 client (gtlsclient), a
self-signed certificate made in the test's work directory, and ferry_quic_cid_decode."""
import json
import os
import signal
import subprocess

from harness import TestFailure, check, check_eq, wait_until
from netns import Netns, sh, veth

QUIC_SERVER = os.environ.get("FERRY_QUIC_SERVER")
CID_DECODE = os.environ.get("FERRY_QUIC_CID_DECODE")
GTLSCLIENT = "/usr/bin/gtlsclient"
OPENSSL = "/usr/bin/openssl"
PORT = 4433
SERVER = {4: "10.29.0.1", 6: "fd29::1"}
CLIENT = {4: "10.29.0.2", 6: "fd29::2"}
CLIENT_MOVED = {4: "10.29.0.3", 6: "fd29::3"}  # the client's new local address in a migration
HOST_BITS = {4: 32, 6: 128}


def tools_present():
    """Fails (never skips) when a tool is missing, saying what installs it."""
    check(QUIC_SERVER and os.access(QUIC_SERVER, os.X_OK),
          "FERRY_QUIC_SERVER is not built: apt-get install libngtcp2-dev libngtcp2-crypto-gnutls-dev "
          "libnghttp3-dev libgnutls28-dev (make deps), then meson setup --reconfigure")
    check(CID_DECODE and os.access(CID_DECODE, os.X_OK), "FERRY_QUIC_CID_DECODE is not built")
    check(os.access(GTLSCLIENT, os.X_OK), f"{GTLSCLIENT} missing: apt-get install ngtcp2-client")
    check(os.access(OPENSSL, os.X_OK), f"{OPENSSL} missing: apt-get install openssl")


def make_certificate(workdir):
    """A self-signed P-256 certificate and its key, made now in `workdir` (never committed)."""
    cert, key = workdir.file("quic-cert.pem"), workdir.file("quic-key.pem")
    sh(OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
       "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=quic.test",
       "-addext", "subjectAltName=DNS:quic.test,IP:10.29.0.1,IP:fd29::1")
    return cert, key


def url_host(family, address):
    return f"[{address}]" if family == 6 else address


def nat_rebind(client_ns, family, server, port, client_port, new_port):
    """A NAT rebinding of a client's flow to `server`:`port`, done as a NAT does it: from now on
    the client's datagrams from `client_port` leave with source port `new_port`, and the
    replies to `new_port` come back to `client_port` (stateless nftables rewrites in the client's
    namespace, one atomic load). The client's socket and its QUIC stack see nothing; the server
    sees its peer's port change and must keep the connection. Replies still sent to the old port
    arrive too, as through a NAT that keeps the old binding a while: the client acknowledges them
    through the new one, so the server learns of the new port from the next packet the client
    sends, whatever the moment of the change. One rebinding at a time per namespace."""
    ip = "ip" if family == 4 else "ip6"
    rules = (f"table inet quic_rebind {{\n"
             f"  chain out {{ type filter hook output priority raw; {ip} daddr {server} "
             f"udp dport {port} udp sport {client_port} notrack udp sport set {new_port}; }}\n"
             f"  chain in {{ type filter hook prerouting priority raw; {ip} saddr {server} "
             f"udp sport {port} udp dport {new_port} notrack udp dport set {client_port}; }}\n"
             f"}}\n")
    client_ns.run("nft", "delete", "table", "inet", "quic_rebind", check=False)
    client_ns.nft(rules, "the NAT rebinding's rules")


def clear_nat(client_ns):
    client_ns.run("nft", "delete", "table", "inet", "quic_rebind", check=False)


class Lab:
    """client (c0: CLIENT and CLIENT_MOVED) -- (s0: SERVER) server. The client reaches the server
    by a host route whose `src` picks its local address: gtlsclient binds each new socket to the
    source address the kernel's route lookup gives, so changing that `src` is how it moves to a
    new local address."""

    def __init__(self):
        self.spaces = []
        try:
            self.client = self._space("qcli")
            self.server = self._space("qsrv")
            veth(self.client, "c0", self.server, "s0")
            self.client.add_addresses("c0", f"{CLIENT[4]}/24", f"{CLIENT_MOVED[4]}/24",
                                      f"{CLIENT[6]}/64", f"{CLIENT_MOVED[6]}/64")
            self.server.add_addresses("s0", f"{SERVER[4]}/24", f"{SERVER[6]}/64")
            for family in (4, 6):
                self.client.ip(f"-{family}", "route", "add", f"{SERVER[family]}/{HOST_BITS[family]}",
                               "dev", "c0", "src", CLIENT[family])
        except BaseException:
            self.close()
            raise

    def _space(self, tag):
        ns = Netns(tag, ipv6=True)
        self.spaces.append(ns)
        return ns

    def route_source(self, family, source):
        """Points the client's route to the server at `source` (CLIENT or CLIENT_MOVED)."""
        self.client.ip(f"-{family}", "route", "replace", f"{SERVER[family]}/{HOST_BITS[family]}",
                       "dev", "c0", "src", source)

    def nat_rebind(self, family, client_port, new_port):
        """nat_rebind() of the client's flow to the server (see there)."""
        nat_rebind(self.client, family, SERVER[family], PORT, client_port, new_port)

    def clear_nat(self):
        clear_nat(self.client)

    def route_source_of(self, family):
        out = self.client.ip(f"-{family}", "route", "get", SERVER[family]).stdout.split()
        return out[out.index("src") + 1]

    def close(self):
        for ns in self.spaces:
            ns.close()


class QuicServer:
    """One ferry_quic_server in the lab's server namespace; its JSON events read from its log."""

    def __init__(self, lab, workdir, name, family, cert, key, quic_lb=None, extra=(), ns=None,
                 listen=None):
        """In `lab`'s server namespace on SERVER[family]:PORT, or in `ns` on `listen`."""
        self.name = name
        self.log_path = workdir.file(f"{name}.jsonl")
        self.err_path = workdir.file(f"{name}.err")
        ns = ns or lab.server
        listen = listen or f"{url_host(family, SERVER[family])}:{PORT}"
        args = [QUIC_SERVER, "--name", name, "--listen", listen,
                "--cert", cert, "--key", key, *(["--quic-lb", quic_lb] if quic_lb else []), *extra]
        with open(self.log_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(["ip", "netns", "exec", ns.name, *args],
                                         stdout=out, stderr=err)
        self.listening = self.wait_event(lambda e: e["event"] == "listening", 10, "listening")

    def events(self, kind=None):
        with open(self.log_path) as f:
            lines = [json.loads(line) for line in f if line.endswith("\n")]
        return [e for e in lines if kind is None or e["event"] == kind]

    def wait_event(self, predicate, timeout, what):
        def found():
            if self.proc.poll() is not None:
                raise TestFailure(f"{self.name} exited with {self.proc.returncode} waiting for "
                                  f"{what}: {self.stderr()}")
            return next((e for e in self.events() if predicate(e)), None)
        return wait_until(found, timeout, f"{self.name}: {what}")

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()

    def stop(self):
        """SIGTERM: the server closes its connections, logs `stopped` and exits 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise TestFailure(f"{self.name} did not end within 10 s of SIGTERM")
        check_eq(rc, 0, f"{self.name}'s exit status after SIGTERM ({self.stderr()})")
        check(self.events("stopped"), f"{self.name} logged no 'stopped' event")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def start_client(lab, workdir, family, paths, tag, extra=(), ns=None, host=None, port=PORT):
    """gtlsclient in the client namespace (or `ns`) fetching `paths` from SERVER[family] (or
    `host`):`port` on one connection into a download directory of its own; returns (process,
    download directory, stderr path)."""
    download = workdir.file(f"download-{tag}")
    os.makedirs(download, exist_ok=True)
    err_path = workdir.file(f"gtlsclient-{tag}.err")
    ns = ns or lab.client
    host = host or SERVER[family]
    urls = [f"https://{url_host(family, host)}:{port}{p}" for p in paths]
    with open(err_path, "w") as err:
        proc = subprocess.Popen(["ip", "netns", "exec", ns.name, GTLSCLIENT, "-q",
                                 "--exit-on-all-streams-close", "--timeout=15s",
                                 f"--download={download}", *extra, host, str(port), *urls],
                                stdout=subprocess.DEVNULL, stderr=err)
    return proc, download, err_path


def wait_downloaded(download, name, at_least, timeout=20):
    """Awaits `at_least` bytes of the download `name` on disk (gtlsclient writes as it
    receives): the transfer is under way."""
    path = os.path.join(download, name)
    wait_until(lambda: os.path.exists(path) and os.path.getsize(path) >= at_least, timeout,
               f"{at_least} bytes of {name} downloaded")


def finish_client(proc, err_path, timeout=60):
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise TestFailure(f"gtlsclient still running after {timeout} s")
    with open(err_path) as f:
        err = f.read()
    check_eq(rc, 0, f"gtlsclient's exit status (stderr: {err[-2000:]})")


def decode_server_id(quic_lb, cid_hex):
    r = subprocess.run([CID_DECODE, quic_lb, cid_hex], capture_output=True, text=True)
    check_eq(r.returncode, 0, f"ferry_quic_cid_decode {quic_lb} {cid_hex} ({r.stderr.strip()})")
    return r.stdout.strip()
