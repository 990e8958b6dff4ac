"""The PROXY protocol through the real daemon (docs/proxy.md): ferry's v1 and v2 headers read by
Debian's nginx (`listen ... proxy_protocol`) and by HAProxy (`accept-proxy`), IPv4 and IPv6, with
the real client's address and the VIP in them; ferry accepting the header from HAProxy's
`send-proxy-v2`; and bad headers to the accepting side, each counted, none reaching a backend."""
import json
import os
import socket
import struct
import sys
import time

from harness import base_config, check, check_eq, running
from netns import Netns
from pp_servers import RecordingBackend, haproxy, http_get_fields, nginx_echo
from proxy_peers import Metrics, free_port, proxy_service, wait_idle

V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


def free_port6():
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
        s.bind(("::1", 0))
        return s.getsockname()[1]


def check_header_fields(me, fields, vip, port, what):
    check_eq(fields["client_addr"], me[0], f"{what}: client address in the header")
    check_eq(int(fields["client_port"]), me[1], f"{what}: client port in the header")
    check_eq(fields["server_addr"], vip, f"{what}: destination address (the VIP)")
    check_eq(int(fields["server_port"]), port, f"{what}: destination port (the VIP's)")
    # The TCP peer the server sees is ferry's own connection, not the client.
    check(int(fields["peer_port"]) != me[1], f"{what}: peer port equals the client's: {fields}")


def test_ferry_to_nginx_carries_the_client_address_v1_v2_ipv4_ipv6(workdir):
    n4, n6 = free_port(), free_port6()
    ports = {("v1", 4): free_port(), ("v2", 4): free_port(), ("v1", 6): free_port6(),
             ("v2", 6): free_port6()}
    services = []
    for (version, family), port in ports.items():
        vip = "127.0.0.1" if family == 4 else "::1"
        backend = f"127.0.0.1:{n4}" if family == 4 else f"[::1]:{n6}"
        services.append(proxy_service(port, [backend], name=f"web-{version}-{family}", vip=vip,
                                      proxy_protocol=version))
    with nginx_echo([("127.0.0.1", n4), ("::1", n6)]), \
            running(workdir, base_config(workdir, services=services)) as d:
        for (version, family), port in ports.items():
            what = f"{version} IPv{family}"
            for _ in range(3):
                if family == 4:
                    # A client address of its own (127.0.0.0/8 is all loopback), so ferry's
                    # 127.0.0.1 cannot pass for it.
                    me, fields = http_get_fields("127.0.0.1", port, source_host="127.0.0.23")
                    check_eq(fields["peer_addr"], "127.0.0.1", f"{what}: ferry's own address")
                    check_header_fields(me, fields, "127.0.0.1", port, what)
                else:
                    me, fields = http_get_fields("::1", port)
                    check_header_fields(me, fields, "::1", port, what)
        for (version, family) in ports:
            wait_idle(d, service=f"web-{version}-{family}")


def test_ipv6_client_of_its_own_address_reaches_nginx_in_a_namespace(workdir):
    """In a namespace of the test's own, with the client on fd77::2, ferry's vip on fd77::1 and
    nginx on fd77::3: nginx's $proxy_protocol_addr is the client's address, not ferry's."""
    here = os.path.dirname(os.path.abspath(__file__))
    with Netns("pp6", ipv6=True) as ns:
        for address in ("fd77::1/128", "fd77::2/128", "fd77::3/128"):
            ns.ip("addr", "add", address, "dev", "lo")
        services = [proxy_service(9001, ["[fd77::3]:8080"], name="v1", vip="fd77::1",
                                  proxy_protocol="v1"),
                    proxy_service(9002, ["[fd77::3]:8080"], name="v2", vip="fd77::1",
                                  proxy_protocol="v2")]
        with nginx_echo([("fd77::3", 8080)], netns=ns.name), \
                running(workdir, base_config(workdir, services=services), netns=ns.name):
            for port in (9001, 9002):
                code = (f"import json, sys; sys.path.insert(0, {here!r}); "
                        f"from pp_servers import http_get_fields; "
                        f"print(json.dumps(http_get_fields('fd77::1', {port}, 'fd77::2')))")
                out = ns.run(sys.executable, "-c", code).stdout
                me, fields = json.loads(out)
                check_eq(me[0], "fd77::2", "the client's address")
                check_header_fields(me, fields, "fd77::1", port, f"namespace port {port}")
                check(fields["peer_addr"] != "fd77::2", f"the TCP peer is ferry: {fields}")


