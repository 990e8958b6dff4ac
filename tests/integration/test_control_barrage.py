"""Issue 23, "never down on bad input": the real ferryd answers every malformed control line of
docs/control-protocol.md's error table, and the {"id":1,"cmd":42} family that once ended it, with
the documented error and id, from root, from a uid without admin access (a child that dropped to
`nobody`) and from a TCP control client, each on one connection that stays usable; a line over
64 KiB and a wrong token close theirs as documented; then status, a metrics scrape and SIGTERM
(exit 0) still work and the daemon never restarted."""
import json
import os
import socket

from harness import (ControlClient, as_nobody, check, check_eq, http_get, metrics_endpoint, ok,
                     running, tcp_control_config)

TOKEN = "barrage-token"
BIG = 65536  # the request line limit
CUT_OFF = 20  # clients that close in the middle of a line, per peer


def deep(levels):
    return b'{"id":1,"cmd":"status","args":{"a":' + b"[" * levels + b"]" * levels + b"}}"


# (line, id the error answer carries, code for an admin peer, code for a peer without admin
# access). None as the code: a blank line, which gets no answer at all.
READ_ERRORS = [
    # not a JSON object, or not JSON at all: "id":null
    (b"{not json", None, "bad_request"),
    (b"[1,2,3]", None, "bad_request"),
    (b'"str"', None, "bad_request"),
    (b"42", None, "bad_request"),
    (b"null", None, "bad_request"),
    (b"true", None, "bad_request"),
    (b'{"id":1,"cmd":"status"', None, "bad_request"),  # a partial object
    (b"\xff\xfe\x00garbage\x01\x02", None, "bad_request"),
    (b'{"id":1,"cmd":"st\xffatus"}', None, "bad_request"),  # invalid UTF-8 in a string
    (b'{"id":1,"cmd":"status","x":"\xc0\xaf"}', None, "bad_request"),  # overlong encoding
    (b"[" * 5000, None, "bad_request"),
    (deep(40), None, "bad_request"),  # deeper than 32, never parsed
    # the id of every wrong type: "id":null
    (b'{"id":"1","cmd":"status"}', None, "bad_request"),
    (b'{"id":1.5,"cmd":"status"}', None, "bad_request"),
    (b'{"id":[1],"cmd":"status"}', None, "bad_request"),
    (b'{"id":{"n":1},"cmd":"status"}', None, "bad_request"),
    (b'{"id":true,"cmd":"status"}', None, "bad_request"),
    (b'{"id":9223372036854775808,"cmd":"status"}', None, "bad_request"),
    (b'{"id":1e3,"cmd":"status"}', None, "bad_request"),
    # cmd of every wrong type, missing or malformed: the id comes back
    (b'{"id":1,"cmd":42}', 1, "bad_request"),
    (b'{"id":2,"cmd":["handover"]}', 2, "bad_request"),
    (b'{"id":3,"cmd":{"handover":true}}', 3, "bad_request"),
    (b'{"id":4,"cmd":null}', 4, "bad_request"),
    (b'{"id":5,"cmd":true}', 5, "bad_request"),
    (b'{"id":6,"cmd":false}', 6, "bad_request"),
    (b'{"id":7,"cmd":1.5}', 7, "bad_request"),
    (b'{"id":8,"cmd":""}', 8, "bad_request"),
    (b'{"id":9,"cmd":"Status"}', 9, "bad_request"),
    (b'{"id":10,"cmd":"' + b"a" * 33 + b'"}', 10, "bad_request"),
    (b'{"id":11}', 11, "bad_request"),
    (b'{"id":12,"cmd":"status","extra":1}', 12, "bad_request"),
    # args not an object
    (b'{"id":13,"cmd":"status","args":[]}', 13, "bad_args"),
    (b'{"id":14,"cmd":"status","args":"x"}', 14, "bad_args"),
    (b'{"id":15,"cmd":"status","args":5}', 15, "bad_args"),
    (b'{"id":16,"cmd":"status","args":true}', 16, "bad_args"),
    (b'{"id":17,"cmd":"stats","args":{"prefix":5}}', 17, "bad_args"),
    (b'{"id":18,"cmd":"stats","args":{"prefix":null}}', 18, "bad_args"),
    (b'{"id":19,"cmd":"no_such"}', 19, "unknown_command"),
    # handover with bad types: refused before anything looks at the command
    (b'{"id":"x","cmd":"handover"}', None, "bad_request"),
    (b'{"id":20,"cmd":"handover","args":[]}', 20, "bad_args"),
    (b'{"id":21,"cmd":"handover","args":"now"}', 21, "bad_args"),
    (b'{"id":22,"cmd":"handover","extra":true}', 22, "bad_request"),
    (b'{"cmd":"handover"', None, "bad_request"),
]
# Admin commands with bad arguments: the access check comes first.
ADMIN_ERRORS = [
    (b'{"id":30,"cmd":"backend","args":{"service":"web","backend":"10.0.1.2:80","state":"off"}}',
     30, "bad_args"),
    (b'{"id":31,"cmd":"backend","args":{"service":"web","backend":"10.0.1.2:80","weight":257}}',
     31, "bad_args"),
    (b'{"id":32,"cmd":"backend","args":{"service":"web","backend":"10.0.1.2:80","weight":"1"}}',
     32, "bad_args"),
    (b'{"id":33,"cmd":"backend","args":{"service":"web","backend":"10.0.1.2:80"}}', 33, "bad_args"),
    (b'{"id":34,"cmd":"backend","args":{"service":"web","backend":"10.0.1.2","state":"drain"}}',
     34, "bad_args"),
    (b'{"id":35,"cmd":"backend","args":{"service":7,"backend":"10.0.1.2:80","state":"drain"}}',
     35, "bad_args"),
    (b'{"id":36,"cmd":"backend","args":{"service":"web","backend":"10.0.1.2:80","state":"drain",'
     b'"x":1}}', 36, "bad_args"),
    (b'{"id":37,"cmd":"backend","args":{"service":"nope","backend":"10.0.1.2:80","state":"drain"}}',
     37, "not_found"),
]
BLANK = [b"", b"   ", b"\t \r"]


