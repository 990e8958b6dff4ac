"""QUIC-LB through a real ferryd (issue 29): real QUIC (Debian's gtlsclient, ferry's own
tests/quic/ferry_quic_server) across the fast-path lab (fastpath_lab.Lab: client -- ferryd with
XDP/AF_XDP on veth -- backends). Each QUIC-LB form is a UDP service of its own on the VIP, whose
three backends are three ferry_quic_servers with server IDs of their own, all sharing one
--reset-secret (so a server that gets a packet of another's connection sends a reset the client
believes); the same on VIP6 with three more servers each. For the plaintext, single-pass and
four-pass forms, IPv4 and IPv6:

* connections from many client ports spread over the three servers;
* a client whose port a NAT rebinds mid-transfer, onto a port the 4-tuple would send to another
  server, and one that migrates to a new local address, keep their connection and their server:
  the whole body arrives, the server logged the path change, ferry counted packets routed by
  connection ID, no other server saw the connection;
* the same rebinding with quic_lb removed from the service (reload) lands on the other server,
  which resets the connection: the body never completes;
* `ferryctl backend ... drain` of the server holding a connection: the transfer completes there,
  and new connections go to the other two;
* `ferryctl upgrade` (a new ferryd takes over) in the middle of a transfer (each form on IPv4,
  one on IPv6): the connection goes on on its server, routed by the new ferryd.

The rebinding's new port is chosen, not hoped for: before the move a datagram with an unroutable
connection ID (codepoint 7, so the 4-tuple decides) is sent from candidate ports until one lands
on another server, which answers it with a stateless reset and logs whom to. A NAT (nftables in
the client's namespace, quic_lab.nat_rebind) rebinds, not gtlsclient: see test_quic_server."""
import contextlib
import json
import os
import socket

import pytest

import quic_lab
from fastpath_lab import (BACKENDS, BACKENDS6, CLIENT, CLIENT6, GATEWAY6_CLIENT_SIDE,
                          GATEWAY_CLIENT_SIDE, VIP, VIP6, Lab, inside)
from harness import Workdir, base_config, check, check_eq, ok, total, wait_until
from upgrade_lab import Lineage, become_subreaper
from quic_lab import (QuicServer, finish_client, make_certificate, nat_rebind, start_client,
                      url_host, wait_downloaded)

KEY = "8f95f09245765f80256934e50c66207f"
RESET_SECRET = "5e" * 32
# Per family: the client's address, the one it migrates to, the VIP, the backends, the gateway.
FAMILY = {
    4: {"client": CLIENT, "moved": "10.10.1.3", "vip": VIP, "backends": BACKENDS,
        "gateway": GATEWAY_CLIENT_SIDE, "bits": 32, "prefix": 24},
    6: {"client": CLIENT6, "moved": "fd10:1::3", "vip": VIP6, "backends": BACKENDS6,
        "gateway": GATEWAY6_CLIENT_SIDE, "bits": 128, "prefix": 64},
}
# form: (service port, configs entry, server IDs of the three backends)
FORMS = {
    "plaintext": (4431, {"id": 0, "server_id_bytes": 2, "nonce_bytes": 6, "key": None},
                  ["0a01", "0a02", "0a03"]),
    "single_pass": (4432, {"id": 1, "server_id_bytes": 3, "nonce_bytes": 13, "key": KEY},
                    ["112201", "112202", "112203"]),
    "four_pass": (4433, {"id": 2, "server_id_bytes": 4, "nonce_bytes": 5, "key": KEY},
                  ["a1b2c301", "a1b2c302", "a1b2c303"]),
}
BODY_BYTES = 3_000_000
BODY_BYTES_PER_S = 2_000_000  # about 1.5 s a transfer: long enough to move in the middle
SPREAD_CONNECTIONS_MAX = 30
PROBE_PORTS = range(41000, 41064)