def test_ferry_to_haproxy_accept_proxy_v1_and_v2(workdir):
    h1, h2 = free_port(), free_port()
    body = "\n".join(
        f"""frontend fe{i}
  mode http
  bind 127.0.0.1:{p} accept-proxy
  http-request return status 200 content-type text/plain lf-string "%[src] %[src_port] %[dst] %[dst_port] %[fc_src] %[fc_src_port]\\n"
""" for i, p in ((1, h1), (2, h2)))
    p1, p2 = free_port(), free_port()
    services = [proxy_service(p1, [f"127.0.0.1:{h1}"], name="hap-v1", proxy_protocol="v1"),
                proxy_service(p2, [f"127.0.0.1:{h2}"], name="hap-v2", proxy_protocol="v2")]
    with haproxy(body, [("127.0.0.1", h1), ("127.0.0.1", h2)]), \
            running(workdir, base_config(workdir, services=services)):
        for port, what in ((p1, "v1"), (p2, "v2")):
            me, fields = http_get_fields("127.0.0.1", port, source_host="127.0.0.42")
            check_eq(fields["peer_addr"], "127.0.0.1", f"haproxy {what}: the TCP peer is ferry")
            check_header_fields(me, fields, "127.0.0.1", port, f"haproxy {what}")


def test_ferry_accepts_haproxy_send_proxy_v2_and_passes_the_client_on(workdir):
    """client -> HAProxy (send-proxy-v2) -> ferry (accept_proxy_protocol, proxy_protocol v1)
    -> nginx (proxy_protocol): nginx sees the client that connected to HAProxy."""
    n4 = free_port()
    ferry_port, hap_port = free_port(), free_port()
    body = f"""frontend fe
  mode tcp
  bind 127.0.0.1:{hap_port}
  default_backend be
backend be
  mode tcp
  server ferry 127.0.0.1:{ferry_port} send-proxy-v2
"""
    service = proxy_service(ferry_port, [f"127.0.0.1:{n4}"], accept_proxy_protocol=True,
                            proxy_protocol="v1")
    with nginx_echo([("127.0.0.1", n4)]), running(workdir, base_config(workdir, services=[service])) as d, \
            haproxy(body, [("127.0.0.1", hap_port)]):
        for _ in range(3):
            me, fields = http_get_fields("127.0.0.1", hap_port, source_host="127.0.0.77")
            check_header_fields(me, fields, "127.0.0.1", hap_port, "through HAProxy and ferry")
        wait_idle(d)
        m = Metrics(d)
        # (HAProxy's connection for the readiness probe may end before its header: truncated.)
        for reason in ("malformed", "absent", "too_long", "timeout"):
            check_eq(m.value("ferry_proxy_header_rejected_total", service="web", reason=reason),
                     0, f"rejected {reason}")


def v2_header(src, dst, sport, dport, tlvs=b""):
    family = socket.AF_INET6 if ":" in src else socket.AF_INET
    block = socket.inet_pton(family, src) + socket.inet_pton(family, dst) + \
        struct.pack("!HH", sport, dport) + tlvs
    fam = 0x11 if family == socket.AF_INET else 0x21
    return V2_SIGNATURE + bytes([0x21, fam]) + struct.pack("!H", len(block)) + block


def test_accepted_header_is_the_client_and_data_after_it_is_forwarded_intact(workdir):
    payload = bytes(range(256)) * 40
    b = RecordingBackend(expect_bytes=1, reply=b"ok")
    try:
        port = free_port()
        service = proxy_service(port, [b.endpoint()], accept_proxy_protocol=True,
                                proxy_protocol="v2")
        with running(workdir, base_config(workdir, services=[service])) as d:
            cases = [
                (b"PROXY TCP4 198.51.100.7 203.0.113.9 41000 443\r\n",
                 v2_header("198.51.100.7", "203.0.113.9", 41000, 443)),
                (v2_header("2001:db8::7", "2001:db8::9", 1, 65535, tlvs=b"\x04\x00\x02ab"),
                 v2_header("2001:db8::7", "2001:db8::9", 1, 65535)),
                # LOCAL and UNKNOWN: the connection's own ends go out.
                (b"PROXY UNKNOWN\r\n", None),
                (V2_SIGNATURE + b"\x20\x00\x00\x00", None),
            ]
            for i, (incoming, outgoing) in enumerate(cases):
                with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
                    c.sendall(incoming + payload)  # one segment: header and data together
                    c.shutdown(socket.SHUT_WR)
                    me = c.getsockname()
                    check_eq(c.recv(16), b"ok", f"case {i}: the backend answered")
                    got = b.wait_closed(i + 1)[i]
                if outgoing is None:
                    outgoing = v2_header("127.0.0.1", "127.0.0.1", me[1], port)
                check_eq(got[:len(outgoing)], outgoing, f"case {i}: the outgoing header")
                check_eq(got[len(outgoing):], payload, f"case {i}: the client data after it")
            m = wait_idle(d)
            check_eq(m.value("ferry_proxy_header_rejected_total", service="web"), 0, "rejected")
            check_eq(m.value("ferry_proxy_bytes_in_total", service="web"), 4 * len(payload),
                     "bytes_in counts the client data, not the headers")
    finally:
        b.close()