def expected_cases(admin):
    cases = [(line, rid, code) for line, rid, code in READ_ERRORS]
    cases += [(line, rid, code if admin else "permission_denied") for line, rid, code in ADMIN_ERRORS]
    if not admin:
        # Well-formed admin requests, handover included, are refused to a peer without access.
        cases += [(b'{"id":40,"cmd":"reload"}', 40, "permission_denied"),
                  (b'{"id":41,"cmd":"upgrade"}', 41, "permission_denied"),
                  (b'{"id":42,"cmd":"handover"}', 42, "permission_denied"),
                  (b'{"cmd":"handover"}', None, "permission_denied")]
    return cases


def barrage(client, admin, line_end=b"\n"):
    """Every case on one connection, each followed by nothing but its answer; blank lines get
    none (the status after them proves it); then the connection still serves."""
    for line, rid, code in expected_cases(admin):
        client.send_raw(line + line_end)
        resp = client.read_line()
        check(resp is not None, f"connection closed after {line[:60]!r}")
        check_eq((resp.get("id"), resp.get("ok"), resp.get("error", {}).get("code")),
                 (rid, False, code), f"answer to {line[:60]!r} ({resp})")
        check(resp["error"].get("message"), f"an error message for {line[:60]!r}: {resp}")
    for blank in BLANK:
        client.send_raw(blank + line_end)
    check_eq(ok(client.request("status"))["state"], "running", "the same connection answers status")
    # A request in pieces is one request.
    client.send_raw(b'{"id":77,')
    client.send_raw(b'"cmd":"stat')
    client.send_raw(b'us"}' + line_end)
    resp = client.read_line()
    check_eq((resp["id"], resp["ok"]), (77, True), f"a request sent in three pieces: {resp}")
    check("reload" in [c["name"] for c in ok(client.request("help"))["commands"]], "help answers")


def unix_peer_barrage(socket_path):
    with ControlClient(socket_path) as c:
        barrage(c, admin=os.geteuid() == 0)
    with ControlClient(socket_path) as c:
        barrage(c, admin=os.geteuid() == 0, line_end=b"\r\n")