def server_option(form, server_id):
    _, cfg, _ = FORMS[form]
    option = f"config_id={cfg['id']},server_id={server_id},nonce_bytes={cfg['nonce_bytes']}"
    return option + (f",key={cfg['key']}" if cfg["key"] else "")


def service(form, family, quic_lb=True):
    port, cfg, ids = FORMS[form]
    f = FAMILY[family]
    svc = {"name": f"h3-{form}-{family}", "vip": f["vip"], "port": port, "protocols": ["udp"],
           "backends": [{"address": f"{url_host(family, b)}:{port}",
                         **({"server_id": i} if quic_lb else {})}
                        for b, i in zip(f["backends"], ids)]}
    if quic_lb:
        svc["quic_lb"] = {"configs": [cfg]}
    return svc


def gateway_config(w, without_quic_lb=()):
    return base_config(w, xdp={
        "interfaces": [{"name": "g0"}, {"name": "g1"}],
        "umem": {"frames": 4096, "frame_bytes": 4096},
        "rings": {"fill": 512, "completion": 512, "rx": 512, "tx": 512},
    }, services=[service(form, family, form not in without_quic_lb)
                 for form in FORMS for family in FAMILY])


class QuicLbLab:
    """fastpath_lab.Lab with IPv6, the client with a second address and host routes to the VIPs
    whose `src` picks its local address, and eighteen servers: three per form and family."""

    def __init__(self, w):
        self.w = w
        self.lab = Lab(ipv6=True)
        try:
            for family, f in FAMILY.items():
                self.lab.client.add_addresses("c0", f"{f['moved']}/{f['prefix']}")
                self.route_source(family, f["client"])
            self.cert, self.key = make_certificate(w)
            self.servers = {(form, family): [
                QuicServer(None, w, f"{form}-{family}-{i}", family, self.cert, self.key,
                           server_option(form, sid),
                           ["--reset-secret", RESET_SECRET,
                            "--body-bytes-per-s", str(BODY_BYTES_PER_S)],
                           ns=self.lab.back, listen=f"{url_host(family, b)}:{FORMS[form][0]}")
                for i, (b, sid) in enumerate(zip(FAMILY[family]["backends"], FORMS[form][2]))]
                for form in FORMS for family in FAMILY}
        except BaseException:
            self.close()
            raise

    def route_source(self, family, source):
        f = FAMILY[family]
        self.lab.client.ip(f"-{family}", "route", "replace", f"{f['vip']}/{f['bits']}", "via",
                           f["gateway"], "dev", "c0", "src", source)

    def close(self):
        for servers in getattr(self, "servers", {}).values():
            for s in servers:
                s.kill()
        self.lab.close()


@pytest.fixture(scope="module")
def qlab():
    quic_lab.tools_present()
    w = Workdir()
    try:
        lab = QuicLbLab(w)
        try:
            yield lab
        finally:
            lab.close()
    finally:
        w.cleanup()


def fresh_lab(qlab):
    """The client's routes and NAT as the lab made them, every neighbour cache flushed."""
    for family, f in FAMILY.items():
        qlab.route_source(family, f["client"])
    quic_lab.clear_nat(qlab.lab.client)
    for ns in qlab.lab.spaces:
        ns.ip("neigh", "flush", "all")


@pytest.fixture
def gateway(qlab, workdir, ferryd):
    """ferryd on the gateway with the QUIC-LB services."""
    fresh_lab(qlab)
    return ferryd(gateway_config(workdir), netns=qlab.lab.gw.name)


def fetch(qlab, workdir, form, family, paths, tag, extra=()):
    return start_client(None, workdir, family, paths, tag, extra, ns=qlab.lab.client,
                        host=FAMILY[family]["vip"], port=FORMS[form][0])