def expect_reset(sock, timeout_s):
    """Reads until the connection ends; True when it ended by a reset. Returns (reset, seconds)."""
    started = time.monotonic()
    sock.settimeout(timeout_s)
    try:
        while sock.recv(4096):
            pass
        return False, time.monotonic() - started
    except ConnectionResetError:
        return True, time.monotonic() - started


def test_bad_headers_are_reset_counted_and_never_reach_a_backend(workdir):
    b = RecordingBackend()
    try:
        port = free_port()
        service = proxy_service(port, [b.endpoint()], accept_proxy_protocol=True)
        with running(workdir, base_config(workdir, services=[service])) as d:
            def send(data, close_write=False):
                c = socket.create_connection(("127.0.0.1", port), timeout=10)
                if data:
                    c.sendall(data)
                if close_write:
                    c.shutdown(socket.SHUT_WR)
                return c

            cases = [
                ("malformed", b"PROXY TCP4 1.2.3.4 5.6.7.8 01 80\r\nGET / HTTP/1.1\r\n\r\n", False),
                ("malformed", b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\nGET /\r\n", False),
                ("malformed", V2_SIGNATURE + b"\x22\x11\x00\x0c" + bytes(12), False),
                ("absent", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", False),
                ("absent", b"\x16\x03\x01\x00\x05hello", False),
                ("too_long", b"PROXY TCP4 " + b"1" * 200 + b"\r\n", False),
                ("too_long", V2_SIGNATURE + b"\x21\x11\xff\xff" + bytes(64), False),
                ("truncated", b"PROXY TCP4 192.0.2.1 19", True),
                ("truncated", V2_SIGNATURE + b"\x21\x11\x00\x0c" + bytes(4), True),
            ]
            expected = {}
            for reason, data, close_write in cases:
                c = send(data, close_write)
                reset, seconds = expect_reset(c, 5)
                c.close()
                check(reset, f"{reason} {data[:24]!r}: the connection was reset")
                check(seconds < 2, f"{reason}: reset after {seconds:.2f}s, not at once")
                expected[reason] = expected.get(reason, 0) + 1
            # Slow: a partial header, and one byte every 400 ms (the 3 s deadline is for the whole).
            slow = send(b"PROXY TCP4 192.0.2.1 ")
            drip = send(b"P")
            started = time.monotonic()
            drip_reset = False
            for ch in b"ROXY TCP4 192.0.2.1 192.0.2.2 1 2":
                if time.monotonic() - started > 4:
                    break
                time.sleep(0.4)
                try:
                    drip.send(bytes([ch]))
                except OSError:  # ECONNRESET, or EPIPE once the reset was reported
                    drip_reset = True
                    break
            for c, already in ((slow, False), (drip, drip_reset)):
                reset = already or expect_reset(c, 5)[0]
                c.close()
                check(reset, "a slow header is reset")
            expected["timeout"] = 2
            m = wait_idle(d)
            for reason in ("malformed", "absent", "too_long", "truncated", "timeout"):
                check_eq(m.value("ferry_proxy_header_rejected_total", service="web", reason=reason),
                         expected.get(reason, 0), f"rejected {reason}")
            check_eq(b.accepted(), 0, "connections that reached the backend")
            check_eq(m.value("ferry_proxy_backend_connections_total", service="web"), 0,
                     "backend connections")
            # The daemon is unaffected: a good header still goes through.
            with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
                c.sendall(b"PROXY TCP4 192.0.2.1 192.0.2.2 1000 80\r\nhello")
                c.shutdown(socket.SHUT_WR)
                check_eq(b.wait_closed(1)[0], b"hello", "good client after the bad ones")
            check(d.proc.poll() is None, "ferryd still running")
            # A header still arriving when ferryd stops: the stop ends it (exit 0, no report).
            pending = send(b"PROXY TCP4 ")
        pending.close()
    finally:
        b.close()