def too_large_and_partial_lines(socket_path):
    """A line over the limit is answered too_large ("id":null) and closes its connection; a
    partial line cut off by a close, or ended by a half-close, leaves the daemon as it was."""
    with ControlClient(socket_path) as c:
        c.send_raw(b'{"id":1,"cmd":"status","args":{"x":"' + b"a" * BIG + b'"}}\n')
        resp = c.read_line()
        check_eq((resp["id"], resp["error"]["code"]), (None, "too_large"), f"too_large: {resp}")
        check_eq(c.read_line(), None, "closed after too_large")
    for _ in range(CUT_OFF):
        with ControlClient(socket_path) as c:
            c.send_raw(b'{"id":1,"cmd":"sta')
    with ControlClient(socket_path) as c:
        c.send_raw(b'{"id":5,"cmd":"status"}')
        c.sock.shutdown(socket.SHUT_WR)
        resp = c.read_line()
        check_eq((resp["id"], resp["ok"]), (5, True), f"the last line of a half-closed client: {resp}")
        check_eq(c.read_line(), None, "closed after answering the half-closed client")


class TcpClient(ControlClient):
    """ControlClient over a TCP control connection."""

    def __init__(self, host, port):  # pylint: disable=super-init-not-called
        self.sock = socket.create_connection((host, port), timeout=10.0)
        self.buf = b""
        self.next_id = 1


def test_every_bad_line_gets_its_error_from_each_kind_of_peer(workdir):
    cfg = tcp_control_config(workdir, TOKEN)
    cfg["control"]["mode"] = "0666"  # nobody may connect; its uid grants read access only
    with running(workdir, cfg) as d:
        os.chmod(os.path.dirname(d.socket_path), 0o755)
        pid = ok(d.request("status"))["pid"]

        unix_peer_barrage(d.socket_path)
        as_nobody(unix_peer_barrage, d.socket_path)
        as_nobody(too_large_and_partial_lines, d.socket_path)
        too_large_and_partial_lines(d.socket_path)

        host, port = ok(d.request("status"))["control"]["tcp"].rsplit(":", 1)
        with TcpClient(host, int(port)) as c:
            c.send_raw(json.dumps({"auth": TOKEN}).encode() + b"\n")
            check_eq(c.read_line()["result"], {"authenticated": True}, "TCP auth")
            barrage(c, admin=True)
            # Over TCP a well-formed handover is the table's: bad_request, never the socket.
            resp = c.request("handover")
            check_eq(resp["error"]["code"], "bad_request", f"handover over TCP: {resp}")
        for first in (b'{"id":1,"cmd":42}', b'{"auth":"wrong"}', b"\xff"):
            with TcpClient(host, int(port)) as c:
                c.send_raw(first + b"\n" + b'{"id":2,"cmd":"status"}\n')
                resp = c.read_line()
                check_eq((resp["id"], resp["error"]["code"]), (None, "unauthorized"),
                         f"first TCP line {first!r}: {resp}")
                check_eq(c.read_line(), None, "closed after unauthorized")

        # `rejected`: a reload of a config file that does not validate; the running one stays.
        good = open(d.config_path).read()
        workdir.write_config('{"metrics": {"listne": null}}', name=os.path.basename(d.config_path))
        with d.client() as c:
            resp = c.request("reload")
            check_eq(resp["error"]["code"], "rejected", f"reload of a broken file: {resp}")
            check(d.config_path in resp["error"]["message"], f"names the file: {resp}")
        workdir.write_config(good, name=os.path.basename(d.config_path))

        status = ok(d.request("status"))
        check_eq((status["pid"], status["state"], status["reload_failures"]), (pid, "running", 1),
                 "the same ferryd serves on")
        code, headers, body = http_get(*metrics_endpoint(d))
        check_eq(code, 200, "metrics scrape")
        text = body.decode()
        # Every bad_request above: two barrages from root, two from nobody, one over TCP and its
        # handover, and the cut-off lines (a client's last line is taken at its EOF, and answered
        # to nobody).
        per_run = {admin: sum(code == "bad_request" for _, _, code in expected_cases(admin))
                   for admin in (True, False)}
        counted = 3 * per_run[True] + 2 * per_run[False] + 1 + 2 * CUT_OFF
        check(f'ferry_control_bad_requests_total{{reason="bad_request"}} {counted}\n' in text,
              f"{counted} bad requests counted: "
              f"{[l for l in text.splitlines() if 'bad_requests_total' in l]}")
        check('ferry_control_bad_requests_total{reason="too_large"} 2' in text,
              "both too_large lines counted")
        check_eq(d.stop(), 0, "ferryd's exit status after SIGTERM")
