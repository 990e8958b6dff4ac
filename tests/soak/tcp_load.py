#!/usr/bin/env python3
"""The soak's TCP client: short echo connections through the proxy, back to back, until SIGTERM.
Every failed connection is kept with its cause, stage and CLOCK_MONOTONIC times (the soak's clock
too), so the soak can match each failure to the backend kill or reload that caused it.

Usage: tcp_load.py PORT; on SIGTERM prints one JSON line {"ok", "failed", "failures": [...]}
(the first MAX_KEPT failures; "failed" counts them all).
A failure is {"id", "cause", "stage", "got_bytes", "t_start", "t_end", "src_port"}: cause is
"refused", "connect_timeout", "reset", "broken_pipe", "eof" (closed before the whole echo),
"timeout" (no byte for TIMEOUT_S), "wrong_bytes" or another errno name; stage is where it
happened ("connect", "send", "recv")."""
import errno
import json
import os
import signal
import socket
import struct
import sys
import time

# Long enough that a loaded 2-core machine does not look like a lost connection, short enough
# that a connection the proxy forgot shows up as "timeout" within the soak.
TIMEOUT_S = 2.0
PAYLOAD = bytes(range(256)) * 8
# The backend protocol of tests/integration/proxy_peers.py: hello + one echo op.
ECHO_OP = struct.pack("!cQ", b"E", len(PAYLOAD))
# A proxy that refuses everything fails thousands of connections a second: keep the memory bounded.
MAX_KEPT = 10000


def cause_of(exc, stage):
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, socket.timeout):
        return "connect_timeout" if stage == "connect" else "timeout"
    if isinstance(exc, ConnectionResetError):
        return "reset"
    if isinstance(exc, BrokenPipeError):
        return "broken_pipe"
    if exc.errno:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return type(exc).__name__


def one_connection(port, conn_id):
    """Returns None when the echo came back whole, else (cause, stage, got_bytes, src_port)."""
    stage, got, src_port = "connect", b"", 0
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as s:
            src_port = s.getsockname()[1]
            stage = "send"
            s.sendall(b"H" + conn_id.encode() + ECHO_OP + PAYLOAD)
            stage = "recv"
            while len(got) < len(PAYLOAD):
                chunk = s.recv(65536)
                if not chunk:
                    return ("eof", stage, len(got), src_port)
                got += chunk
    except OSError as e:
        return (cause_of(e, stage), stage, len(got), src_port)
    if got != PAYLOAD:
        return ("wrong_bytes", stage, len(got), src_port)
    return None


def main():
    port = int(sys.argv[1])
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    ok, failed, failures = 0, 0, []
    while not stop:
        conn_id = os.urandom(8).hex()
        t_start = time.monotonic()
        result = one_connection(port, conn_id)
        if result is None:
            ok += 1
            continue
        failed += 1
        if len(failures) >= MAX_KEPT:
            continue
        cause, stage, got_bytes, src_port = result
        failures.append({"id": conn_id, "cause": cause, "stage": stage, "got_bytes": got_bytes,
                         "t_start": t_start, "t_end": time.monotonic(), "src_port": src_port})
    print(json.dumps({"ok": ok, "failed": failed, "failures": failures}), flush=True)


if __name__ == "__main__":
    main()
