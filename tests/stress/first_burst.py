#!/usr/bin/env python3
"""Stress loop for the first burst of a brand-new client (issue 23, item 2); not part of make test.
Each run builds a fresh burst lab (tests/integration/burst_lab.py) and starts a fresh ferryd with
nothing sent before; then, for IPv4 and IPv6, it puts the gateway's neighbour entry of a new client
address into each state of burst_lab.STATES (the client host's very first contact, none, STALE from
an ARP request / NS or written by hand, INCOMPLETE while resolving or written by hand, DELAY, PROBE,
FAILED) and sends a burst from it (600 sockets, one datagram each, at once; 300 over IPv6). An
address that lost replies sends a second burst more than ferry's hold timeout later: a next hop left
stuck loses that one too. Busy loops keep every CPU contended throughout; --churn adds a process
rewriting thousands of neighbour entries of another interface of the gateway (notification floods,
netlink overruns). Prints one line per run with what was lost and why, then a summary; exits 1 when
a reply was lost that no kernel on the way counted.

  sudo tests/stress/first_burst.py [--runs N] [--hogs H] [--states first_contact,none,...]
      [--families 4,6] [--v4 600] [--v6 300] [--churn ENTRIES] [--build DIR] [--keep-logs DIR]

FERRYD=/path/to/ferryd runs another binary (say, one built before a fix) in the same loop.
"""
import argparse
import contextlib
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--hogs", type=int, default=os.cpu_count(), help="busy loops during the runs")
    ap.add_argument("--v4", type=int, default=600)
    ap.add_argument("--v6", type=int, default=300)
    ap.add_argument("--states", default="all",
                    help="comma-separated state names of burst_lab.STATES (first_contact, none, ...)")
    ap.add_argument("--families", default="4,6")
    ap.add_argument("--churn", type=int, default=0,
                    help="neighbour entries a gateway-side process rewrites in a loop (0: none)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--keep-logs", help="directory for the ferryd logs of runs that lost replies")
    args = ap.parse_args()
    os.environ.setdefault("FERRYD", os.path.join(args.build, "daemon", "ferryd"))
    os.environ.setdefault("SOURCE_ROOT", ROOT)
    # Imported after FERRYD is set: the harness reads it at import.
    import burst_lab
    from burst_lab import BurstLab, Hogs, burst_config, diff, neighbour_figures
    from harness import Workdir, running

    states = [s for s in burst_lab.STATES
              if args.states == "all" or s.__name__[len("state_"):] in args.states.split(",")]
    families = args.families.split(",")
    # One fresh client address per (family, state); first_contact uses the client's main one.
    addresses = {}
    for fam in families:
        for i, state in enumerate(states):
            if state is burst_lab.state_first_contact:
                addresses[fam, state] = burst_lab.CLIENT4 if fam == "4" else burst_lab.CLIENT6
            else:
                addresses[fam, state] = f"10.10.1.{20 + i}" if fam == "4" else f"fd00:1::{20 + i:x}"
    extra = [a for (f, s), a in addresses.items() if s is not burst_lab.state_first_contact]

    def stop(*_):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)  # ends the loop the way ^C does: every lab cleaned up

    totals = {"runs": 0, "clean": 0, "lost_by_ferry": 0, "lost_elsewhere": 0, "stuck": 0}
    lost_by_state = {}
    started = time.monotonic()
    with Hogs(args.hogs, seconds=36000), contextlib.suppress(KeyboardInterrupt):
        for run in range(args.runs):
            w = Workdir()
            lab = None
            try:
                lab = BurstLab(tag=f"s{run % 1000}", extra_clients=extra)
                lab.start_echo(w.file("echo.log"))
                if args.churn:
                    burst_lab.NeighbourChurn(lab, args.churn)
                with running(w, burst_config(w, log_level="debug"), netns=lab.gw.name) as d:
                    lines, lost_run, lossy = [], 0, []
                    for fam in families:
                        count = args.v4 if fam == "4" else args.v6
                        for state in states:
                            name = state.__name__[len("state_"):]
                            address = addresses[fam, state]
                            state(lab, address)
                            before = lab.gateway_neighbour(address)[0]
                            f0, k0 = neighbour_figures(d), lab.lost_outside_ferry()
                            res = lab.burst(address, count)
                            f1, k1 = neighbour_figures(d), lab.lost_outside_ferry()
                            elsewhere = sum(diff(k1, k0).values())
                            missing = res["sent"] - res["answered"]
                            by_ferry = max(0, missing - elsewhere)
                            lost_run += by_ferry
                            totals["lost_elsewhere"] += min(missing, elsewhere)
                            if by_ferry:
                                lost_by_state[f"v{fam} {name}"] = lost_by_state.get(f"v{fam} {name}", 0) + 1
                                lossy.append(address)
                            lines.append(f"v{fam} {name} [{'/'.join(before) or '-'}]: "
                                         f"{res['answered']}/{res['sent']} {res['last_ms']:.0f} ms "
                                         f"ferry {diff(f1, f0)} kernels {diff(k1, k0)} now "
                                         f"{'/'.join(lab.gateway_neighbour(address)[0]) or '-'}")
                    # A next hop whose held frames timed out must not stay stuck: a later burst
                    # from the same address (after ferry's 1 s hold timeout) is answered in full.
                    for address in lossy:
                        time.sleep(1.2)  # the scenario: a client that comes back after a while
                        res = lab.burst(address, args.v4 if ":" not in address else args.v6)
                        again = res["sent"] - res["answered"]
                        totals["stuck"] += again > 0
                        lines.append(f"again {address}: {res['answered']}/{res['sent']}")
                    totals["runs"] += 1
                    totals["lost_by_ferry"] += lost_run
                    totals["clean"] += lost_run == 0
                    if lost_run and args.keep_logs:
                        os.makedirs(args.keep_logs, exist_ok=True)
                        with open(os.path.join(args.keep_logs, f"run{run}.log"), "w") as f:
                            f.write(d.log())
                    print(("LOST " if lost_run else "ok   ") + f"run {run}: " + "; ".join(lines),
                          flush=True)
            except Exception as e:  # a broken run is reported, and the loop goes on
                print(f"ERROR run {run}: {e!r}", flush=True)
            finally:
                if lab:
                    lab.close()
                w.cleanup()
    minutes = (time.monotonic() - started) / 60
    print(f"summary: {totals['clean']} of {totals['runs']} runs lost nothing in ferry "
          f"({args.runs} started); replies lost by ferry {totals['lost_by_ferry']} (runs by state: "
          f"{lost_by_state}), lost where a kernel counted it {totals['lost_elsewhere']}; addresses "
          f"still losing on a later burst {totals['stuck']}; states "
          f"{[s.__name__[6:] for s in states]}, {args.hogs} busy loops, {minutes:.1f} min",
          flush=True)
    return 0 if totals["lost_by_ferry"] == 0 and totals["runs"] == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
