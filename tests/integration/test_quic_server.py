"""The QUIC test server (tests/quic/ferry_quic_server, issue 29) with Debian's real ngtcp2 client,
without ferry: client and server namespaces on one veth, IPv4 and IPv6. For each QUIC-LB
algorithm (plaintext, single-pass AES with server ID + nonce = 16 octets, four-pass Feistel with
another length) gtlsclient fetches /name and a paced multi-megabyte /bytes/N on one connection and
moves mid-transfer: a NAT rebinding (the client's port rewritten to a new one by a NAT in its
namespace once a quarter of the body has arrived; the client's stack sees nothing) or a migration
to a new local address (the route's source changed once the server logged the handshake; the
client validates the new path). The download completes with the right size and the server's name,
the server logged the client's new address as a path change of that same connection, before it
had sent the body's last byte, and no second connection, and every connection ID it issued
decodes with ferry's CidCodec to its server ID.
Then: random 18-octet CIDs without --quic-lb; stateless resets for unknown short-header DCIDs
and junk that leaves the server serving; SIGTERM ends every server with status 0."""
import os
import socket

import pytest

import quic_lab
from harness import Workdir, check, check_eq
from quic_lab import (CLIENT, CLIENT_MOVED, PORT, SERVER, Lab, QuicServer, decode_server_id,
                      finish_client, make_certificate, start_client, wait_downloaded)

KEY = "8f95f09245765f80256934e50c66207f"
# Three configurations, on three config rotation codepoints.
ALGORITHMS = {
    "plaintext": "config_id=0,server_id=0a0b,nonce_bytes=6",
    "single_pass": f"config_id=1,server_id=112233,nonce_bytes=13,key={KEY}",
    "four_pass": f"config_id=2,server_id=a1b2c3d4,nonce_bytes=5,key={KEY}",
}
BODY_BYTES = 4_000_000
BODY_BYTES_PER_S = 2_000_000  # a transfer of about 2 s
MOVE_AFTER = "1s"             # after the handshake: mid-transfer
REBIND_AFTER_BYTES = BODY_BYTES // 4
REBOUND_PORT = 40999          # the NAT's new port for the client (not in the ephemeral range)


@pytest.fixture(scope="module")
def lab():
    quic_lab.tools_present()
    w = Workdir()
    lab = Lab()
    try:
        lab.cert, lab.key = make_certificate(w)
        yield lab
    finally:
        lab.close()
        w.cleanup()


@pytest.fixture
def servers(lab, workdir):
    """Starts servers: `servers(name, family, quic_lb=None, extra=())`; each is stopped with
    SIGTERM and checked when the test passes, killed when it fails. The client's route to the
    server starts at its first address."""
    lab.clear_nat()
    for family in (4, 6):
        lab.route_source(family, CLIENT[family])
    started = []

    def start(name, family, quic_lb=None, extra=()):
        s = QuicServer(lab, workdir, name, family, lab.cert, lab.key, quic_lb, extra)
        started.append(s)
        return s
    try:
        yield start
        for s in started:
            s.stop()
    finally:
        for s in started:
            s.kill()


def host_port(text):
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def check_cids(server, quic_lb, server_id, connection):
    """Every CID the server logged for `connection` is a CID of this configuration that ferry's
    CidCodec decodes to `server_id`."""
    cids = [e["cid"] for e in server.events("cid") if e["scid"] == connection]
    check(connection in cids, f"the first server CID {connection} among the logged CIDs {cids}")
    check(len(cids) >= 2, f"NEW_CONNECTION_ID CIDs issued besides the first: {cids}")
    config_id = int(quic_lb.split("config_id=")[1].split(",")[0])
    cid_bytes = server.listening["cid_bytes"]
    for cid in cids:
        octets = bytes.fromhex(cid)
        check_eq(len(octets), cid_bytes, f"length of CID {cid}")
        check_eq(octets[0] >> 5, config_id, f"config rotation bits of CID {cid}")
        check_eq(octets[0] & 0x1f, cid_bytes - 1, f"self-encoded length of CID {cid}")
        check_eq(decode_server_id(quic_lb, cid), server_id, f"the server ID in CID {cid}")
    check_eq(len(set(cids)), len(cids), "distinct CIDs")


