#!/usr/bin/env python3
"""Explains each failed connection of the soak's TCP generator by the events the soak caused:
a connection whose backend process was killed under it is an expected drop, anything else (and
any wrong byte) is unexplained. All times are CLOCK_MONOTONIC seconds, shared by the processes."""

# A connection whose hello no backend read, started before the killed process was gone (its
# listener completes handshakes until the process has exited, a few ms after the SIGKILL) and cut
# by a reset or EOF this soon after, was in the killed backend's accept queue or not yet read by
# its thread: the kernel had completed the proxy's connect, so the kill reset it. The soak kills
# 0.5 s after a reload and reloads next at least 0.5 s after the kill, so a drop a reload caused
# cannot fall in this window; 0.4 s leaves room for a client a loaded machine schedules late.
QUEUED_WINDOW_S = 0.4
CUT_CAUSES = ("reset", "eof", "broken_pipe")


class Kill:
    """One TCP backend process killed (SIGKILL) and restarted on its port."""

    def __init__(self, label, port, t_kill, t_dead, open_ids):
        self.label = label          # which backend process, e.g. "web[1]#3"
        self.port = port
        self.t_kill = t_kill        # SIGKILL sent
        self.t_dead = t_dead        # the process reaped: its listener and connections are closed
        self.open_ids = open_ids    # connections whose hello it had read and not yet closed
        self.t_ready = None         # when its replacement listened
        self.cut = 0                # failures explained by this kill, hello seen
        self.queued = 0             # failures explained by this kill, hello not yet read


def nearest(times, t):
    """The signed distance in seconds from t to the nearest of times (None if there are none)."""
    if not times:
        return None
    best = min(times, key=lambda x: abs(x - t))
    return round(t - best, 3)


def explain(failure, kills, hello_at, reload_times):
    """Sets failure["why"] and failure["expected"]; adds context to unexplained ones."""
    conn_id = failure["id"]
    f_start, f_end = failure["t_start"], failure["t_end"]
    if failure["cause"] != "wrong_bytes":
        for k in kills:
            if conn_id in k.open_ids and f_end >= k.t_kill:
                k.cut += 1
                failure.update(why=f"backend {k.label} killed under it", expected=True)
                return
        if conn_id not in hello_at and failure["cause"] in CUT_CAUSES:
            for k in kills:
                if f_start <= k.t_dead and k.t_kill <= f_end <= k.t_dead + QUEUED_WINDOW_S:
                    k.queued += 1
                    failure.update(why=f"backend {k.label} killed before it read the hello",
                                   expected=True)
                    return
    seen = hello_at.get(conn_id)
    failure.update(why="unexplained", expected=False,
                   hello_at=seen[0] if seen else None,
                   backend_end=seen[1] if seen else None,
                   from_reload_s=nearest(reload_times, f_end),
                   from_kill_s=nearest([k.t_kill for k in kills], f_end),
                   start_from_dead_s=nearest([k.t_dead for k in kills], f_start))


def explain_all(failures, kills, hello_at, reload_times):
    """hello_at: connection id -> (backend label, how the backend saw it end or None)."""
    for f in failures:
        explain(f, kills, hello_at, reload_times)
    return [f for f in failures if not f["expected"]]


def breakdown(failures):
    """Markdown table: one row per cause, one column per explanation kind."""
    kinds = ["killed under it", "before hello", "unexplained"]

    def kind(f):
        if not f["expected"]:
            return "unexplained"
        return "before hello" if "before it read the hello" in f["why"] else "killed under it"

    causes = sorted({f["cause"] for f in failures})
    out = ["| cause | " + " | ".join(kinds) + " | total |", "|---|" + "---|" * (len(kinds) + 1)]
    for c in causes:
        row = [sum(1 for f in failures if f["cause"] == c and kind(f) == k) for k in kinds]
        out.append(f"| {c} | " + " | ".join(map(str, row)) + f" | {sum(row)} |")
    totals = [sum(1 for f in failures if kind(f) == k) for k in kinds]
    out.append("| all | " + " | ".join(map(str, totals)) + f" | {len(failures)} |")
    return "\n".join(out)


def kill_table(kills, started):
    out = ["| backend | killed at t_s | gone after ms | replacement listening after ms | "
           "open (hello read) | failures: killed under it | failures: before hello |",
           "|---|---|---|---|---|---|---|"]
    for k in kills:
        ready_ms = round((k.t_ready - k.t_kill) * 1000) if k.t_ready else "-"
        out.append(f"| {k.label} | {k.t_kill - started:.2f} | {(k.t_dead - k.t_kill) * 1000:.1f} | "
                   f"{ready_ms} | {len(k.open_ids)} | {k.cut} | {k.queued} |")
    return "\n".join(out)


def failure_lines(failures, started, limit=60):
    lines = []
    for f in failures[:limit]:
        extra = ""
        if not f["expected"]:
            extra = (f" hello_at={f['hello_at']} backend_end={f['backend_end']}"
                     f" from_reload_s={f['from_reload_s']} from_kill_s={f['from_kill_s']}"
                     f" start_from_dead_s={f['start_from_dead_s']}")
        lines.append(f"  t={f['t_end'] - started:8.3f}s open {1000 * (f['t_end'] - f['t_start']):7.1f} ms "
                     f"{f['cause']:<12} at {f['stage']:<7} got {f['got_bytes']:>4} B  {f['why']}{extra}")
    if len(failures) > limit:
        lines.append(f"  ... and {len(failures) - limit} more")
    return "\n".join(lines)