@contextlib.contextmanager
def client_running(proc):
    """Kills the client if the block leaves it running (a failure on the way)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def server_of(servers, download):
    """The index of the server whose name the download of /name holds."""
    with open(os.path.join(download, "name")) as f:
        name = f.read().strip()
    index = next((i for i, s in enumerate(servers) if s.name == name), None)
    check(index is not None, f"/name answered by one of the form's servers: {name!r}")
    return index


def connection_cids(server, scid):
    return {e["cid"] for e in server.events("cid") if e["scid"] == scid}


def routed(d, form):
    return total(d, "ferry_xsk_quic_lb_routed_total", config=FORMS[form][1]["id"])


def check_body(download, name, body_bytes=BODY_BYTES):
    path = os.path.join(download, str(body_bytes))
    check_eq(os.path.getsize(path), body_bytes, f"size of /bytes/{body_bytes}")
    with open(path, "rb") as f:
        check_eq(f.readline(), f"{name}\n".encode(), f"first line of /bytes/{body_bytes}")


class Transfer:
    """A client fetching /bytes/N, then /name, on one connection: its process, download
    directory and stderr, the index of the server its connection is on and that connection's
    first server CID (known once a server logged its handshake)."""

    def __init__(self, qlab, workdir, form, family, tag, extra=(), body_bytes=BODY_BYTES):
        self.qlab, self.form, self.family, self.body_bytes = qlab, form, family, body_bytes
        self.servers = qlab.servers[(form, family)]
        marks = [len(s.events("handshake")) for s in self.servers]
        self.proc, self.download, self.err = fetch(
            qlab, workdir, form, family, [f"/bytes/{body_bytes}", "/name"], tag, extra)

        def handshaken():
            for i, s in enumerate(self.servers):
                new = s.events("handshake")[marks[i]:]
                if new:
                    return i, new[0]["scid"]
            return None
        try:
            self.index, self.scid = wait_until(handshaken, 20, f"{tag}: a server's handshake")
        except BaseException:
            with client_running(self.proc):
                raise
        self.server = self.servers[self.index]

    def client_port(self):
        first = next(e for e in self.server.events("connection") if e["scid"] == self.scid)
        return int(first["remote"].rsplit(":", 1)[1])

    def wait_fraction(self, divisor):
        wait_downloaded(self.download, str(self.body_bytes), self.body_bytes // divisor)

    def rebind_elsewhere(self):
        """Once a fifth of the body is in, a NAT rebinding of the client onto a port whose
        4-tuple Maglev sends to another server; returns (new port, that server's index)."""
        new_port, elsewhere = probe_port_landing_elsewhere(self.qlab, self.form, self.family,
                                                           self.index)
        self.wait_fraction(5)
        nat_rebind(self.qlab.lab.client, self.family, FAMILY[self.family]["vip"],
                   FORMS[self.form][0], self.client_port(), new_port)
        return new_port, elsewhere

    def paths(self):
        return [e for e in self.server.events("path") if e["scid"] == self.scid]


def probe_port_landing_elsewhere(qlab, form, family, avoid):
    """A client port whose 4-tuple (client, port, VIP, service port) Maglev sends to a server
    other than `avoid`: a short-header datagram with an unroutable connection ID (codepoint 7)
    sent from each candidate until a server other than `avoid` answers it with a stateless reset;
    returns (port, that server's index)."""
    f = FAMILY[family]
    servers = qlab.servers[(form, family)]
    af = socket.AF_INET if family == 4 else socket.AF_INET6
    for port in PROBE_PORTS:
        marks = [len(s.events("stateless_reset")) for s in servers]
        with inside(qlab.lab.client):
            with socket.socket(af, socket.SOCK_DGRAM) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((f["client"], port))
                s.settimeout(5)
                s.sendto(bytes([0x40]) + b"\xe0" + port.to_bytes(2, "big") + os.urandom(40),
                         (f["vip"], FORMS[form][0]))
                s.recv(2048)  # the reset: by then its server has logged it

        def landed():  # a list: index 0 is a server too
            return [i for i, srv in enumerate(servers)
                    if len(srv.events("stateless_reset")) > marks[i]]
        index, = wait_until(landed, 5, f"the server that reset the probe from port {port}")
        if index != avoid:
            return port, index
    raise AssertionError(f"no port of {PROBE_PORTS} lands on another server than {avoid}")


FORMS_AND_FAMILIES = [(form, family) for form in FORMS for family in FAMILY]


@pytest.mark.parametrize("form,family", FORMS_AND_FAMILIES)
def test_connections_spread_over_the_three_servers(qlab, gateway, workdir, form, family):
    servers = qlab.servers[(form, family)]
    before = routed(gateway, form)
    seen = []
    for n in range(SPREAD_CONNECTIONS_MAX):
        proc, download, err = fetch(qlab, workdir, form, family, ["/name"],
                                    f"spread-{form}-{family}-{n}")
        finish_client(proc, err)
        seen.append(server_of(servers, download))
        if len(set(seen)) == 3:
            break
    check_eq(sorted(set(seen)), [0, 1, 2], f"servers the connections landed on: {seen}")
    check(routed(gateway, form) > before, "packets routed by their connection ID")


def check_kept(t, gateway, routed_before, what):
    """The moved transfer `t` finished whole on its server, one connection, routed by CID."""
    check_body(t.download, t.server.name)
    check_eq(server_of(t.servers, t.download), t.index, f"the server of /name, after {what}")
    check(routed(gateway, t.form) > routed_before,
          f"packets routed by their connection ID after {what}")
    for s in t.servers:
        check_eq(sum(1 for e in s.events("connection") if e["scid"] == t.scid),
                 1 if s is t.server else 0, f"{s.name}: connections of {t.scid}")
    # Mid-transfer: the server saw the move before it had sent the body's last byte.
    events = [e for e in t.server.events() if e.get("scid") == t.scid]
    kinds = [(e["event"], e.get("path", "")) for e in events]
    sent = ("body_sent", f"/bytes/{t.body_bytes}")
    check(sent in kinds and any(k == "path" for k, _ in kinds[:kinds.index(sent)]),
          f"{what} seen by the server before the body's last byte was sent: {events}")


@pytest.mark.parametrize("form,family", FORMS_AND_FAMILIES)
def test_rebound_and_migrated_clients_keep_their_server(qlab, gateway, workdir, form, family):
    f = FAMILY[family]
    # A NAT rebinding onto a port that the 4-tuple sends to another server.
    t = Transfer(qlab, workdir, form, family, f"rebind-{form}-{family}")
    with client_running(t.proc):
        before = routed(gateway, form)
        new_port, elsewhere = t.rebind_elsewhere()
        finish_client(t.proc, t.err)
    check_kept(t, gateway, before, "the rebinding")
    check_eq([e["remote"] for e in t.paths()], [f"{url_host(family, f['client'])}:{new_port}"],
             f"the path change {t.server.name} logged")
    cids = connection_cids(t.server, t.scid)
    other = t.servers[elsewhere]
    check_eq([e for e in other.events("stateless_reset") if e["dcid"] in cids], [],
             f"resets from {other.name}, which the 4-tuple picks, for the connection")
    quic_lab.clear_nat(qlab.lab.client)

    # A migration to a new local address (gtlsclient validates the new path).
    t = Transfer(qlab, workdir, form, family, f"migrate-{form}-{family}",
                 ["--change-local-addr=500ms"])
    try:
        with client_running(t.proc):
            qlab.route_source(family, f["moved"])  # before gtlsclient's timer binds a new socket
            before = routed(gateway, form)
            finish_client(t.proc, t.err)
    finally:
        qlab.route_source(family, f["client"])
    check_kept(t, gateway, before, "the migration")
    paths = t.paths()
    check(paths and paths[-1]["remote"].startswith(f"{url_host(family, f['moved'])}:"),
          f"the move to {f['moved']} logged by {t.server.name}: {paths}")


@pytest.mark.parametrize("form,family", FORMS_AND_FAMILIES)
def test_without_quic_lb_a_rebound_connection_is_reset(qlab, gateway, workdir, form, family):
    """The same rebinding with quic_lb removed from the service: the moved 4-tuple goes where
    Maglev sends it, another server, which resets the connection."""
    workdir.write_config(gateway_config(workdir, without_quic_lb=[form]))
    ok(gateway.request("reload"), "reload without quic_lb")
    t = Transfer(qlab, workdir, form, family, f"no-quic-lb-{form}-{family}")
    with client_running(t.proc):
        new_port, elsewhere = t.rebind_elsewhere()
        cids = connection_cids(t.server, t.scid)
        t.servers[elsewhere].wait_event(
            lambda e: e["event"] == "stateless_reset" and e["dcid"] in cids
            and e["remote"] == f"{url_host(family, FAMILY[family]['client'])}:{new_port}",
            20, "a reset of the moved connection")
        finish_client(t.proc, t.err)
    path = os.path.join(t.download, str(BODY_BYTES))
    got = os.path.getsize(path) if os.path.exists(path) else 0
    check(got < BODY_BYTES, f"the reset connection's body cut short ({got} bytes)")
    check_eq(t.paths(), [], f"path changes of the connection on {t.server.name}")


@pytest.mark.parametrize("form,family", FORMS_AND_FAMILIES)
def test_drained_server_keeps_its_connection(qlab, gateway, workdir, ferryctl, form, family):
    t = Transfer(qlab, workdir, form, family, f"drain-{form}-{family}")
    backend = f"{url_host(family, FAMILY[family]['backends'][t.index])}:{FORMS[form][0]}"
    with client_running(t.proc):
        ferryctl.out(gateway, "backend", f"h3-{form}-{family}", backend, "drain")
        before = routed(gateway, form)
        finish_client(t.proc, t.err)
    check_body(t.download, t.server.name)
    check(routed(gateway, form) > before, "packets routed to the drained server by their CID")
    landed = []
    for n in range(9):
        proc, download, err = fetch(qlab, workdir, form, family, ["/name"],
                                    f"after-drain-{form}-{family}-{n}")
        finish_client(proc, err)
        landed.append(server_of(t.servers, download))
    check(t.index not in landed, f"new connections avoid the drained server {t.index}: {landed}")


@pytest.mark.parametrize("form,family", [(form, 4) for form in FORMS] + [("four_pass", 6)])
def test_upgrade_keeps_the_connection(qlab, workdir, form, family):
    """`ferryctl upgrade` while a transfer runs: the new ferryd routes the connection's packets
    to its server by their connection ID, and the body arrives whole."""
    become_subreaper()  # the new ferryd, once its parent (the old one) is gone, is ours to reap
    fresh_lab(qlab)
    body_bytes = 2 * BODY_BYTES  # about 3 s: the handover lands inside it
    lineage = Lineage(workdir, workdir.write_config(gateway_config(workdir)), qlab.lab.gw.name)
    try:
        t = Transfer(qlab, workdir, form, family, f"upgrade-{form}-{family}",
                     body_bytes=body_bytes)
        with client_running(t.proc):
            t.wait_fraction(5)
            old = lineage.pid
            r = lineage.ferryctl("--json", "upgrade")
            check_eq(r.returncode, 0, f"ferryctl upgrade ({r.stdout} {r.stderr})")
            new = json.loads(r.stdout)["new_pid"]
            check(new != old, f"a new ferryd: {r.stdout}")
            lineage.adopt(new)
            sent_before = [e for e in t.server.events("body_sent")
                           if e["scid"] == t.scid and e["path"].startswith("/bytes/")]
            finish_client(t.proc, t.err)
        check_eq(sent_before, [], "the body's last byte sent before the upgrade was done")
        check_body(t.download, t.server.name, body_bytes)
        check_eq(server_of(t.servers, t.download), t.index, "the server of /name, after the upgrade")
        check(routed(lineage, form) > 0, "packets routed by their CID by the new ferryd")
        _, code = lineage.wait_gone(old, 15, "the old ferryd")
        check_eq(code, 0, "the old ferryd's exit status")
    finally:
        lineage.cleanup()