def check_download(download, name, body_bytes):
    with open(os.path.join(download, "name"), "rb") as f:
        check_eq(f.read(), f"{name}\n".encode(), "the body of /name")
    path = os.path.join(download, str(body_bytes))
    check_eq(os.path.getsize(path), body_bytes, f"size of /bytes/{body_bytes}")
    with open(path, "rb") as f:
        check_eq(f.readline(), f"{name}\n".encode(), f"first line of /bytes/{body_bytes}")


@pytest.mark.parametrize("family", [4, 6])
@pytest.mark.parametrize("move", ["rebind", "migrate"])
@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_transfer_survives_client_move(lab, servers, workdir, algorithm, move, family):
    quic_lb = ALGORITHMS[algorithm]
    server_id = quic_lb.split("server_id=")[1].split(",")[0]
    name = f"srv-{algorithm}-{move}-{family}"
    server = servers(name, family, quic_lb, ["--body-bytes-per-s", str(BODY_BYTES_PER_S)])
    check_eq(server.listening["quic_lb"]["algorithm"], algorithm, "the server's QUIC-LB algorithm")
    check("key" not in server.listening["quic_lb"], "the key kept out of the server's log")

    # gtlsclient's own --nat-rebinding moves to a new socket and ignores what reaches the old
    # one, so unless it happens to have a packet to send just then (an ACK due, a frame awaiting
    # its ACK) the server never hears from the new port and the connection idles out: a NAT in
    # the lab rebinds instead, as a real one does, with the client none the wiser.
    extra = [f"--change-local-addr={MOVE_AFTER}"] if move == "migrate" else []
    client, download, err = start_client(lab, workdir, family, ["/name", f"/bytes/{BODY_BYTES}"],
                                         name, extra)
    try:
        hello = server.wait_event(lambda e: e["event"] == "handshake", 20, "the handshake")
        if move == "migrate":
            # gtlsclient binds its new socket to the route's source: move it before the timer
            # (MOVE_AFTER from the handshake) fires.
            lab.route_source(family, CLIENT_MOVED[family])
        else:
            wait_downloaded(download, str(BODY_BYTES), REBIND_AFTER_BYTES)
            client_port = host_port(server.events("connection")[0]["remote"])[1]
            lab.nat_rebind(family, client_port, REBOUND_PORT)
        finish_client(client, err)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    check_download(download, name, BODY_BYTES)

    connection = hello["scid"]
    connections = server.events("connection")
    check_eq([c["scid"] for c in connections], [connection], "connections (one, never a second)")
    first_host, first_port = host_port(connections[0]["remote"])
    check_eq(first_host, CLIENT[family], "the client's first address")
    paths = [e for e in server.events("path") if e["scid"] == connection]
    check(paths, f"a path change of {connection} logged; events: {server.events()}")
    new_host, new_port = host_port(paths[-1]["remote"])
    if move == "rebind":
        check_eq((new_host, new_port), (CLIENT[family], REBOUND_PORT),
                 "the rebound client's address (same address, the NAT's new port)")
        check(new_port != first_port, f"a new client port after the rebinding ({new_port})")
    else:
        check_eq(new_host, CLIENT_MOVED[family], "the migrated client's new local address")
        check(any(e["result"] == "success" and e["remote"] == paths[-1]["remote"]
                  for e in server.events("path_validation")),
              f"the new path validated: {server.events('path_validation')}")
    # Mid-transfer: the move was seen after the request and before the server had sent the
    # body's last byte. (Not "before the client acknowledged it all": gtlsclient closes the
    # connection as soon as it has every byte, before it acknowledges the last packets, so the
    # server never sees the whole body acknowledged; the download above is the proof it arrived.)
    events = server.events()

    def first(kind, **fields):
        return next((i for i, e in enumerate(events) if e["event"] == kind
                     and all(e.get(k) == v for k, v in fields.items())), None)
    bytes_path = f"/bytes/{BODY_BYTES}"
    request, sent = first("request", path=bytes_path), first("body_sent", path=bytes_path)
    check(None not in (request, sent), f"the request and the body's end logged: {events}")
    check(request < first("path", scid=connection) < sent,
          f"the path change between the request and the body's last byte sent: {events}")
    check_eq(events[sent]["body_bytes"], BODY_BYTES, "body bytes the server sent")
    check_cids(server, quic_lb, server_id, connection)
    check_eq(server.events("stateless_reset"), [], "stateless resets")
    server.wait_event(lambda e: e["event"] == "closed" and e["scid"] == connection, 10,
                      "the connection closed by the client")


def test_random_cids_without_quic_lb(lab, servers, workdir):
    server = servers("srv-random", 4)
    check_eq(server.listening["cid_bytes"], 18, "CID length without --quic-lb")
    check("quic_lb" not in server.listening, "no QUIC-LB in the listening event")
    # No move: this test is about the IDs a server without QUIC-LB issues.
    client, download, err = start_client(lab, workdir, 4, ["/name", "/bytes/100000"], "random", [])
    finish_client(client, err)
    check_download(download, "srv-random", 100_000)
    cids = [e["cid"] for e in server.events("cid")]
    check(len(cids) >= 2 and all(len(bytes.fromhex(c)) == 18 for c in cids),
          f"18-octet CIDs: {cids}")
    check_eq(len(server.events("connection")), 1, "connections")


@pytest.mark.parametrize("family", [4, 6])
def test_unknown_dcid_reset_and_junk_survived(lab, servers, workdir, family):
    """What a backend does with a connection that landed on it by mistake: a short-header packet
    for a CID it never issued is answered with a stateless reset, shorter than the packet; one too
    short for a reset smaller than itself gets nothing. Junk of every length leaves the server
    serving."""
    server = servers(f"srv-junk-{family}", family, ALGORITHMS["four_pass"])
    cid_bytes = server.listening["cid_bytes"]
    af = socket.AF_INET if family == 4 else socket.AF_INET6
    script = f"""
import os, socket
s = socket.socket({int(af)}, socket.SOCK_DGRAM)
s.settimeout(5)
s.bind(("{CLIENT[family]}", 0))
dest = ("{SERVER[family]}", {PORT})
# Short headers (0b01...) for a CID the server never issued: first one of 22 octets, too short
# for a reset smaller than itself, then a 1-RTT packet's worth; the first reply answers the second.
dcid = bytes.fromhex("5f" + "ee" * {cid_bytes - 1})
s.sendto((bytes([0x41]) + dcid + os.urandom(22))[:22], dest)
packet = bytes([0x41]) + dcid + os.urandom(60)
s.sendto(packet, dest)
reply = s.recv(2048)
print(len(packet), len(reply), reply[0])
for n in list(range(0, 64)) + [1199, 1200, 1252, 1500]:    # junk, long and short headers
    s.sendto(os.urandom(n), dest)
    s.sendto(bytes([0xc0]) + os.urandom(max(n - 1, 0)), dest)
"""
    out = lab.client.run("/usr/bin/python3", "-c", script).stdout.split("\n")
    sent, got, first = (int(x) for x in out[0].split())
    check(21 <= got < sent, f"a stateless reset of 21..{sent - 1} octets, got {got}")
    check_eq(first & 0xc0, 0x40, "the reset's first two bits (a short header's)")
    # Logged before sent: all there by now. The junk after them (random short headers) draws
    # resets of its own, for its own DCIDs.
    dcid = "5f" + "ee" * (cid_bytes - 1)
    resets = [r for r in server.events("stateless_reset") if r["dcid"] == dcid]
    check_eq(len(resets), 1, f"stateless resets for the two packets of DCID {dcid} ({resets})")
    check_eq(host_port(resets[0]["remote"])[0], CLIENT[family], "the reset's destination")
    # Junk may draw further resets (random short headers); the server must still serve.
    client, download, err = start_client(lab, workdir, family, ["/name", "/bytes/20000"], "after-junk")
    finish_client(client, err)
    check_download(download, f"srv-junk-{family}", 20_000)
